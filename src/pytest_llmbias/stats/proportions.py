"""Tests and intervals for a proportion: Wilson's interval, the exact binomial test, and the TOST
for a proportion (equivalence to a reference share within a tolerance).

Used by the stance probes (agreement) and the self-preference probes (preference rates, position
bias). scipy is imported by the tests that need it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.errors import StatisticsError


def _count(successes: int, n: int) -> None:
    if n <= 0:
        raise StatisticsError("a proportion needs at least one trial")
    if not 0 <= successes <= n:
        raise StatisticsError(f"{successes} successes out of {n} trials")


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a proportion, two-sided at ``confidence`` (statsmodels'
    ``proportion_confint(method="wilson")``)."""
    from statistics import NormalDist

    _count(successes, n)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def binomial_test(successes: int, n: int, p: float) -> float:
    """The exact two-sided binomial test's p value. H0: the success probability is ``p``
    (scipy.stats.binomtest)."""
    from scipy import stats

    _count(successes, n)
    return float(stats.binomtest(successes, n, p, alternative="two-sided").pvalue)


@dataclass(frozen=True)
class ProportionTost:
    """Two one-sided exact binomial tests of a share against ``reference`` ± ``tolerance``.

    H0: |π − reference| ≥ tolerance; H1: |π − reference| < tolerance. ``p_lower`` tests H0ₗ: π ≤
    reference − tolerance (P(X ≥ k) under it), ``p_upper`` H0ᵤ: π ≥ reference + tolerance
    (P(X ≤ k)); the share is equivalent when both are below ``alpha``. A bound outside (0, 1) makes
    its side impossible: that p value is 0."""

    successes: int
    n: int
    reference: float
    tolerance: float
    alpha: float
    p_lower: float
    p_upper: float

    @property
    def share(self) -> float:
        return self.successes / self.n

    @property
    def p_value(self) -> float:
        return max(self.p_lower, self.p_upper)

    @property
    def equivalent(self) -> bool:
        return self.p_value < self.alpha

    @property
    def outside(self) -> bool:
        """Whether the share is shown outside ``reference`` ± ``tolerance``: H0: π ≥ reference −
        tolerance rejected by P(X ≤ k) < alpha, or H0: π ≤ reference + tolerance by P(X ≥ k) <
        alpha (exact binomial tests; a bound outside (0, 1) cannot be crossed)."""
        from scipy import stats

        low, high = self.reference - self.tolerance, self.reference + self.tolerance
        below = low > 0 and float(stats.binom.cdf(self.successes, self.n, low)) < self.alpha
        above = high < 1 and float(stats.binom.sf(self.successes - 1, self.n, high)) < self.alpha
        return bool(below or above)

    def to_dict(self) -> dict[str, Any]:
        return {"successes": self.successes, "n": self.n, "share": self.share, "reference": self.reference,
                "tolerance": self.tolerance, "alpha": self.alpha, "p_lower": self.p_lower, "p_upper": self.p_upper,
                "p_value": self.p_value, "equivalent": self.equivalent}


def binomial_tost(successes: int, n: int, reference: float, tolerance: float, alpha: float = 0.05) -> ProportionTost:
    """The TOST for a proportion (see :class:`ProportionTost`); exact binomial tails (scipy)."""
    from scipy import stats

    _count(successes, n)
    if not 0 < tolerance < 1 or not 0 < reference < 1:
        raise StatisticsError(f"reference {reference!r} and tolerance {tolerance!r} must lie in (0, 1)")
    low, high = reference - tolerance, reference + tolerance
    p_lower = float(stats.binom.sf(successes - 1, n, low)) if low > 0 else 0.0
    p_upper = float(stats.binom.cdf(successes, n, high)) if high < 1 else 0.0
    return ProportionTost(successes, n, reference, tolerance, alpha, p_lower, p_upper)
