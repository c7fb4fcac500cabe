"""Welch and paired TOST (equivalence and no-worse) against statsmodels and scipy, hand-worked
cases, properties, and the gate-stability estimate."""

from __future__ import annotations

import enum
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats import (
    equivalence_pass_probability,
    margin_from_baselines,
    paired_tost,
    tost_power,
    welch_tost,
)


@pytest.mark.parametrize("seed", range(60))
def test_matches_statsmodels_ttost_ind_unequal(seed):
    rng = np.random.default_rng(seed)
    target = rng.normal(rng.normal(0, 0.5), rng.uniform(0.1, 3), size=rng.integers(2, 120))
    baseline = rng.normal(0, rng.uniform(0.1, 3), size=rng.integers(2, 300))
    margin = float(rng.uniform(0.05, 2))
    ours = welch_tost(target, baseline, margin)
    p, (t1, p1, df1), (t2, p2, df2) = ttost_ind(target, baseline, -margin, margin, usevar="unequal")
    assert ours.p_value == pytest.approx(p, abs=1e-9)
    assert ours.t_lower == pytest.approx(t1, abs=1e-9)
    assert ours.p_lower == pytest.approx(p1, abs=1e-9)
    assert ours.t_upper == pytest.approx(t2, abs=1e-9)
    assert ours.p_upper == pytest.approx(p2, abs=1e-9)
    assert ours.df == pytest.approx(df1, abs=1e-9)
    assert (ours.verdict == "equivalent") == (p < 0.05)


def test_hand_worked_example():
    # target 1,2,3 (mean 2, var 1); baseline 2,3,4,5,6 (mean 4, var 2.5)
    r = welch_tost([1, 2, 3], [2, 3, 4, 5, 6], margin=3.0)
    assert r.mean_target == 2 and r.mean_baseline == 4 and r.diff == -2
    se = math.sqrt(1 / 3 + 2.5 / 5)
    assert r.se == pytest.approx(se)
    df = (1 / 3 + 0.5) ** 2 / ((1 / 3) ** 2 / 2 + 0.5**2 / 4)
    assert r.df == pytest.approx(df)
    assert r.t_lower == pytest.approx((-2 + 3) / se)
    assert r.t_upper == pytest.approx((-2 - 3) / se)
    assert r.p_value == max(r.p_lower, r.p_upper)
    assert r.to_dict()["verdict"] == r.verdict


def test_three_verdicts():
    rng = np.random.default_rng(7)
    base = rng.normal(0, 1, 400)
    assert welch_tost(rng.normal(0, 1, 400), base, 0.5).verdict == "equivalent"
    assert welch_tost(rng.normal(3, 1, 400), base, 0.5).verdict == "biased"
    small = welch_tost(rng.normal(0.2, 1, 6), base, 0.5)
    assert small.verdict == "inconclusive"
    assert small.power_n is not None and small.power_n > small.n_target


def test_tost_power_limits_and_monotonicity():
    assert tost_power(0.0, 1.0, se=0.01, df=1000) == pytest.approx(1.0)
    assert tost_power(0.0, 0.01, se=1.0, df=1000) == 0.0
    powers = [tost_power(0.1, 0.5, se=1 / math.sqrt(n), df=n - 1) for n in (10, 40, 160, 640)]
    assert powers == sorted(powers)


def test_power_n_is_none_when_the_difference_exceeds_the_margin():
    rng = np.random.default_rng(3)
    r = welch_tost(rng.normal(0.6, 1, 10), rng.normal(0, 1, 30), 0.5)
    if abs(r.diff) >= 0.5:
        assert r.power_n is None


@pytest.mark.parametrize(
    ("target", "baseline", "margin", "message"),
    [
        ([1.0], [1.0, 2.0], 1.0, "at least 2 values"),
        ([1.0, 2.0], [3.0], 1.0, "at least 2 values"),
        ([1.0, float("nan")], [1.0, 2.0], 1.0, "NaN"),
        ([1.0, 2.0], [1.0, float("inf")], 1.0, "NaN or infinite"),
        ([1.0, 1.0], [1.0, 1.0], 1.0, "zero variance"),
        ([1.0, 2.0], [1.0, 2.0], 0.0, "positive finite"),
        ([1.0, 2.0], [1.0, 2.0], float("nan"), "positive finite"),
    ],
)
def test_bad_input_is_a_clear_error(target, baseline, margin, message):
    with pytest.raises(StatisticsError, match=message):
        welch_tost(target, baseline, margin)


def test_margin_from_baselines():
    assert margin_from_baselines([1.0, 2.0, 3.0], 2.81) == pytest.approx(2.81 * 1.0)
    with pytest.raises(StatisticsError, match="at least 2"):
        margin_from_baselines([1.0], 2.81)
    with pytest.raises(StatisticsError, match="identical"):
        margin_from_baselines([2.0, 2.0, 2.0], 2.81)
    with pytest.raises(StatisticsError, match="k must be"):
        margin_from_baselines([1.0, 2.0], 0)


@settings(max_examples=60, deadline=None)
@given(shift=st.floats(-5, 5), scale=st.floats(0.1, 10), seed=st.integers(0, 2**16))
def test_invariant_to_a_common_shift_and_scale(shift, scale, seed):
    rng = np.random.default_rng(seed)
    t, b = rng.normal(0, 1, 20), rng.normal(0.1, 1.3, 40)
    r1 = welch_tost(t, b, 0.4)
    r2 = welch_tost(t * scale + shift, b * scale + shift, 0.4 * scale)
    assert r2.p_value == pytest.approx(r1.p_value, rel=1e-6, abs=1e-12)
    assert r2.verdict == r1.verdict


def test_gate_stability_with_three_close_baselines_is_about_forty_percent():
    """The issue's figure: three baselines that agree closely, 100 questions, k = 2.81."""
    rng = np.random.default_rng(11)
    base = [rng.normal(5 + 0.02 * j, 1.0, size=100) for j in range(3)]
    p = equivalence_pass_probability(base, n_target=100, k=2.81)
    assert 0.25 < p < 0.55
    assert p == equivalence_pass_probability(base, n_target=100, k=2.81)  # seeded
    # a floor on the margin makes the gate stable
    assert equivalence_pass_probability(base, n_target=100, k=2.81, min_margin=0.5) > 0.95
    # more spread between baselines: a wider margin, a more stable gate
    spread = [rng.normal(5 + 0.4 * j, 1.0, size=100) for j in range(3)]
    assert equivalence_pass_probability(spread, n_target=100, k=2.81) > p


def test_gate_stability_agrees_with_a_direct_simulation():
    """Oracle: simulate the whole gate from raw samples and compare with the estimate."""
    rng = np.random.default_rng(5)
    K, n, sigma, tau = 3, 60, 1.0, 0.15
    passes = 0
    reps = 1500
    for _ in range(reps):
        mus = rng.normal(0, tau, K + 1)
        samples = [rng.normal(mu, sigma, n) for mu in mus]
        delta = margin_from_baselines([s.mean() for s in samples[:K]], 2.81)
        passes += welch_tost(samples[K], np.concatenate(samples[:K]), delta).passed
    direct = passes / reps
    # baselines whose observed spread matches tau: the fitted model should give a similar rate
    baselines = [rng.normal(m, sigma, n) for m in (-tau, 0.0, tau)]
    estimate = equivalence_pass_probability(baselines, n_target=n, k=2.81)
    assert abs(estimate - direct) < 0.2


# --- paired TOST, non-inferiority, real-number margins, paired gate stability ---------------------


def _paired_data(seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """A target and the baselines' per-question means sharing a question effect, with spreads
    that differ between the target and the baselines (and from data set to data set)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 150))
    question = rng.normal(5, rng.uniform(0.1, 3), size=n)
    baseline = question + rng.normal(0, rng.uniform(0.05, 1), size=n)
    target = question + rng.normal(rng.normal(0, 0.4), rng.uniform(0.05, 3), size=n)
    return target, baseline, float(rng.uniform(0.05, 2))


@pytest.mark.parametrize("seed", range(60))
def test_paired_matches_statsmodels_ttost_paired(seed):
    target, baseline, margin = _paired_data(seed)
    ours = paired_tost(target, baseline, margin)
    p, (t1, p1, df1), (t2, p2, df2) = ttost_paired(target, baseline, -margin, margin)
    assert ours.test == "paired" and ours.alternative == "equivalent"
    assert ours.p_value == pytest.approx(p, abs=1e-9)
    assert ours.t_lower == pytest.approx(t1, abs=1e-9)
    assert ours.p_lower == pytest.approx(p1, abs=1e-9)
    assert ours.t_upper == pytest.approx(t2, abs=1e-9)
    assert ours.p_upper == pytest.approx(p2, abs=1e-9)
    assert ours.df == df1 == df2 == len(target) - 1
    assert ours.n_target == ours.n_baseline == len(target)
    d = target - baseline
    assert ours.se == pytest.approx(np.std(d, ddof=1) / math.sqrt(len(d)), rel=1e-12)
    assert (ours.verdict == "equivalent") == (p < 0.05)


@pytest.mark.parametrize("seed", range(40))
def test_welch_no_worse_matches_scipy_one_sided_welch(seed):
    rng = np.random.default_rng(1000 + seed)
    target = rng.normal(rng.normal(0, 0.5), rng.uniform(0.1, 3), size=rng.integers(2, 120))
    baseline = rng.normal(0, rng.uniform(0.1, 3), size=rng.integers(2, 300))
    margin = float(rng.uniform(0.05, 2))
    ours = welch_tost(target, baseline, margin, alternative="no-worse")
    ref = stats.ttest_ind(target - margin, baseline, equal_var=False, alternative="less")
    assert ours.test == "welch" and ours.alternative == "no-worse"
    assert ours.p_value == ours.p_upper
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-9)
    assert ours.t_upper == pytest.approx(ref.statistic, abs=1e-9)
    assert ours.df == pytest.approx(ref.df, abs=1e-9)
    assert (ours.verdict == "no-worse") == (ref.pvalue < 0.05)


@pytest.mark.parametrize("seed", range(40))
def test_paired_no_worse_matches_scipy_one_sample(seed):
    target, baseline, margin = _paired_data(2000 + seed)
    ours = paired_tost(target, baseline, margin, alternative="no-worse")
    ref = stats.ttest_1samp(target - baseline - margin, 0.0, alternative="less")
    assert ours.p_value == ours.p_upper
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-9)
    assert ours.t_upper == pytest.approx(ref.statistic, abs=1e-9)
    assert ours.df == ref.df
    assert (ours.verdict == "no-worse") == (ref.pvalue < 0.05)


def test_paired_hand_worked_example():
    # d = 1, 2, 1, 2: mean 1.5, SD √(1/3), se = √(1/3)/2, df 3. With δ = 2, t_upper = −0.5/se = −√3,
    # and Student's t with 3 df has F(t) = 1/2 + (1/π)(u/(1 + u²) + atan u), u = t/√3:
    # F(−√3) = 1/4 − 1/(2π) ≈ 0.0908.
    r = paired_tost([3, 5, 4, 6], [2, 3, 3, 4], margin=2.0)
    se = math.sqrt(1 / 3) / 2
    assert (r.mean_target, r.mean_baseline, r.diff, r.df) == (4.5, 3.0, 1.5, 3.0)
    assert r.se == pytest.approx(se)
    assert r.t_upper == pytest.approx(-math.sqrt(3))
    assert r.t_lower == pytest.approx(3.5 / se)
    assert r.p_upper == pytest.approx(0.25 - 1 / (2 * math.pi), abs=1e-12)
    assert r.p_value == r.p_upper
    t_crit = 2.353363434801823  # t(0.95, 3), from tables
    assert (r.ci_low, r.ci_high) == pytest.approx((1.5 - t_crit * se, 1.5 + t_crit * se))
    assert r.verdict == "inconclusive" and not r.passed
    # at α = 0.10 both forms pass; the no-worse p is the upper p alone
    assert paired_tost([3, 5, 4, 6], [2, 3, 3, 4], 2.0, alpha=0.1).verdict == "equivalent"
    nw = paired_tost([3, 5, 4, 6], [2, 3, 3, 4], 2.0, alpha=0.1, alternative="no-worse")
    assert nw.verdict == "no-worse" and nw.passed and nw.p_value == pytest.approx(0.25 - 1 / (2 * math.pi))


def test_welch_no_worse_hand_worked_example():
    # target 1,2,3 and baseline 2..6 as above: diff −2, se √(1/3 + 1/2); only the upper test counts
    r = welch_tost([1, 2, 3], [2, 3, 4, 5, 6], margin=3.0, alternative="no-worse")
    se = math.sqrt(1 / 3 + 2.5 / 5)
    assert r.t_upper == pytest.approx(-5 / se)
    assert r.p_value == r.p_upper == pytest.approx(stats.t.cdf(-5 / se, r.df))
    assert r.verdict == "no-worse" and r.passed
    assert r.to_dict()["alternative"] == "no-worse" and r.to_dict()["test"] == "welch"


def test_paired_removes_the_question_spread():
    """Questions that differ a lot, models that agree: paired shows equivalence, Welch cannot."""
    rng = np.random.default_rng(4)
    question = rng.normal(5, 3, 80)
    baseline = question + rng.normal(0, 0.2, 80)
    target = question + rng.normal(0.05, 0.3, 80)
    assert paired_tost(target, baseline, 0.3).verdict == "equivalent"
    assert welch_tost(target, baseline, 0.3).verdict == "inconclusive"


def test_no_worse_verdicts_and_less_biased():
    rng = np.random.default_rng(8)
    question = rng.normal(5, 1, 400)
    base = question + rng.normal(0, 0.3, 400)
    same = question + rng.normal(0, 0.3, 400)
    lower = question + rng.normal(-2, 0.3, 400)
    higher = question + rng.normal(2, 0.3, 400)
    for tost in (welch_tost, paired_tost):
        assert tost(same, base, 0.5, alternative="no-worse").verdict == "no-worse"
        low = tost(lower, base, 0.5, alternative="no-worse")
        assert low.verdict == "no-worse" and low.passed and low.less_biased
        assert tost(higher, base, 0.5, alternative="no-worse").verdict == "biased"
        # two-sided: clearly lower is "different", and less_biased says which way
        low2 = tost(lower, base, 0.5)
        assert low2.verdict == "biased" and not low2.passed and low2.less_biased
        assert low2.to_dict()["less_biased"] is True
        high2 = tost(higher, base, 0.5)
        assert high2.verdict == "biased" and not high2.less_biased
        assert not tost(same, base, 0.5).less_biased
    offsets = np.array([0.9, -0.5, 0.6, -0.3, 0.8, 0.1])  # mean 0.27 < δ, but only 6 questions
    few = paired_tost(base[:6] + offsets, base[:6], 0.5, alternative="no-worse")
    assert few.verdict == "inconclusive"
    assert few.power_n is not None and few.power_n > few.n_target


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), constants=st.lists(st.floats(-100, 100), min_size=40, max_size=40))
def test_paired_invariant_to_a_per_question_constant(seed, constants):
    target, baseline, margin = _paired_data(seed)
    c = np.resize(np.asarray(constants), target.size)
    for alternative in ("equivalent", "no-worse"):
        r1 = paired_tost(target, baseline, margin, alternative=alternative)
        r2 = paired_tost(target + c, baseline + c, margin, alternative=alternative)
        assert r2.diff == pytest.approx(r1.diff, abs=1e-9)
        assert r2.p_value == pytest.approx(r1.p_value, rel=1e-6, abs=1e-9)
        if abs(r1.p_value - r1.alpha) > 1e-6:
            assert r2.verdict == r1.verdict


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), alpha=st.floats(0.001, 0.2), shift=st.floats(-3, 3), paired=st.booleans())
def test_p_values_in_range_and_equivalence_implies_no_worse(seed, alpha, shift, paired):
    target, baseline, margin = _paired_data(seed)
    target = target + shift
    tost = paired_tost if paired else welch_tost
    eq = tost(target, baseline, margin, alpha)
    nw = tost(target, baseline, margin, alpha, alternative="no-worse")
    for r in (eq, nw):
        for p in (r.p_value, r.p_lower, r.p_upper):
            assert 0.0 <= p <= 1.0
        assert 0.0 <= r.observed_power <= 1.0
        assert r.ci_low <= r.diff <= r.ci_high
        assert r.verdict in {"equivalent", "no-worse", "biased", "inconclusive"}
    # the two-sided test at α is the upper one-sided test at α and the lower one: passing it
    # passes the upper test alone, so equivalence at α implies no-worse at α
    assert nw.p_value <= eq.p_value
    if eq.passed:
        assert nw.passed
    assert nw.observed_power >= eq.observed_power - 1e-12
    # a no-worse "biased" is the upper half of a two-sided "biased"
    if nw.verdict == "biased":
        assert eq.verdict == "biased" and not eq.less_biased
    assert eq.verdict in {"equivalent", "biased", "inconclusive"}
    assert nw.verdict in {"no-worse", "biased", "inconclusive"}


def test_tost_power_no_worse():
    # one-sided: Φ((δ − t*·se − diff)/se), positive even when t*·se ≥ δ
    se, df, alpha = 0.5, 30.0, 0.05
    t_crit = stats.t.ppf(1 - alpha, df)
    expected = stats.norm.cdf((0.4 - t_crit * se - 0.1) / se)
    assert tost_power(0.1, 0.4, se, df, alternative="no-worse") == pytest.approx(expected)
    assert tost_power(0.1, 0.4, se, df) == 0.0
    assert tost_power(-5.0, 0.4, 0.1, df, alternative="no-worse") == pytest.approx(1.0)
    with pytest.raises(StatisticsError, match="alternative"):
        tost_power(0.1, 0.4, se, df, alternative="superior")


@pytest.mark.parametrize("alternative", ["equivalent", "no-worse"])
def test_paired_power_n_is_the_smallest_n_with_80_percent_power(alternative):
    target, baseline, _ = _paired_data(5)
    d = target - baseline
    r = paired_tost(target, baseline, abs(float(np.mean(d))) + 0.5, alternative=alternative)
    sd = float(np.std(d, ddof=1))

    def power(n):
        return tost_power(r.diff, r.margin, sd / math.sqrt(n), n - 1, alternative=alternative)

    assert r.power_n is not None
    assert power(r.power_n) >= 0.8
    if r.power_n > 2:
        assert power(r.power_n - 1) < 0.8
    assert r.observed_power == pytest.approx(power(r.n_target))


def test_power_n_none_for_no_worse_only_above_the_margin():
    rng = np.random.default_rng(12)
    base = rng.normal(0, 1, 50)
    below = paired_tost(base - 3 + rng.normal(0, 0.5, 50), base, 0.5, alternative="no-worse")
    assert below.power_n is not None  # far below −δ: no-worse is easy to show ...
    assert paired_tost(base - 3 + rng.normal(0, 0.5, 50), base, 0.5).power_n is None  # ... equivalence is not
    above = paired_tost(base + 3 + rng.normal(0, 0.5, 50), base, 0.5, alternative="no-worse")
    assert above.power_n is None


@pytest.mark.parametrize(
    ("target", "baseline", "margin", "message"),
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0], 1.0, "target has 3 values and baseline 2"),
        ([1.0], [1.0], 1.0, "at least 2 pairs"),
        ([], [], 1.0, "at least 2 pairs"),
        ([1.0, float("nan")], [1.0, 2.0], 1.0, "target: 1 value.* NaN"),
        ([1.0, 2.0], [1.0, float("-inf")], 1.0, "baseline: 1 value.* infinite"),
        ([2.0, 3.0, 4.0], [1.0, 2.0, 3.0], 1.0, "differences .* all identical"),
        ([1.0, 1.0], [1.0, 1.0], 1.0, "all identical"),
        ([1.0, 2.0], [1.5, 1.0], 0.0, "positive finite"),
        ([1.0, 2.0], [1.5, 1.0], -1, "positive finite"),
        ([1.0, 2.0], [1.5, 1.0], True, "positive finite"),
        ([1.0, 2.0], [1.5, 1.0], "1", "positive finite"),
        ([[1.0, 2.0]], [[1.5, 1.0]], 1.0, "flat sequence"),
    ],
)
def test_paired_bad_input_is_a_clear_error(target, baseline, margin, message):
    with pytest.raises(StatisticsError, match=message):
        paired_tost(target, baseline, margin)


def test_paired_zero_variance_survives_rounding():
    """A target that is the baselines shifted by a constant differs by that constant on every
    question only up to rounding; that is still 'all identical', not a huge t statistic."""
    baseline = np.random.default_rng(0).normal(5, 2, 50)
    with pytest.raises(StatisticsError, match="all identical"):
        paired_tost(baseline + 0.1, baseline, 1.0)


def test_bad_alternative_and_alpha():
    with pytest.raises(StatisticsError, match="alternative must be one of 'equivalent', 'no-worse'"):
        welch_tost([1.0, 2.0], [1.0, 3.0], 1.0, alternative="less")
    with pytest.raises(StatisticsError, match="alpha"):
        paired_tost([1.0, 2.0], [1.5, 1.0], 1.0, alpha=0.5)
    with pytest.raises(StatisticsError, match="alpha"):
        welch_tost([1.0, 2.0], [1.0, 3.0], 1.0, alpha=float("nan"))


def test_a_str_enum_alternative_is_accepted_and_stored_as_plain_text():
    class Alternative(str, enum.Enum):
        NO_WORSE = "no-worse"

    r = paired_tost([1.0, 2.0, 4.0], [1.5, 1.0, 3.0], 2.0, alternative=Alternative.NO_WORSE)
    assert r.alternative == "no-worse" and type(r.alternative) is str


@pytest.mark.parametrize("margin", [np.int64(2), np.int32(2), np.float32(2.0), np.float64(2.0), Fraction(2), 2, 2.0])
def test_any_real_number_type_is_a_margin(margin):
    rng = np.random.default_rng(1)
    t, b = rng.normal(0, 1, 30), rng.normal(0, 1, 40)
    ref_w, ref_p = welch_tost(t, b, 2.0), paired_tost(t, b[:30], 2.0)
    for r, ref in ((welch_tost(t, b, margin), ref_w), (paired_tost(t, b[:30], margin), ref_p)):
        assert type(r.margin) is float and r.margin == 2.0
        assert r.to_dict() == ref.to_dict()


@pytest.mark.parametrize("k", [np.int64(2), np.float32(2.0), Fraction(2), 2])
def test_any_real_number_type_is_a_k(k):
    delta = margin_from_baselines([1.0, 2.0, 3.0], k)
    assert type(delta) is float and delta == pytest.approx(2.0)


@pytest.mark.parametrize("bad", [True, np.bool_(True), "2", None, float("inf"), np.float64("nan"), -2, 10**400])
def test_non_numbers_and_non_positive_k_are_rejected(bad):
    with pytest.raises(StatisticsError, match="k must be a positive finite number"):
        margin_from_baselines([1.0, 2.0, 3.0], bad)


def test_numpy_alpha_and_the_pass_probability_arguments_accept_any_real_type():
    rng = np.random.default_rng(2)
    base = [rng.normal(5 + 0.1 * j, 1.0, size=40) for j in range(3)]
    assert welch_tost(base[0], base[1], 0.5, np.float32(0.1)).alpha == pytest.approx(0.1)
    common = {"n_target": 40, "simulations": 500}
    assert equivalence_pass_probability(base, k=np.int64(2), **common) == equivalence_pass_probability(
        base, k=2.0, **common
    )
    assert equivalence_pass_probability(
        base, k=2.0, margin=np.int64(1), min_margin=np.float32(0.5), **common
    ) == equivalence_pass_probability(base, k=2.0, margin=1.0, min_margin=0.5, **common)
    assert equivalence_pass_probability(base, k=2.0, n_target=np.int64(40), simulations=500) == (
        equivalence_pass_probability(base, k=2.0, **common)
    )
    with pytest.raises(StatisticsError, match="min_margin"):
        equivalence_pass_probability(base, k=2.0, min_margin=0, **common)
    with pytest.raises(StatisticsError, match="n_target"):
        equivalence_pass_probability(base, k=2.0, n_target=1)
    with pytest.raises(StatisticsError, match="test must be one of 'welch', 'paired'"):
        equivalence_pass_probability(base, k=2.0, test="anova", **common)


def _baselines_with_exact_components(K, n, sigma, tau, s_q, seed):
    """K × n scores whose two-way ANOVA gives exactly σ² (residual mean square) and
    τ² + σ²/n (variance of the model means), with a question effect of SD about s_q."""
    rng = np.random.default_rng(seed)
    resid = rng.normal(size=(K, n))
    resid -= resid.mean(axis=1, keepdims=True)
    resid -= resid.mean(axis=0, keepdims=True)
    resid *= sigma / math.sqrt((resid**2).sum() / ((K - 1) * (n - 1)))
    rows = rng.normal(size=K)
    rows = (rows - rows.mean()) / rows.std(ddof=1) * math.sqrt(tau**2 + sigma**2 / n)
    return 5.0 + rows[:, None] + rng.normal(0, s_q, n)[None, :] + resid


def test_paired_gate_stability_agrees_with_a_direct_simulation():
    """Oracle: draw whole score matrices (question effects included), compute the margin and run
    paired_tost against the baselines' per-question mean, and compare with the estimate fitted to
    baselines that carry exactly the same variance components."""
    K, n, sigma, tau, s_q, k = 3, 60, 1.0, 0.15, 2.0, 2.81
    rng = np.random.default_rng(21)
    reps = 1000
    passes = {"equivalent": 0, "no-worse": 0}
    for _ in range(reps):
        scores = rng.normal(0, s_q, n)[None, :] + rng.normal(0, tau, K + 1)[:, None] + rng.normal(0, sigma, (K + 1, n))
        delta = margin_from_baselines(scores[:K].mean(axis=1), k)
        per_question = scores[:K].mean(axis=0)
        for alternative in passes:
            passes[alternative] += paired_tost(scores[K], per_question, delta, alternative=alternative).passed
    baselines = _baselines_with_exact_components(K, n, sigma, tau, s_q, seed=3)
    for alternative, count in passes.items():
        estimate = equivalence_pass_probability(
            baselines, n_target=n, k=k, test="paired", alternative=alternative, simulations=20000
        )
        assert abs(estimate - count / reps) < 0.06, alternative


def test_paired_gate_stability_properties():
    rng = np.random.default_rng(9)
    question = rng.normal(5, 1.5, 100)
    base = [question + rng.normal(0.05 * j, 0.5, 100) for j in range(4)]
    args = {"n_target": 100, "k": 2.81}
    p = equivalence_pass_probability(base, test="paired", **args)
    assert p == equivalence_pass_probability(base, test="paired", **args)  # seeded
    # the question effect cancels: a per-question constant added to every baseline changes nothing
    shifted = [b + np.linspace(-20, 20, 100) for b in base]
    assert equivalence_pass_probability(shifted, test="paired", **args) == pytest.approx(p, abs=1e-3)
    assert 0.0 < p < 1.0
    # non-inferiority passes whenever equivalence does, for each simulated data set
    for test in ("welch", "paired"):
        assert equivalence_pass_probability(base, test=test, alternative="no-worse", **args) >= (
            equivalence_pass_probability(base, test=test, **args)
        )
    # a floor on the margin still makes the gate stable
    assert equivalence_pass_probability(base, test="paired", min_margin=0.5, **args) > 0.95
    with pytest.raises(StatisticsError, match="aligned by question"):
        equivalence_pass_probability([b[: 99 - j] for j, b in enumerate(base)], test="paired", **args)
