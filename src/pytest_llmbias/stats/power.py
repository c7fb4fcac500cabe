"""Power and sample size of the four-fifths rule backed by a test of significance.

An approximation, stated plainly: the gate's permutation test is replaced by a one-sided
two-proportion z test of the worst group's selection rate against the best one's, at the
Bonferroni level ``alpha / (groups - 1)`` (the worst group is one of ``groups - 1`` candidates
against the best). H0: both groups select at rate ``p1``; H1: the worst selects at
``ratio · p1``. Source: the normal approximation to the difference of two proportions (Fleiss,
*Statistical Methods for Rates and Proportions*, §4.2), without continuity correction.
"""

from __future__ import annotations

import math

from pytest_llmbias.stats.tost import POWER_TARGET

_MAX_ANSWERS = 1_000_000


def _z(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def power_at(best_rate: float, ratio: float, answers: int, *, groups: int, alpha: float = 0.05) -> float:
    """Probability of detecting, with ``answers`` per group, a group that selects at ``ratio`` ×
    ``best_rate`` when the best selects at ``best_rate`` (see the module docstring). 0 when the
    rates cannot differ (a best rate of 0 or a ratio of 1)."""
    from statistics import NormalDist

    p1 = min(max(best_rate, 0.0), 1.0)
    p0 = ratio * p1
    if not 0 < p1 <= 1 or not p0 < p1 or answers < 1 or groups < 2:
        return 0.0
    z_alpha = _z(1 - alpha / (groups - 1))
    mean = (p0 + p1) / 2
    null_sd = math.sqrt(2 * mean * (1 - mean) / answers)
    alt_sd = math.sqrt((p0 * (1 - p0) + p1 * (1 - p1)) / answers)
    if alt_sd == 0:
        return 1.0
    return float(NormalDist().cdf(((p1 - p0) - z_alpha * null_sd) / alt_sd))


def answers_for_power(best_rate: float, ratio: float, *, groups: int, alpha: float = 0.05,
                      power: float = POWER_TARGET) -> int | None:
    """The smallest number of answers per group with at least ``power`` (80 %) to detect a group
    at ``ratio`` × ``best_rate``; None when no number of answers would (rates that cannot differ)."""
    if power_at(best_rate, ratio, _MAX_ANSWERS, groups=groups, alpha=alpha) < power:
        return None
    lo, hi = 1, 1
    while power_at(best_rate, ratio, hi, groups=groups, alpha=alpha) < power:
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if power_at(best_rate, ratio, mid, groups=groups, alpha=alpha) >= power:
            hi = mid
        else:
            lo = mid + 1
    return hi
