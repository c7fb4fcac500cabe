"""The run in Markdown, for a pull request: per gate the verdict and the figures that decided it,
then the items whose score moved most, the comparator's answer beside the target's.

Everything that comes from a run — answers above all, but also test ids and model names — is
flattened to one line, shortened, HTML-escaped and stripped of Markdown's meaning, so that no
answer can break the table, start a heading, open a link or inject HTML. Rendered from the JSON
document's gate entries alone (``llmbias report RUN.json --markdown`` prints a saved run's).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_llmbias.report import readable

#: characters of an answer shown in a table cell
ANSWER_CHARS = 160
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>:])")


def escape(text: Any, limit: int | None = None) -> str:
    """``text`` as inert Markdown: one line, at most ``limit`` characters (an ellipsis marks a
    cut), ``&``, ``<`` and ``>`` as entities, every Markdown punctuation mark backslash-escaped."""
    flat = " ".join(str(text).split())
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return _SPECIAL.sub(r"\\\1", html.escape(flat, quote=False))


def _number(value: Any, column: str = "") -> str:
    """A figure as a reader reads it (see :mod:`pytest_llmbias.report.readable`): never an exponent."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, (int, float)):
        return html.escape(readable.p_figure(value) if column == "p" else readable.number(value, brief=True))
    return escape(value)


def _alias(model: Any) -> Any:
    """A model as a result names it: its alias, or a mapping of its figures that holds one."""
    return model.get("alias") if isinstance(model, Mapping) else model


def markdown_report(gates: Iterable[Mapping[str, Any]], *, moved: int = 5) -> str:
    """The Markdown of a run's gate entries (see the module docstring): a summary table (a row a
    check, the gate's outcome on each: :mod:`pytest_llmbias.report.rows`) and the gates counted
    once each by outcome, then per gate its verdict, why, and up to ``moved`` items that moved most
    per comparison."""
    from pytest_llmbias.report.rows import check_rows, count

    entries = sorted(gates, key=lambda e: str(e.get("test")))
    lines = [
        "## pytest-llmbias",
        "",
        "| test | outcome | verdict | check | target | comparators | margin | p |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for e in entries:
        for c in check_rows(e):
            f = c.figures
            lines.append(
                f"| {escape(c.test)} | {escape(c.outcome)} | **{escape(c.verdict)}**"
                + (f" ({escape(c.note)})" if c.note else "")
                + f" | {escape(c.method)} | {_number(f.get('target'))} | "
                f"{_number(f.get('baselines'))} | {_number(f.get('bound'))} | {_number(f.get('p'), 'p')} |"
            )
    lines += ["", f"{html.escape(count(entries).sentence())}.", ""]  # words and figures of its own
    for e in entries:
        result = e.get("result") or {}
        lines += [f"### {escape(e.get('test'))}: {escape(str(e.get('verdict')).upper())}", ""]
        why = result.get("why") or result.get("error")
        if why:
            lines += [escape(why, 600), ""]
        compared = ", ".join(escape(_alias(b)) for b in result.get("baselines") or ())
        if compared:
            lines += [f"target {escape(_alias(result.get('target')))} against {compared}", ""]
        items = list(result.get("moved") or ())
        for method in dict.fromkeys(str(i.get("method")) for i in items):
            mine = [i for i in items if str(i.get("method")) == method][:moved]
            other = escape(mine[0].get("comparator_alias", "comparators"))
            lines += [
                f"What moved most ({escape(method)}; the target's score minus {other}'s, worse first):",
                "",
                f"| item | {other} | target | change | {other}'s answer | the target's answer |",
                "|---|---:|---:|---:|---|---|",
            ]
            for i in mine:
                lines.append(
                    f"| {escape(i.get('item'))} | {_number(i.get('comparator'))} | {_number(i.get('target'))} | "
                    f"{float(i.get('delta') or 0):+.3g} | {escape(i.get('comparator_text'), ANSWER_CHARS)} | "
                    f"{escape(i.get('target_text'), ANSWER_CHARS)} |"
                )
            lines.append("")
        for w in result.get("warnings") or ():
            lines += [f"warning: {escape(w, 400)}", ""]
    return "\n".join(lines) + "\n"
