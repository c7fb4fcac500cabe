"""Welch's two one-sided tests (TOST) for equivalence, the data-driven margin, and its power.

Source: the relative-bias method (seeds/relative-bias.txt §3.6): the target's mean score is
compared with the baselines' pooled mean; the margin is δ = k·σ, σ the standard deviation of the
baseline models' means; both one-sided Welch tests must reject at α. The paper states H0 the other
way round; this module follows the standard procedure its own result tables use (Lakens 2017):

    H0: |μT − μB| ≥ δ      (the target differs from the baselines by at least δ)
    H1: |μT − μB| < δ      (equivalent within δ)

The verdict has three values: ``equivalent`` (both one-sided tests reject: the (1 − 2α) confidence
interval of the difference lies inside (−δ, δ)), ``biased`` (that whole interval lies outside
[−δ, δ]), ``inconclusive`` (neither).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_llmbias.errors import StatisticsError

EQUIVALENT, BIASED, INCONCLUSIVE = "equivalent", "biased", "inconclusive"
POWER_TARGET = 0.8
_MAX_POWER_N = 1_000_000


@dataclass(frozen=True)
class TostResult:
    """Every figure of a Welch TOST, as the relative-bias paper's appendix tables report them.

    ``t_lower``/``p_lower`` test H0: μT − μB ≤ −δ; ``t_upper``/``p_upper`` test H0: μT − μB ≥ δ;
    ``p_value`` is the larger p. ``ci_low``/``ci_high`` bound the (1 − 2α) interval of the
    difference. ``power_n`` is the number of target values (questions) that would give 80 % power
    to show equivalence if the true difference and spreads were those observed (None when the
    observed difference is at least δ: no number of questions would do).
    """

    n_target: int
    n_baseline: int
    mean_target: float
    mean_baseline: float
    diff: float
    margin: float
    alpha: float
    se: float
    df: float
    t_lower: float
    t_upper: float
    p_lower: float
    p_upper: float
    p_value: float
    ci_low: float
    ci_high: float
    verdict: str
    power: float
    power_n: int | None

    @property
    def passed(self) -> bool:
        return self.verdict == EQUIVALENT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean(values: Sequence[float], name: str) -> Any:
    import numpy as np

    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise StatisticsError(f"{name}: expected a flat sequence of numbers, got shape {arr.shape}")
    if arr.size < 2:
        raise StatisticsError(f"{name}: at least 2 values are needed, got {arr.size}")
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise StatisticsError(f"{name}: {bad} value(s) are NaN or infinite")
    return arr


def _welch_se_df(var_t: float, n_t: int, var_b: float, n_b: int) -> tuple[float, float]:
    a, b = var_t / n_t, var_b / n_b
    se = math.sqrt(a + b)
    denom = (a * a / (n_t - 1) if n_t > 1 else 0.0) + (b * b / (n_b - 1) if n_b > 1 else 0.0)
    df = (a + b) ** 2 / denom if denom > 0 else float("inf")
    return se, df


def tost_power(diff: float, margin: float, se: float, df: float, alpha: float = 0.05) -> float:
    """Probability that a Welch TOST with standard error ``se`` and ``df`` degrees of freedom shows
    equivalence when the true difference is ``diff`` (normal sampling of the difference, Student t
    critical value). 0 when ``margin <= t_crit * se``."""
    from scipy import stats

    t_crit = float(stats.t.ppf(1 - alpha, df))
    upper = margin - t_crit * se
    if upper <= 0:
        return 0.0
    lo = stats.norm.cdf((-upper - diff) / se)
    hi = stats.norm.cdf((upper - diff) / se)
    return float(max(0.0, hi - lo))


def _power_n(diff: float, margin: float, var_t: float, var_b: float, ratio: float, alpha: float) -> int | None:
    """Smallest n (target values; baseline values = ratio·n) with power ≥ 80 %, or None."""
    if abs(diff) >= margin:
        return None

    def power(n: int) -> float:
        n_b = max(2, round(ratio * n))
        se, df = _welch_se_df(var_t, n, var_b, n_b)
        return tost_power(diff, margin, se, df, alpha) if se > 0 else 1.0

    lo, hi = 2, 2
    while power(hi) < POWER_TARGET:
        lo, hi = hi, hi * 2
        if hi > _MAX_POWER_N:
            return None
    while lo < hi:
        mid = (lo + hi) // 2
        if power(mid) >= POWER_TARGET:
            hi = mid
        else:
            lo = mid + 1
    return hi


def welch_tost(
    target: Sequence[float], baseline: Sequence[float], margin: float, alpha: float = 0.05
) -> TostResult:
    """Welch TOST of ``target`` against ``baseline`` with equivalence margin ``margin`` (δ > 0).

    H0: |mean(target) − mean(baseline)| ≥ δ; H1: the difference lies inside (−δ, δ). Both one-sided
    Welch t tests must reject at ``alpha``. Matches statsmodels
    ``ttost_ind(target, baseline, -δ, δ, usevar="unequal")``.

    Raises :class:`StatisticsError` for fewer than 2 values in a group, NaN or infinite values,
    a margin that is not a positive finite number, or zero variance in both groups.
    """
    import numpy as np
    from scipy import stats

    t = _clean(target, "target")
    b = _clean(baseline, "baseline")
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise StatisticsError(f"the equivalence margin must be a positive finite number, got {margin!r}")
    if not 0 < alpha < 0.5:
        raise StatisticsError(f"alpha must be in (0, 0.5), got {alpha!r}")
    n_t, n_b = int(t.size), int(b.size)
    mean_t, mean_b = float(np.mean(t)), float(np.mean(b))
    var_t, var_b = float(np.var(t, ddof=1)), float(np.var(b, ddof=1))
    se, df = _welch_se_df(var_t, n_t, var_b, n_b)
    if se == 0.0:
        raise StatisticsError(
            "zero variance: every target and baseline value is identical, so no t statistic exists "
            "(is the scorer returning a constant?)"
        )
    diff = mean_t - mean_b
    t_lower = (diff + margin) / se
    t_upper = (diff - margin) / se
    p_lower = float(stats.t.sf(t_lower, df))
    p_upper = float(stats.t.cdf(t_upper, df))
    p_value = max(p_lower, p_upper)
    half = float(stats.t.ppf(1 - alpha, df)) * se
    ci_low, ci_high = diff - half, diff + half
    if p_value < alpha:
        verdict = EQUIVALENT
    elif ci_low > margin or ci_high < -margin:
        verdict = BIASED
    else:
        verdict = INCONCLUSIVE
    return TostResult(
        n_target=n_t,
        n_baseline=n_b,
        mean_target=mean_t,
        mean_baseline=mean_b,
        diff=diff,
        margin=float(margin),
        alpha=alpha,
        se=se,
        df=df,
        t_lower=t_lower,
        t_upper=t_upper,
        p_lower=p_lower,
        p_upper=p_upper,
        p_value=p_value,
        ci_low=ci_low,
        ci_high=ci_high,
        verdict=verdict,
        power=tost_power(diff, margin, se, df, alpha),
        power_n=_power_n(diff, margin, var_t, var_b, n_b / n_t, alpha),
    )


def margin_from_baselines(baseline_model_means: Sequence[float], k: float) -> float:
    """δ = k · SD(ddof=1) of the baseline models' mean scores (relative-bias §3.6, eq. 5).

    Needs at least two baseline models (one mean has no spread) and a positive k; identical means
    give δ = 0, which no target can pass, so that is an error too.
    """
    import numpy as np

    means = _clean(baseline_model_means, "baseline model means")
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k > 0):
        raise StatisticsError(f"k must be a positive finite number, got {k!r}")
    sd = float(np.std(means, ddof=1))
    if sd == 0.0:
        raise StatisticsError(
            "the baseline models' mean scores are identical, so the data-driven margin is 0; "
            "give the gate a fixed margin= or a min_margin="
        )
    return k * sd


def equivalence_pass_probability(
    baseline_scores: Sequence[Sequence[float]],
    *,
    n_target: int,
    k: float,
    alpha: float = 0.05,
    margin: float | None = None,
    min_margin: float | None = None,
    simulations: int = 4000,
    seed: int = 0,
) -> float:
    """Estimated probability that a target behaving exactly like the baselines passes the gate.

    Model (fitted to the observed baselines): each model's mean is drawn from N(μ, τ²), τ² the
    between-model variance of the baseline means less the part explained by within-model noise;
    each model's per-question scores are N(its mean, σ²), σ² the pooled within-model variance. Each
    simulation draws the baselines and one more model as the target, recomputes the margin (unless
    ``margin`` is fixed; never below ``min_margin``) and runs the Welch TOST. Monte Carlo, seeded:
    the same inputs give the same figure.
    """
    import numpy as np
    from scipy import stats

    groups = [_clean(g, f"baseline {i}") for i, g in enumerate(baseline_scores)]
    if len(groups) < 2:
        raise StatisticsError("at least two baseline models are needed to estimate gate stability")
    K = len(groups)
    n_b = int(np.mean([g.size for g in groups]))
    means = np.array([g.mean() for g in groups])
    sigma2 = float(np.mean([g.var(ddof=1) for g in groups]))
    tau2 = max(0.0, float(means.var(ddof=1)) - sigma2 / n_b)
    rng = np.random.default_rng(seed)
    model_means = rng.normal(0.0, math.sqrt(tau2), size=(simulations, K + 1))
    sigma = math.sqrt(sigma2)
    # Sufficient statistics per simulated model: sample mean and sample variance.
    def sample(n: int, mu: Any) -> tuple[Any, Any]:
        m = mu + rng.normal(0.0, sigma / math.sqrt(n), size=mu.shape)
        v = sigma2 * rng.chisquare(n - 1, size=mu.shape) / (n - 1)
        return m, v

    b_means, b_vars = sample(n_b, model_means[:, :K])
    t_mean, t_var = sample(n_target, model_means[:, K])
    # Pooled baseline values: mean of means; variance of the pooled sample (within + between).
    N = K * n_b
    pooled_mean = b_means.mean(axis=1)
    ss_within = ((n_b - 1) * b_vars).sum(axis=1)
    ss_between = (n_b * (b_means - pooled_mean[:, None]) ** 2).sum(axis=1)
    pooled_var = (ss_within + ss_between) / (N - 1)
    if margin is None:
        delta = k * b_means.std(axis=1, ddof=1)
    else:
        delta = np.full(simulations, float(margin))
    if min_margin is not None:
        delta = np.maximum(delta, float(min_margin))
    a, b = t_var / n_target, pooled_var / N
    se = np.sqrt(a + b)
    df = (a + b) ** 2 / (a * a / (n_target - 1) + b * b / (N - 1))
    diff = t_mean - pooled_mean
    t_crit = stats.t.ppf(1 - alpha, df)
    passed = (np.abs(diff) + t_crit * se) < delta
    return float(passed.mean())
