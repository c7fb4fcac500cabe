"""Welch TOST against statsmodels, hand-worked cases, and the gate-stability estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.weightstats import ttost_ind

from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats import (
    equivalence_pass_probability,
    margin_from_baselines,
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
@given(
    shift=st.floats(-5, 5),
    scale=st.floats(0.1, 10),
    seed=st.integers(0, 2**16),
)
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
