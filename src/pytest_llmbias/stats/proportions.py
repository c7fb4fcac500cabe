"""Tests and intervals for a proportion: Wilson's interval, the exact binomial test, and the TOST
for a proportion (equivalence to a reference share within a tolerance).

Shares pooled over clusters whose trials are alike (a topic's picks, when the topic pulls every
pick its way) vary more than a binomial's: :func:`design_effect` measures by how much, and every
test here takes it as ``deff``, dividing the counts by it (Rao and Scott, "A simple method for the
analysis of clustered binary data", Biometrics 48, 1992), the binomial tails then taken in their
continuous form (the regularized incomplete beta function). ``deff`` 1 is the exact binomial test.

Used by the stance probes (agreement) and the self-preference probes (preference rates, position
bias). scipy is imported by the tests that need it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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


def design_effect(clusters: Sequence[tuple[int, int]]) -> float:
    """Rao and Scott's design effect of a share pooled over clusters of trials, ``(successes,
    trials)`` each: the variance of the pooled share estimated from the clusters' spread (the ratio
    estimator's, T/(T−1) · Σ (wₜ − p̂ nₜ)² / N²) over the binomial variance p̂(1 − p̂)/N, and at least
    1 (trials as independent as a binomial's lose nothing). 1 with fewer than two clusters of
    trials, or a share of 0 or 1 (no spread to measure)."""
    used = [(w, n) for w, n in clusters if n > 0]
    for w, n in used:
        _count(w, n)
    total, wins = sum(n for _, n in used), sum(w for w, _ in used)
    if len(used) < 2 or wins in (0, total):
        return 1.0
    share = wins / total
    spread = len(used) / (len(used) - 1) * sum((w - share * n) ** 2 for w, n in used) / total**2
    return max(1.0, spread / (share * (1 - share) / total))


def _tails(successes: float, n: float, p: float) -> tuple[float, float]:
    """P(X ≤ k) and P(X ≥ k) for X ~ Binomial(n, p), continuous in k and n (the regularized
    incomplete beta function; exact at whole numbers)."""
    from scipy import special

    below = 1.0 if successes >= n else float(special.betainc(n - successes, successes + 1, 1 - p))
    above = 1.0 if successes <= 0 else float(special.betainc(successes, n - successes + 1, p))
    return below, above


def binomial_test(successes: int, n: int, p: float, deff: float = 1.0) -> float:
    """The two-sided binomial test's p value. H0: the success probability is ``p``.

    ``deff`` 1: the exact test (scipy.stats.binomtest's p value: :func:`exact_two_sided`). Above 1
    the counts are divided by it (see the module docstring) and the p value is twice the smaller
    tail, at most 1."""
    _count(successes, n)
    if deff <= 1.0:
        return exact_two_sided(successes, n, p)
    return min(1.0, 2 * min(_tails(successes / deff, n / deff, p)))


def exact_two_sided(successes: int, n: int, p: float = 0.5) -> float:
    """The exact two-sided binomial test's p value, as scipy.stats.binomtest computes it: the
    probability, under H0 (success probability ``p``), of every count no more likely than the one
    seen (within a relative 1e-7), at most 1. Without importing scipy.stats (a second of a run's
    start) for ``p`` strictly between 0 and 1."""
    _count(successes, n)
    if not 0.0 < p < 1.0:
        from scipy import stats

        return float(stats.binomtest(successes, n, p, alternative="two-sided").pvalue)
    if successes == p * n:
        return 1.0
    log_p, log_q, log_n = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    pmf = [
        math.exp(log_n - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * log_p + (n - x) * log_q)
        for x in range(n + 1)
    ]
    bound = pmf[successes] * (1 + 1e-7)
    if successes < p * n:
        tail = [pmf[x] for x in range(math.ceil(p * n), n + 1) if pmf[x] <= bound]
        total = math.fsum(pmf[: successes + 1]) + math.fsum(tail)
    else:
        tail = [pmf[x] for x in range(math.floor(p * n) + 1) if pmf[x] <= bound]
        total = math.fsum(pmf[successes:]) + math.fsum(tail)
    return min(1.0, total)


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
    #: the clusters' design effect the counts were divided by (1: independent trials)
    deff: float = 1.0

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
        """Whether the share is shown outside ``reference`` ± ``tolerance`` at ``alpha``: H0: π ≥
        reference − tolerance rejected by P(X ≤ k) < alpha, or H0: π ≤ reference + tolerance by P(X ≥
        k) < alpha (binomial tests, the counts divided by ``deff``; a bound outside (0, 1) cannot be
        crossed)."""
        return self.outside_at(self.alpha)

    def outside_at(self, level: float) -> bool:
        """:attr:`outside` at another ``level``."""
        low, high = self.reference - self.tolerance, self.reference + self.tolerance
        k, n = self.successes / self.deff, self.n / self.deff
        below = low > 0 and _tails(k, n, low)[0] < level
        above = high < 1 and _tails(k, n, high)[1] < level
        return bool(below or above)

    def to_dict(self) -> dict[str, Any]:
        return {
            "successes": self.successes,
            "n": self.n,
            "share": self.share,
            "reference": self.reference,
            "tolerance": self.tolerance,
            "alpha": self.alpha,
            "p_lower": self.p_lower,
            "p_upper": self.p_upper,
            "p_value": self.p_value,
            "equivalent": self.equivalent,
            "deff": self.deff,
        }


def binomial_tost(
    successes: int, n: int, reference: float, tolerance: float, alpha: float = 0.05, deff: float = 1.0
) -> ProportionTost:
    """The TOST for a proportion (see :class:`ProportionTost`); binomial tails, exact with ``deff``
    1, else of the counts divided by it."""
    _count(successes, n)
    if not 0 < tolerance < 1 or not 0 < reference < 1:
        raise StatisticsError(f"reference {reference!r} and tolerance {tolerance!r} must lie in (0, 1)")
    if deff < 1.0:
        raise StatisticsError(f"a design effect is at least 1, got {deff!r}")
    low, high = reference - tolerance, reference + tolerance
    k, m = successes / deff, n / deff
    p_lower = _tails(k, m, low)[1] if low > 0 else 0.0
    p_upper = _tails(k, m, high)[0] if high < 1 else 0.0
    return ProportionTost(successes, n, reference, tolerance, alpha, p_lower, p_upper, deff)
