"""Figures as a reader reads them, in every place a person reads one: the HTML report's tables, its
plot captions, and the one-line ``why`` under a verdict. Never an exponent: a figure nearer zero
than :data:`NEGLIGIBLE` says it is zero for practical purposes, and a p-value below
:data:`P_FLOOR` reads "p < 0.001". Standard library only."""

from __future__ import annotations

import math

#: below this (in absolute value) a figure is zero for every practical purpose, and says so
NEGLIGIBLE = 1e-4
#: the smallest p-value stated as a number; below it, "p < 0.001"
P_FLOOR = 1e-3
#: what a figure below :data:`NEGLIGIBLE` reads
PRACTICALLY_ZERO = "below 0.0001 (practically zero)"


def number(x: float | None, *, brief: bool = False) -> str:
    """``x`` with four significant figures and no exponent: ``-`` when missing, ``0`` when zero,
    :data:`PRACTICALLY_ZERO` (``≈0`` when ``brief``: an interval's end, a list's item) when nearer
    zero than :data:`NEGLIGIBLE` (either sign), whole from 1,000."""
    if x is None:
        return "-"
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) < NEGLIGIBLE:
        return "≈0" if brief else PRACTICALLY_ZERO
    if abs(x) >= 1e3:  # whole: four significant figures of 9999.7 would read 1e+04
        return f"{x:.0f}"
    return f"{x:.4g}"


def signed(x: float | None) -> str:
    """:func:`number` with a ``+`` before a positive figure (a difference)."""
    text = number(x)
    return f"+{text}" if x is not None and x > 0 and text[0].isdigit() and abs(x) >= NEGLIGIBLE else text


def p_figure(p: float | None) -> str:
    """A p-value in a table's cell: three significant figures, ``< 0.001`` below :data:`P_FLOOR`,
    ``-`` when missing."""
    if p is None or math.isnan(float(p)):
        return "-"
    return "< 0.001" if p < P_FLOOR else f"{float(p):.3g}"


def p_value(p: float | None) -> str:
    """A p-value in a sentence: ``p = 0.0123``, ``p < 0.001`` (see :func:`p_figure`)."""
    figure = p_figure(p)
    return f"p {figure}" if figure.startswith("<") else f"p = {figure}"


def rate(x: float) -> str:
    """A rate as every report writes one (:func:`~pytest_llmbias.stats.multiple.fmt_rate`: 2.5%,
    32%), or "below 0.01% (practically none)" for a rate that is zero for practical purposes but
    not zero."""
    from pytest_llmbias.stats.multiple import fmt_rate

    return "below 0.01% (practically none)" if 0 < x < NEGLIGIBLE else fmt_rate(x)
