"""Power and sample size of the checks that pass when a violation is not shown: the four-fifths
rule backed by a test of significance (below), the stance agreement check and the absolute index
check (at the end).

An approximation, stated plainly: the gate's permutation test is replaced by a one-sided
two-proportion z test of the worst group's selection rate against the best one's, at the
Bonferroni level ``alpha / (groups - 1)`` (the worst group is one of ``groups - 1`` candidates
against the best). H0: both groups select at rate ``p1``; H1: the worst selects at
``ratio · p1``. Source: the normal approximation to the difference of two proportions (Fleiss,
*Statistical Methods for Rates and Proportions*, §4.2), without continuity correction.
"""

from __future__ import annotations

import functools
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


def answers_for_power(
    best_rate: float, ratio: float, *, groups: int, alpha: float = 0.05, power: float = POWER_TARGET
) -> int | None:
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


# -- the power of the checks that pass when a violation is not shown -----------------------------

#: how far below ``min_agreement`` a target's share of agreeing questions is "a violation" for the
#: power of the stance agreement check
AGREEMENT_VIOLATION = 0.2
#: how far above ``max_index`` a target's LLM Bias Index is "a violation" for the power of the
#: absolute index check: about what the validity table's loaded target adds (+0.15 of extremity on
#: two of nine dimensions: +0.033 to the mean B and 1.5 × 0.033 to the sentiment term)
INDEX_VIOLATION = 0.08
_MAX_QUESTIONS = 100_000


@functools.lru_cache(maxsize=4096)  # sizing a check asks the same counts again
def agreement_power(n: int, bound: float, *, confidence: float, violation: float = AGREEMENT_VIOLATION) -> float:
    """Probability that the stance agreement check fails a target whose true share of agreeing
    questions is ``bound - violation``, with ``n`` questions: the binomial probability that Wilson's
    one-sided upper bound at ``confidence`` falls below ``bound`` (exact over the n + 1 counts).
    H0: share >= bound; H1: share < bound. 0 when the violation share is not above 0."""
    from pytest_llmbias.stats.proportions import wilson

    p1 = bound - violation
    if n < 1 or not 0 < p1 < 1:
        return 0.0
    level = 2 * confidence - 1
    total = 0.0
    log_q, log_p = math.log1p(-p1), math.log(p1)
    for k in range(n + 1):
        if wilson(k, n, level)[1] < bound:
            total += math.exp(
                math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q
            )
    return min(total, 1.0)


def questions_for_agreement_power(
    bound: float, *, confidence: float, violation: float = AGREEMENT_VIOLATION, power: float = POWER_TARGET
) -> int | None:
    """The fewest agreed-on questions from which :func:`agreement_power` stays at or above ``power``
    (80 %) for every larger count up to twice it (the exact power of a discrete test zigzags);
    None when no count up to 100,000 reaches it."""
    n = 1
    while n <= _MAX_QUESTIONS:
        if agreement_power(n, bound, confidence=confidence, violation=violation) >= power:
            if all(
                agreement_power(m, bound, confidence=confidence, violation=violation) >= power
                for m in range(n + 1, min(2 * n, n + 40) + 1)
            ):
                return n
        n += 1 if n < 400 else max(1, n // 50)
    return None


def index_power(se: float, *, confidence: float, violation: float = INDEX_VIOLATION) -> float:
    """Probability that the absolute index check (one-sided bootstrap bound at ``confidence``)
    fails a target whose true index is ``violation`` above the bound, when the index's standard
    error is ``se`` (from the bootstrap): Φ(violation / se − z_confidence), the normal
    approximation. H0: index <= max_index; H1: index > max_index."""
    from statistics import NormalDist

    if se <= 0:
        return 1.0
    return float(NormalDist().cdf(violation / se - _z(confidence)))


def prompts_for_index_power(
    se: float, prompts: int, *, confidence: float, violation: float = INDEX_VIOLATION, power: float = POWER_TARGET
) -> int:
    """Prompts that would give ``power`` (80 %) to :func:`index_power`, the standard error shrinking
    as one over the square root of the prompts: ``prompts`` × (se · (z_conf + z_power) / violation)²."""
    if se <= 0:
        return prompts
    return max(1, math.ceil(prompts * (se * (_z(confidence) + _z(power)) / violation) ** 2))
