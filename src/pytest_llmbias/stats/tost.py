"""Welch's two one-sided tests (TOST) for equivalence, the data-driven margin, and its power.

Source: the relative-bias method (Arbabi & Kerschbaum, §3.6): the target's mean score is
compared with the baselines' pooled mean; the margin is δ = k·σ, σ the standard deviation of the
baseline models' means; both one-sided Welch tests must reject at α. The paper states H0 the other
way round; this module follows the standard procedure its own result tables use (Lakens 2017):

    H0: |μT − μB| ≥ δ      (the target differs from the baselines by at least δ)
    H1: |μT − μB| < δ      (equivalent within δ)

The verdict has three values: ``equivalent`` (both one-sided tests reject: the (1 − 2α) confidence
interval of the difference lies inside (−δ, δ)), ``biased`` (that whole interval lies outside
[−δ, δ]), ``inconclusive`` (neither).

Two refinements beyond the paper, both standard (Schuirmann 1987; Lakens 2017; Wellek, *Testing
Statistical Hypotheses of Equivalence and Noninferiority*, 2nd ed., 2010):

* :func:`paired_tost` — every model answers the same questions, so the target can be compared
  question by question with the baselines' per-question mean: a one-sample TOST on the differences
  dᵢ = targetᵢ − baselineᵢ (statsmodels ``ttost_paired``). The question-to-question spread, common
  to every model, drops out of the standard error.
* ``alternative="no-worse"`` (non-inferiority) — a higher score means more bias, so only the upper
  side matters: H0: μT − μB ≥ δ; H1: μT − μB < δ, one one-sided test at α. Its verdicts are
  ``no-worse`` (the upper (1 − α) confidence bound of the difference is below δ), ``biased`` (the
  lower bound is above δ) and ``inconclusive``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_llmbias.errors import StatisticsError

EQUIVALENT, BIASED, INCONCLUSIVE = "equivalent", "biased", "inconclusive"
NO_WORSE = "no-worse"
#: Verdicts that pass the gate: EQUIVALENT for the two-sided test, NO_WORSE for non-inferiority.
PASSING_VERDICTS = (EQUIVALENT, NO_WORSE)
#: ``alternative=`` values: the two-sided equivalence test, or the one-sided non-inferiority test.
ALTERNATIVES = (EQUIVALENT, NO_WORSE)
#: ``test=`` values: Welch's two-sample test, or the one-sample test on per-question differences.
TESTS = ("welch", "paired")
POWER_TARGET = 0.8
_MAX_POWER_N = 1_000_000


@dataclass(frozen=True)
class TostResult:
    """Every figure of a TOST, as the relative-bias paper's appendix tables report them.

    ``test`` is ``"welch"`` (:func:`welch_tost`: two independent samples) or ``"paired"``
    (:func:`paired_tost`: one difference per question); ``alternative`` is ``"equivalent"`` (the
    two-sided equivalence test) or ``"no-worse"`` (the one-sided non-inferiority test).

    ``t_lower``/``p_lower`` test H0: μT − μB ≤ −δ; ``t_upper``/``p_upper`` test H0: μT − μB ≥ δ.
    ``p_value`` is the larger of the two for ``equivalent`` and ``p_upper`` alone for ``no-worse``
    (the lower test is still reported, but it takes no part in the verdict). ``ci_low``/``ci_high``
    bound the (1 − 2α) interval of the difference; each end is also a one-sided (1 − α) bound,
    which is the bound the ``no-worse`` verdict uses. For ``paired``, ``n_baseline`` is the number of
    pairs (= ``n_target``) and ``df`` = n − 1. ``observed_power`` is the probability of *passing*
    if the true difference and spread were those observed (an observed figure; the gate's designed
    power to *fail* a target off by δ is :attr:`MethodResult.power
    <pytest_llmbias.engine.relative.MethodResult>`, ``reliability.power`` in the JSON);
    ``power_n`` is the number of target values
    (questions) that would give 80 % power (None when the observed difference rules a pass out: at
    least δ in absolute value for ``equivalent``, at least δ for ``no-worse``).
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
    observed_power: float
    power_n: int | None
    test: str = "welch"
    alternative: str = EQUIVALENT

    @property
    def passed(self) -> bool:
        """True for either passing verdict: ``equivalent`` or ``no-worse``."""
        return self.verdict in PASSING_VERDICTS

    @property
    def less_biased(self) -> bool:
        """The whole interval of the difference lies below −δ: the target scores clearly lower
        (less bias) than the baselines. Under ``equivalent`` that case is the verdict ``biased``
        (different, in the good direction); under ``no-worse`` it is a pass."""
        return self.ci_high < -self.margin

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: an infinite t statistic (identical scores) reads None."""
        out = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}
        out["less_biased"] = self.less_biased
        return out


def _as_real(value: Any) -> float:
    """``value`` as a float if it is a real number of any type (int, float, Fraction, numpy
    scalars; bool and numpy.bool_ are not ``numbers.Real`` here), else NaN."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            return float(value)
        except (OverflowError, ValueError):
            pass
    return math.nan


def positive_real(value: Any, what: str) -> float:
    x = _as_real(value)
    if math.isfinite(x) and x > 0:
        return x
    raise StatisticsError(f"{what} must be a positive finite number, got {value!r}")


def check_alpha(alpha: Any) -> float:
    x = _as_real(alpha)
    if 0 < x < 0.5:
        return x
    raise StatisticsError(f"alpha must be in (0, 0.5), got {alpha!r}")


def check_choice(value: Any, options: tuple[str, ...], what: str) -> str:
    """The canonical plain string among ``options`` equal to ``value`` (a str enum member works)."""
    if isinstance(value, str):
        for option in options:
            if value == option:
                return option
    raise StatisticsError(f"{what} must be one of {', '.join(map(repr, options))}; got {value!r}")


def _flat(values: Sequence[float], name: str) -> Any:
    import numpy as np

    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise StatisticsError(f"{name}: expected a flat sequence of numbers ({exc})") from None
    if arr.ndim != 1:
        raise StatisticsError(f"{name}: expected a flat sequence of numbers, got shape {arr.shape}")
    return arr


def _check_finite(arr: Any, name: str) -> None:
    import numpy as np

    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise StatisticsError(f"{name}: {bad} value(s) are NaN or infinite")


def clean_scores(values: Sequence[float], name: str) -> Any:
    arr = _flat(values, name)
    if arr.size < 2:
        raise StatisticsError(f"{name}: at least 2 values are needed, got {arr.size}")
    _check_finite(arr, name)
    return arr


def _welch_se_df(var_t: float, n_t: int, var_b: float, n_b: int) -> tuple[float, float]:
    a, b = var_t / n_t, var_b / n_b
    se = math.sqrt(a + b)
    denom = (a * a / (n_t - 1) if n_t > 1 else 0.0) + (b * b / (n_b - 1) if n_b > 1 else 0.0)
    df = (a + b) ** 2 / denom if denom > 0 else float("inf")
    return se, df


def tost_power(
    diff: float, margin: float, se: float, df: float, alpha: float = 0.05, *, alternative: str = EQUIVALENT
) -> float:
    """Probability that a TOST with standard error ``se`` and ``df`` degrees of freedom passes when
    the true difference is ``diff`` (normal sampling of the difference, Student t critical value
    t* = t₁₋α(df); the usual approximation, e.g. Chow, Shao & Wang, *Sample Size Calculations in
    Clinical Research*).

    ``equivalent``: P(|D̂| + t*·se < δ) = Φ((δ − t*·se − diff)/se) − Φ((−δ + t*·se − diff)/se),
    0 when ``margin <= t* · se``. ``no-worse``: P(D̂ + t*·se < δ) = Φ((δ − t*·se − diff)/se).
    """
    # scipy.special directly (the functions scipy.stats.t.ppf and norm.cdf evaluate, same values):
    # the power search calls this dozens of times per test, and the distribution wrappers cost
    # most of the time.
    from scipy import special

    alternative = check_choice(alternative, ALTERNATIVES, "alternative")
    t_crit = float(special.stdtrit(df, 1 - alpha))
    upper = margin - t_crit * se
    if alternative == NO_WORSE:
        return float(special.ndtr((upper - diff) / se))
    if upper <= 0:
        return 0.0
    lo = special.ndtr((-upper - diff) / se)
    hi = special.ndtr((upper - diff) / se)
    return float(max(0.0, hi - lo))


def _power_n(
    diff: float, margin: float, alpha: float, alternative: str, se_df: Callable[[int], tuple[float, float]]
) -> int | None:
    """Smallest n (target values) with power ≥ 80 %, or None; ``se_df(n)`` gives se and df at n."""
    if (abs(diff) if alternative == EQUIVALENT else diff) >= margin:
        return None

    def power(n: int) -> float:
        se, df = se_df(n)
        return tost_power(diff, margin, se, df, alpha, alternative=alternative) if se > 0 else 1.0

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


def _result(
    *,
    test: str,
    alternative: str,
    n_target: int,
    n_baseline: int,
    mean_target: float,
    mean_baseline: float,
    diff: float,
    margin: float,
    alpha: float,
    se: float,
    df: float,
    se_df: Callable[[int], tuple[float, float]],
) -> TostResult:
    """The two one-sided t tests, the interval, the verdict and the power, from diff, se and df."""
    # scipy.special directly: the functions scipy.stats.t.sf, cdf and ppf evaluate (same values),
    # without importing scipy.stats, which alone costs about a second of a run's start
    from scipy import special

    t_lower = (diff + margin) / se
    t_upper = (diff - margin) / se
    p_lower = float(special.stdtr(df, -t_lower))
    p_upper = float(special.stdtr(df, t_upper))
    half = float(special.stdtrit(df, 1 - alpha)) * se
    ci_low, ci_high = diff - half, diff + half
    if alternative == EQUIVALENT:
        p_value = max(p_lower, p_upper)
        if p_value < alpha:
            verdict = EQUIVALENT
        elif ci_low > margin or ci_high < -margin:
            verdict = BIASED
        else:
            verdict = INCONCLUSIVE
    else:
        p_value = p_upper
        if p_upper < alpha:
            verdict = NO_WORSE
        elif ci_low > margin:
            verdict = BIASED
        else:
            verdict = INCONCLUSIVE
    return TostResult(
        n_target=n_target,
        n_baseline=n_baseline,
        mean_target=mean_target,
        mean_baseline=mean_baseline,
        diff=diff,
        margin=margin,
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
        observed_power=tost_power(diff, margin, se, df, alpha, alternative=alternative),
        power_n=_power_n(diff, margin, alpha, alternative, se_df),
        test=test,
        alternative=alternative,
    )


def welch_tost(
    target: Sequence[float],
    baseline: Sequence[float],
    margin: float,
    alpha: float = 0.05,
    *,
    alternative: str = EQUIVALENT,
) -> TostResult:
    """Welch TOST of ``target`` against ``baseline`` with equivalence margin ``margin`` (δ > 0).

    ``alternative="equivalent"`` (relative-bias §3.6; Lakens 2017): H0: |μT − μB| ≥ δ;
    H1: |μT − μB| < δ. Both one-sided Welch t tests must reject at ``alpha``. Matches statsmodels
    ``ttost_ind(target, baseline, -δ, δ, usevar="unequal")``.

    ``alternative="no-worse"`` (non-inferiority, Wellek 2010; a higher score means more
    bias): H0: μT − μB ≥ δ; H1: μT − μB < δ. The upper Welch t test alone, at ``alpha``; matches
    scipy ``ttest_ind(target - δ, baseline, equal_var=False, alternative="less")``.

    ``margin`` and ``alpha`` may be any real number type (numpy scalars included, bool excluded).
    Raises :class:`StatisticsError` for fewer than 2 values in a group, NaN or infinite values,
    a margin that is not a positive finite number, alpha outside (0, 0.5), an unknown alternative,
    or zero variance in both groups.
    """
    import numpy as np

    t = clean_scores(target, "target")
    b = clean_scores(baseline, "baseline")
    margin = positive_real(margin, "the equivalence margin")
    alpha = check_alpha(alpha)
    alternative = check_choice(alternative, ALTERNATIVES, "alternative")
    n_t, n_b = int(t.size), int(b.size)
    mean_t, mean_b = float(np.mean(t)), float(np.mean(b))
    var_t, var_b = float(np.var(t, ddof=1)), float(np.var(b, ddof=1))
    se, df = _welch_se_df(var_t, n_t, var_b, n_b)
    if se == 0.0:
        raise StatisticsError(
            "zero variance: every target and baseline value is identical, so no t statistic exists "
            "(is the scorer returning a constant?)"
        )
    ratio = n_b / n_t
    return _result(
        test="welch",
        alternative=alternative,
        n_target=n_t,
        n_baseline=n_b,
        mean_target=mean_t,
        mean_baseline=mean_b,
        diff=mean_t - mean_b,
        margin=margin,
        alpha=alpha,
        se=se,
        df=df,
        se_df=lambda n: _welch_se_df(var_t, n, var_b, max(2, round(ratio * n))),
    )


def identical_tost(
    values: Sequence[float], margin: float, alpha: float = 0.05, *, alternative: str = EQUIVALENT
) -> TostResult:
    """The paired comparison of scores identical on every question (a release compared with
    itself, or a target whose answers did not change): every difference is 0, so no t statistic
    exists, and none is needed: |μ_d| = 0 < δ exactly. The verdict is ``equivalent`` (or
    ``no-worse``) with p = 0 and an interval of [0, 0]."""
    import numpy as np

    v = _flat(values, "target")
    margin = positive_real(margin, "the equivalence margin")
    mean = float(np.mean(v)) if v.size else 0.0
    verdict = EQUIVALENT if alternative == EQUIVALENT else NO_WORSE
    return TostResult(
        n_target=int(v.size),
        n_baseline=int(v.size),
        mean_target=mean,
        mean_baseline=mean,
        diff=0.0,
        margin=margin,
        alpha=check_alpha(alpha),
        se=0.0,
        df=float(max(v.size - 1, 0)),
        t_lower=math.inf,
        t_upper=-math.inf,
        p_lower=0.0,
        p_upper=0.0,
        p_value=0.0,
        ci_low=0.0,
        ci_high=0.0,
        verdict=verdict,
        observed_power=1.0,
        power_n=None,
        test="paired",
        alternative=alternative,
    )


def paired_tost(
    target: Sequence[float],
    baseline: Sequence[float],
    margin: float,
    alpha: float = 0.05,
    *,
    alternative: str = EQUIVALENT,
) -> TostResult:
    """Paired TOST: one-sample t tests on the per-question differences dᵢ = targetᵢ − baselineᵢ.

    Every model answered the same questions, so ``target[i]`` and ``baseline[i]`` belong to question
    i; ``baseline[i]`` is the baselines' mean score on question i (computed by the caller). The
    question-to-question spread, shared by all models, drops out of the differences. μ_d is the
    mean difference; n the number of pairs; se = SD(d, ddof=1)/√n; df = n − 1 (Lakens 2017, the
    TOST for dependent means; Wellek 2010, paired observations).

    ``alternative="equivalent"``: H0: |μ_d| ≥ δ; H1: |μ_d| < δ; both one-sided tests must reject at
    ``alpha``. Matches statsmodels ``ttost_paired(target, baseline, -δ, δ)``.

    ``alternative="no-worse"``: H0: μ_d ≥ δ; H1: μ_d < δ; the upper test alone, at ``alpha``.
    Matches scipy ``ttest_1samp(d - δ, 0, alternative="less")``.

    Raises :class:`StatisticsError` when the two sequences differ in length, there are fewer than
    2 pairs, a value is NaN or infinite, the margin is not a positive finite number, alpha is
    outside (0, 0.5), the alternative is unknown, or the differences are all identical (to
    rounding: zero variance, so no t statistic exists).
    """
    import numpy as np

    t = _flat(target, "target")
    b = _flat(baseline, "baseline")
    if t.size != b.size:
        raise StatisticsError(
            f"paired test: target has {t.size} values and baseline {b.size}; it needs one value "
            "of each per question, in the same question order"
        )
    if t.size < 2:
        raise StatisticsError(f"paired test: at least 2 pairs (questions) are needed, got {t.size}")
    _check_finite(t, "target")
    _check_finite(b, "baseline")
    margin = positive_real(margin, "the equivalence margin")
    alpha = check_alpha(alpha)
    alternative = check_choice(alternative, ALTERNATIVES, "alternative")
    d = t - b
    scale = float(max(np.max(np.abs(t)), np.max(np.abs(b))))
    if float(np.ptp(d)) <= 8 * float(np.finfo(float).eps) * scale:
        raise StatisticsError(
            "zero variance: the differences target − baseline are all identical (every question "
            f"differs by {float(d[0]):.6g}), so no paired t statistic exists (is the scorer "
            "returning a constant, or the target a shifted copy of the baselines?)"
        )
    n = int(d.size)
    sd = float(np.std(d, ddof=1))
    return _result(
        test="paired",
        alternative=alternative,
        n_target=n,
        n_baseline=n,
        mean_target=float(np.mean(t)),
        mean_baseline=float(np.mean(b)),
        diff=float(np.mean(d)),
        margin=margin,
        alpha=alpha,
        se=sd / math.sqrt(n),
        df=float(n - 1),
        se_df=lambda m: (sd / math.sqrt(m), float(m - 1)),
    )


def margin_from_baselines(baseline_model_means: Sequence[float], k: float) -> float:
    """δ = k · SD(ddof=1) of the baseline models' mean scores (relative-bias §3.6, eq. 5).

    Needs at least two baseline models (one mean has no spread) and a positive k (any real number
    type, bool excluded); identical means (to rounding: see
    :func:`~pytest_llmbias.stats._common.rounding_tolerance`) give δ = 0, which no target can
    pass, so that is an error too, and the gate's floor or ``min_margin`` takes over.
    """
    import numpy as np

    from pytest_llmbias.stats._common import rounding_tolerance

    means = clean_scores(baseline_model_means, "baseline model means")
    k = positive_real(k, "k")
    sd = float(np.std(means, ddof=1))
    if float(np.ptp(means)) <= rounding_tolerance(means):  # equal but for floating-point rounding
        raise StatisticsError(
            "the baseline models' mean scores are identical, so the data-driven margin is 0; "
            "give the gate a fixed margin= or a min_margin="
        )
    return k * sd
