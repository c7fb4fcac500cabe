"""Many gates in one session: the chance that a good release fails some gate, and Holm's
step-down procedure to share one false-alarm rate among them.

Sources: Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6
(1979); the union (Bonferroni) bound P(∪ Aᵢ) ≤ Σ P(Aᵢ).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.errors import StatisticsError

__all__ = ["BONFERRONI", "HOLM", "FamilyBound", "HolmResult", "familywise_bound", "fmt_rate", "holm"]

BONFERRONI = "bonferroni"
"""The name of the sharing in which each of m gates gets alpha / m."""
HOLM = "holm"
"""The name of the sharing by Holm's step-down (see :func:`holm`)."""


def _check_alpha(alpha: Any, what: str = "alpha") -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise StatisticsError(f"{what} must lie strictly between 0 and 1, got {alpha!r}")
    return float(alpha)


@dataclass(frozen=True)
class HolmResult:
    """Holm's step-down at ``alpha``: per p-value, in the order given, whether its null is
    rejected, its adjusted p-value (reject exactly when it is at most ``alpha``) and the level it
    was compared with (α / (m − rank), rank 0 for the smallest p)."""

    reject: tuple[bool, ...]
    adjusted: tuple[float, ...]
    levels: tuple[float, ...]
    alpha: float


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> HolmResult:
    """Holm's step-down procedure: sort the m p-values, compare the i-th smallest (i from 0) with
    α / (m − i), reject up to the first that is larger, and none after it. Controls the
    family-wise error rate at α under any dependence. Adjusted p-values: the running maximum of
    (m − i)·p₍ᵢ₎, capped at 1 (as statsmodels' ``multipletests(method="holm")``). Raises
    :class:`StatisticsError` for a p-value outside [0, 1] or an alpha outside (0, 1)."""
    alpha = _check_alpha(alpha)
    ps = [float(p) for p in pvalues]
    if any(not 0 <= p <= 1 for p in ps):
        raise StatisticsError(f"p-values must lie in [0, 1], got {[p for p in ps if not 0 <= p <= 1][:3]}")
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    reject, adjusted, levels = [False] * m, [1.0] * m, [alpha] * m
    running, stopped = 0.0, False
    for rank, i in enumerate(order):
        levels[i] = alpha / (m - rank)
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
        stopped = stopped or ps[i] > levels[i]
        reject[i] = not stopped
    return HolmResult(tuple(reject), tuple(adjusted), tuple(levels), alpha)


@dataclass(frozen=True)
class FamilyBound:
    """The chance that a good release fails at least one of ``gates`` gates whose own false-alarm
    rates are ``rates``: ``independent`` if the gates were independent (1 − Π(1 − rᵢ)), and
    ``at_most`` under any dependence (the union bound, min(1, Σ rᵢ))."""

    gates: int
    rates: tuple[float, ...]
    independent: float
    at_most: float

    def sentence(self) -> str:
        """``15 gates at 5 % each: a good release fails some gate with probability up to 54 %
        (independent gates; at most 75 % whatever their dependence)``; for one gate, its own rate."""
        if self.gates == 1:
            return f"1 gate: a good release fails it with probability {fmt_rate(self.rates[0])}"
        low, high = fmt_rate(min(self.rates)), fmt_rate(max(self.rates))
        each = f"at {low} each" if low == high else f"at {low} to {high}"
        return (
            f"{self.gates} gates {each}: a good release fails some gate with probability up to "
            f"{fmt_rate(self.independent)} (independent gates; at most {fmt_rate(self.at_most)} whatever "
            "their dependence)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "gates": self.gates,
            "rates": list(self.rates),
            "independent": self.independent,
            "at_most": self.at_most,
        }


def fmt_rate(rate: float) -> str:
    """A rate as a percentage, the one format of every report: one decimal below 10 % where it has
    one (2.5%), none above (32%); a rate above 0 but below 0.1 % reads <0.1%."""
    if 0 < rate < 0.001:
        return "<0.1%"
    return f"{rate:.1%}" if rate < 0.1 and round(rate * 1000) % 10 else f"{rate:.0%}"


def familywise_bound(rates: Sequence[float]) -> FamilyBound:
    """The family-wise false-alarm figures of gates whose own rates are ``rates`` (each in
    [0, 1]). Raises :class:`StatisticsError` for a rate outside [0, 1] or no gate."""
    values = tuple(float(r) for r in rates)
    if not values:
        raise StatisticsError("a family-wise bound needs at least one gate")
    if any(not 0 <= r <= 1 for r in values):
        raise StatisticsError(f"false-alarm rates must lie in [0, 1], got {values}")
    survive = 1.0
    for r in values:
        survive *= 1 - r
    return FamilyBound(len(values), values, 1 - survive, min(1.0, sum(values)))
