"""Selection rates, the impact ratio, disparity metrics and Dixon's Q: worked cases, oracles
(numpy/scipy, a brute-force simulation, the published Dixon table) and properties."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from scipy import stats as sps

from pytest_llmbias.choices import SelectionMethod, Standard
from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats import (
    BootstrapInterval,
    SelectionRule,
    bootstrap_impact_ratio,
    disparity_metrics,
    dixon_critical,
    dixon_q,
    impact_ratio,
    permutation_null,
    selection_rates,
    selection_standard,
    summarize_groups,
)

FIG6_VALUES = [0.5, 0.75, 0.25, 0.2]
FIG6_GROUPS = ["Apple", "Apple", "Pear", "Pear"]


def _pairs(groups: dict[str, list[float]]) -> tuple[list[float], list[str]]:
    values = [v for vs in groups.values() for v in vs]
    labels = [g for g, vs in groups.items() for _ in vs]
    return values, labels


# ------------------------------------------------------------------------------------------
# Worked examples
# ------------------------------------------------------------------------------------------


def test_saged_figure_6_worked_example():
    r = impact_ratio(FIG6_VALUES, FIG6_GROUPS)
    assert r.standard == "mean" and r.method == "larger"
    assert r.group("Apple").mean == pytest.approx(0.625)
    assert r.group("Pear").mean == pytest.approx(0.225)
    assert r.standard_value == pytest.approx(0.425)
    assert r.selection_rates == {"Apple": 1.0, "Pear": 0.0}
    assert r.impact_ratios == {"Apple": 1.0, "Pear": 0.0}
    assert r.means.range == pytest.approx(0.4)
    assert r.min_impact_ratio == 0.0
    assert r.worst_pair == ("Pear", "Apple")
    assert r.four_fifths_bias
    assert r.n == 4
    assert [g.group for g in r.groups] == ["Apple", "Pear"]
    assert r.means.dixon is None and r.rates.dixon is None  # 2 groups
    with pytest.raises(KeyError, match="Apple, Pear"):
        r.group("Plum")
    d = r.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["worst_pair"] == ["Pear", "Apple"]
    assert d["groups"][0]["group"] == "Apple"
    assert d["means"]["range"] == pytest.approx(0.4)


def test_figure_6_with_the_smaller_method_flips_the_worst_pair():
    # S = 0.425 as before; smaller selects g <= S: Apple 0/2, Pear 2/2
    r = impact_ratio(FIG6_VALUES, FIG6_GROUPS, SelectionRule(method="smaller"))
    assert r.selection_rates == {"Apple": 0.0, "Pear": 1.0}
    assert r.min_impact_ratio == 0.0
    assert r.worst_pair == ("Apple", "Pear")


def test_median_standard_by_hand():
    # A = 1, 4, 6; B = 2, 3, 9. Pooled sorted: 1 2 3 4 6 9 -> median (3 + 4) / 2 = 3.5.
    # larger (g >= 3.5): A selects 4, 6 -> 2/3; B selects 9 -> 1/3. min IR = (1/3) / (2/3) = 0.5.
    values, groups = _pairs({"A": [1, 4, 6], "B": [2, 3, 9]})
    assert selection_standard(values, "median") == 3.5
    r = impact_ratio(values, groups, SelectionRule(standard="median"))
    assert r.standard_value == 3.5
    assert r.selection_rates == pytest.approx({"A": 2 / 3, "B": 1 / 3})
    assert r.min_impact_ratio == pytest.approx(0.5)
    assert r.worst_pair == ("B", "A")
    assert r.impact_ratios == pytest.approx({"A": 1.0, "B": 0.5})


def test_a_value_equal_to_the_standard_is_selected():
    # A = 1, 2, 3; B = 3, 4. Pooled median = 3 (an actual value): ">=" and "<=" both include it.
    values, groups = _pairs({"A": [1, 2, 3], "B": [3, 4]})
    assert selection_rates(values, groups, SelectionRule("median", "larger")) == pytest.approx({"A": 1 / 3, "B": 1.0})
    assert selection_rates(values, groups, SelectionRule("median", "smaller")) == pytest.approx({"A": 1.0, "B": 0.5})


def test_quantile_standard_by_hand():
    # A = 1, 4, 6, 8; B = 2, 3. Pooled sorted: 1 2 3 4 6 8 (n = 6).
    # q = 0.25, linear interpolation: position (6 - 1) * 0.25 = 1.25 -> 2 + 0.25 * (3 - 2) = 2.25.
    # larger (g >= 2.25): A: 4, 6, 8 -> 3/4; B: 3 -> 1/2; min IR = 0.5 / 0.75 = 2/3, worst (B, A).
    # smaller (g <= 2.25): A: 1 -> 1/4; B: 2 -> 1/2; min IR = 0.25 / 0.5 = 0.5, worst (A, B).
    values, groups = _pairs({"A": [1, 4, 6, 8], "B": [2, 3]})
    assert selection_standard(values, "quantile", quantile=0.25) == pytest.approx(2.25)
    larger = impact_ratio(values, groups, SelectionRule("quantile", quantile=0.25))
    assert larger.selection_rates == pytest.approx({"A": 0.75, "B": 0.5})
    assert larger.min_impact_ratio == pytest.approx(2 / 3)
    assert larger.worst_pair == ("B", "A")
    smaller = impact_ratio(values, groups, SelectionRule("quantile", "smaller", quantile=0.25))
    assert smaller.selection_rates == pytest.approx({"A": 0.25, "B": 0.5})
    assert smaller.min_impact_ratio == pytest.approx(0.5)
    assert smaller.worst_pair == ("A", "B")
    # quantile 0.5 is the median
    assert selection_standard(values, "quantile", quantile=0.5) == selection_standard(values, "median")


def test_within_range_by_hand():
    # A = 0, 0.5, 1; B = 0.4, 0.6, 2. Pooled mean = (1.5 + 3) / 6 = 0.75.
    # within 0.3 (|g - 0.75| <= 0.3): A: 0.5 and 1.0 (both 0.25 away) -> 2/3;
    # B: 0.6 (0.15 away) -> 1/3 (0.4 is 0.35 away, 2 is 1.25 away). min IR = 0.5.
    values, groups = _pairs({"A": [0.0, 0.5, 1.0], "B": [0.4, 0.6, 2.0]})
    r = impact_ratio(values, groups, SelectionRule(method="within-range", within=0.3))
    assert r.standard_value == pytest.approx(0.75)
    assert r.selection_rates == pytest.approx({"A": 2 / 3, "B": 1 / 3})
    assert r.min_impact_ratio == pytest.approx(0.5)
    assert r.worst_pair == ("B", "A")
    # a wider range takes in 0.4 too: B = 2/3, IR = 1
    wide = SelectionRule(method="within-range", within=0.4)
    assert impact_ratio(values, groups, wide).min_impact_ratio == pytest.approx(1.0)


def test_rounding_of_the_standard_does_not_unselect_equal_values():
    # The mean of six 0.7s rounds a hair above 0.7; a strict g >= S would select nothing.
    values, groups = _pairs({"A": [0.7] * 3, "B": [0.7] * 3})
    assert np.mean(values) > 0.7
    for method in ("larger", "smaller"):
        r = impact_ratio(values, groups, SelectionRule(method=method))
        assert r.selection_rates == {"A": 1.0, "B": 1.0}
        assert r.min_impact_ratio == 1.0
    assert impact_ratio(values, groups, SelectionRule(method="within-range", within=1e-12)).min_impact_ratio == 1.0


def test_summaries_and_worst_pair_ties():
    values, groups = _pairs({"c": [1.0, 3.0], "a": [5.0], "b": [0.0, 0.0, 9.0]})
    s = summarize_groups(values, groups)
    assert [g.group for g in s] == ["a", "b", "c"]
    a, b, c = s
    assert a.n == 1 and math.isnan(a.sd) and a.to_dict()["sd"] is None
    assert b.mean == 3.0 and b.median == 0.0 and b.sd == pytest.approx(np.std([0, 0, 9], ddof=1))
    assert c.sd == pytest.approx(math.sqrt(2))
    # pooled mean = 18 / 6 = 3: a 1/1, b 1/3, c 1/2 (3.0 counts)
    assert [g.selection_rate for g in s] == pytest.approx([1.0, 1 / 3, 0.5])
    # all rates equal: the pair is the first two names, never a group with itself
    values, groups = _pairs({"z": [1.0, 2.0], "y": [1.0, 2.0], "x": [1.0, 2.0]})
    r = impact_ratio(values, groups)
    assert r.min_impact_ratio == 1.0 and r.worst_pair == ("x", "y")
    # ties on the top and the bottom are broken by name
    values, groups = _pairs({"d": [0.0], "c": [0.0], "b": [1.0], "a": [1.0]})
    assert impact_ratio(values, groups).worst_pair == ("c", "a")


def test_accepts_numpy_arrays_and_tuples():
    values = np.array(FIG6_VALUES)
    groups = np.array(FIG6_GROUPS)
    r1 = impact_ratio(values, groups)
    r2 = impact_ratio(tuple(FIG6_VALUES), tuple(FIG6_GROUPS))
    assert r1 == r2
    assert all(type(g.group) is str for g in r1.groups)


def test_three_groups_carry_dixon_results_and_serialise():
    values, groups = _pairs({"a": [0.1, 0.2], "b": [0.15, 0.25], "c": [0.9, 0.95], "d": [0.12, 0.22]})
    r = impact_ratio(values, groups)
    assert r.means.dixon is not None and r.means.dixon.n == 4
    assert r.means.dixon.suspect == "c"
    assert r.rates.dixon is not None
    text = json.dumps(r.to_dict(), allow_nan=False)
    assert '"suspect": "c"' in text


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------

ONE, TWO = ["a", "b"], [1.0, 2.0]


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"values": [1.0, 2.0, 3.0], "groups": ONE}, ["differ in length", "3 values", "2 group labels"]),
        ({"values": [], "groups": []}, ["no values"]),
        ({"values": [1.0, math.nan, math.inf, 2.0], "groups": ["a", "a", "b", "b"]}, ["2 of 4", "NaN or infinite"]),
        ({"values": TWO, "groups": ["solo", "solo"]}, ["only one group", "'solo'", "at least 2"]),
        ({"values": TWO, "groups": ONE, "standard": "mode"}, ["unknown standard 'mode'", "mean, median, quantile"]),
        (
            {"values": TWO, "groups": ONE, "method": "above"},
            ["unknown selection method 'above'", "larger, smaller, within-range"],
        ),
        ({"values": TWO, "groups": ONE, "standard": "quantile", "quantile": 0.0}, ["strictly between 0 and 1"]),
        ({"values": TWO, "groups": ONE, "standard": "quantile", "quantile": 1.0}, ["strictly between 0 and 1"]),
        ({"values": TWO, "groups": ONE, "quantile": -0.5}, ["strictly between 0 and 1"]),
        ({"values": TWO, "groups": ONE, "method": "within-range"}, ["needs within="]),
        ({"values": TWO, "groups": ONE, "method": "within-range", "within": 0.0}, ["positive finite"]),
        ({"values": TWO, "groups": ONE, "method": "within-range", "within": math.nan}, ["positive finite"]),
        ({"values": TWO, "groups": ONE, "within": 0.2}, ["only applies to method='within-range'"]),
        ({"values": TWO, "groups": "ab"}, ["not a single string"]),
        ({"values": TWO, "groups": [1, 2]}, ["must be strings"]),
        ({"values": [[1.0, 2.0]], "groups": ONE}, ["flat sequence"]),
        ({"values": ["x", "y"], "groups": ONE}, ["must be numbers"]),
    ],
)
@pytest.mark.parametrize("func", [impact_ratio, selection_rates, summarize_groups, bootstrap_impact_ratio])
def test_bad_input_is_a_clear_error(func, kwargs, fragments):
    rule_keys = {"standard", "method", "quantile", "within"}
    with pytest.raises(StatisticsError) as info:
        rule = SelectionRule(**{k: v for k, v in kwargs.items() if k in rule_keys})
        func(**{k: v for k, v in kwargs.items() if k not in rule_keys}, rule=rule)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_nothing_selected_makes_the_impact_ratio_undefined():
    # mean 0.5, nothing within 0.1 of it
    values, groups = _pairs({"A": [0.0, 0.0], "B": [1.0, 1.0]})
    with pytest.raises(StatisticsError) as info:
        impact_ratio(values, groups, SelectionRule(method="within-range", within=0.1))
    message = str(info.value)
    for fragment in ("no response of any group was selected", "undefined", "'mean'", "'within-range'"):
        assert fragment in message
    # the rates themselves are fine: all zero
    assert selection_rates(values, groups, SelectionRule(method="within-range", within=0.1)) == {"A": 0.0, "B": 0.0}


def test_selection_standard_errors():
    with pytest.raises(StatisticsError, match="no values"):
        selection_standard([])
    with pytest.raises(StatisticsError, match="1 of 2 value"):
        selection_standard([1.0, math.inf])
    with pytest.raises(StatisticsError, match="unknown standard"):
        selection_standard([1.0], "max")
    assert selection_standard([1.0, 2.0, 6.0]) == 3.0


def test_dixon_and_disparity_errors():
    with pytest.raises(StatisticsError, match="at least 3 values, got n=2"):
        dixon_critical(2)
    with pytest.raises(StatisticsError, match="confidence must lie strictly between 0 and 1"):
        dixon_critical(5, 1.0)
    with pytest.raises(StatisticsError, match="integer"):
        dixon_critical(5.0)  # type: ignore[arg-type]
    with pytest.raises(StatisticsError, match="at least 3 groups, got 2"):
        dixon_q({"a": 1.0, "b": 2.0})
    with pytest.raises(StatisticsError, match=r"at least 2 groups, got 1 \('a'\)"):
        disparity_metrics({"a": 1.0})
    with pytest.raises(StatisticsError, match="NaN or infinite.*groups: b"):
        disparity_metrics({"a": 1.0, "b": math.nan})
    with pytest.raises(StatisticsError, match="mapping"):
        disparity_metrics([1.0, 2.0])  # type: ignore[arg-type]


def test_bootstrap_argument_errors():
    values, groups = _pairs({"A": [0.0, 1.0], "B": [0.5, 1.0]})
    with pytest.raises(StatisticsError, match="resamples must be a positive integer"):
        bootstrap_impact_ratio(values, groups, resamples=0)
    with pytest.raises(StatisticsError, match="seed must be an integer"):
        bootstrap_impact_ratio(values, groups, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(StatisticsError, match="confidence"):
        bootstrap_impact_ratio(values, groups, confidence=0.0)


# ------------------------------------------------------------------------------------------
# Dixon's Q
# ------------------------------------------------------------------------------------------

RORABACHER = {  # n: (Q90, Q95, Q99), Rorabacher (1991)
    3: (0.941, 0.970, 0.994),
    4: (0.765, 0.829, 0.926),
    5: (0.642, 0.710, 0.821),
    6: (0.560, 0.625, 0.740),
    7: (0.507, 0.568, 0.680),
    8: (0.468, 0.526, 0.634),
    9: (0.437, 0.493, 0.598),
    10: (0.412, 0.466, 0.568),
}


@pytest.mark.parametrize("n", sorted(RORABACHER))
def test_dixon_critical_matches_the_published_table(n):
    for confidence, published in zip((0.90, 0.95, 0.99), RORABACHER[n], strict=True):
        assert dixon_critical(n, confidence) == pytest.approx(published, abs=0.01)


def _brute_force_q(n: int, reps: int, seed: int) -> np.ndarray:
    x = np.sort(np.random.default_rng(seed).standard_normal((reps, n)), axis=1)
    return np.maximum(x[:, 1] - x[:, 0], x[:, -1] - x[:, -2]) / (x[:, -1] - x[:, 0])


@pytest.mark.parametrize("n", [3, 4, 11, 40])
def test_dixon_critical_agrees_with_sorting_normal_samples(n):
    """Oracle for the order-statistic shortcut: the plain simulation (sort n normal draws)."""
    q = _brute_force_q(n, 100_000, seed=n)
    for confidence in (0.5, 0.9, 0.95, 0.99):
        assert dixon_critical(n, confidence) == pytest.approx(np.quantile(q, confidence), abs=0.006)


@pytest.mark.parametrize("n", [3, 19, 100])
def test_the_written_dixon_table_is_the_simulation(n):
    """The table read instead of the simulation (``scripts/dixon_table.py``) holds its values."""
    from pytest_llmbias.stats.dixon_table import CONFIDENCES, CRITICAL
    from pytest_llmbias.stats.outliers import _dixon_null

    assert sorted(CRITICAL) == list(range(3, 101))
    for confidence, written in zip(CONFIDENCES, CRITICAL[n], strict=True):
        assert dixon_critical(n, confidence) == written
        assert written == pytest.approx(float(np.quantile(_dixon_null(n), confidence)), abs=1e-9)


def test_dixon_critical_is_reproducible_and_monotone():
    assert dixon_critical(7, 0.95) == dixon_critical(7, 0.95)
    assert dixon_critical(7, 0.90) < dixon_critical(7, 0.95) < dixon_critical(7, 0.99)
    assert dixon_critical(5) > dixon_critical(10) > dixon_critical(20) > dixon_critical(40)
    assert 0 < dixon_critical(500, 0.95) < dixon_critical(40)


def _spread_plus(n: int, extra: float) -> dict[str, float]:
    values = {f"g{i:02d}": i / (n - 2) for i in range(n - 1)}  # n - 1 values evenly in [0, 1]
    values["odd"] = extra
    return values


@pytest.mark.parametrize("n", range(4, 61))
def test_dixon_flags_a_clear_outlier_for_every_n(n):
    high = dixon_q(_spread_plus(n, 10.0))
    assert high.outlier and high.margin > 0
    assert high.suspect == "odd" and high.suspect_value == 10.0
    assert high.q == pytest.approx((10.0 - 1.0) / 10.0)
    low = dixon_q(_spread_plus(n, -10.0))
    assert low.outlier and low.suspect == "odd" and low.suspect_value == -10.0
    even = dixon_q({f"g{i:02d}": i / (n - 1) for i in range(n)})
    assert not even.outlier and even.margin < 0
    assert even.q == pytest.approx(1 / (n - 1))


def test_dixon_with_three_values():
    # [0, 1, 10]: Q = 9 / 10 = 0.9, below the published Q95 of 0.970 for n = 3; Dixon's test is
    # that lenient with 3 values. At 100: Q = 99 / 100 = 0.99 > 0.970.
    assert not dixon_q(_spread_plus(3, 10.0)).outlier
    r = dixon_q(_spread_plus(3, 100.0))
    assert r.outlier and r.suspect == "odd" and r.q == pytest.approx(0.99)
    assert dixon_q(_spread_plus(3, -100.0)).suspect == "odd"
    assert not dixon_q({"a": 0.0, "b": 0.5, "c": 1.0}).outlier


def test_dixon_range_zero_is_not_an_outlier():
    r = dixon_q({"a": 0.3, "b": 0.3, "c": 0.3, "d": 0.3})
    assert r.q == 0.0 and not r.outlier and r.suspect is None
    d = r.to_dict()
    assert d["suspect_value"] is None and d["outlier"] is False
    json.dumps(d, allow_nan=False)


# ------------------------------------------------------------------------------------------
# Disparity metrics
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_disparity_matches_numpy_and_scipy(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 15))
    arr = rng.normal(rng.normal(), rng.uniform(0.1, 3), size=k)
    stats = {f"g{i}": float(v) for i, v in enumerate(arr)}
    d = disparity_metrics(stats, statistic="mean")
    assert d.statistic == "mean"
    assert d.range == pytest.approx(arr.max() - arr.min())
    assert d.sd == pytest.approx(np.std(arr, ddof=1))
    z = np.abs(sps.zscore(arr, ddof=1))
    assert d.max_z == pytest.approx(z.max())
    assert d.max_z_group == f"g{int(np.argmax(z))}"
    if arr.min() < 0:
        assert d.min_max_ratio is None
    else:
        assert d.min_max_ratio == pytest.approx(arr.min() / arr.max())
    positive = disparity_metrics({k: abs(v) + 0.01 for k, v in stats.items()})
    assert positive.min_max_ratio == pytest.approx(min(positive.values.values()) / max(positive.values.values()))
    assert (d.dixon is None) == (k < 3)
    json.dumps(d.to_dict(), allow_nan=False)


def test_disparity_edge_cases():
    signed = disparity_metrics({"a": -0.5, "b": 0.2, "c": 0.4})
    assert signed.min_max_ratio is None
    assert disparity_metrics({"a": -0.5, "b": -0.2}).min_max_ratio is None
    assert disparity_metrics({"a": 0.0, "b": 0.0}).min_max_ratio is None  # max 0
    assert disparity_metrics({"a": 0.0, "b": 0.5}).min_max_ratio == 0.0
    flat = disparity_metrics({"a": 0.7, "b": 0.7, "c": 0.7})
    assert flat.sd == 0.0 and flat.max_z == 0.0 and flat.max_z_group is None and flat.range == 0.0
    assert flat.dixon is not None and not flat.dixon.outlier
    assert flat.to_dict()["max_z_group"] is None


def test_a_constant_feature_has_no_outlier_despite_rounded_group_means():
    # The mean of three 0.1s is 0.10000000000000002, of two or four 0.1s 0.1: a spread of a few
    # ulps that Dixon's Q read as Q = 1 ("outlier A") and max Z as a group standing apart.
    r = impact_ratio([0.1] * 9, ["A"] * 3 + ["B"] * 2 + ["C"] * 4)
    assert r.group("A").mean != r.group("B").mean  # the rounding is really there
    assert r.min_impact_ratio == 1.0
    m = r.means
    assert (m.range, m.sd, m.max_z, m.max_z_group, m.min_max_ratio) == (0.0, 0.0, 0.0, None, 1.0)
    assert m.dixon is not None and m.dixon.q == 0.0 and not m.dixon.outlier and m.dixon.suspect is None
    assert m.values == {"A": r.group("A").mean, "B": 0.1, "C": 0.1}  # the values themselves are kept
    json.dumps(r.to_dict(), allow_nan=False)


def test_values_a_few_ulps_apart_count_as_equal():
    near = {"a": 0.3, "b": 0.1 + 0.2, "c": float(np.nextafter(0.3, 1.0)), "d": float(np.nextafter(0.3, 0.0))}
    assert len(set(near.values())) == 3
    q = dixon_q(near)
    assert q.q == 0.0 and not q.outlier and q.suspect is None
    d = disparity_metrics(near)
    assert (d.range, d.sd, d.max_z, d.max_z_group, d.min_max_ratio) == (0.0, 0.0, 0.0, None, 1.0)
    assert not d.dixon.outlier
    # near 0 the tolerance does not shrink with the values: rounding scales with the scores averaged
    around_zero = disparity_metrics({"a": 1e-17, "b": 0.0, "c": -2e-17})
    assert (around_zero.sd, around_zero.max_z_group, around_zero.dixon.suspect) == (0.0, None, None)
    # and it grows with them
    big = disparity_metrics({"a": 1e6, "b": 1e6, "c": float(np.nextafter(1e6, 2e6))})
    assert big.sd == 0.0 and not big.dixon.outlier


def test_a_small_real_difference_is_still_a_difference():
    d = disparity_metrics({"a": 0.3, "b": 0.3, "c": 0.3 + 1e-9})
    assert d.sd > 0 and d.max_z_group == "c" and d.range == pytest.approx(1e-9)
    assert d.dixon.q == 1.0 and d.dixon.outlier and d.dixon.suspect == "c"
    big = dixon_q({"a": 1e6, "b": 1e6, "c": 1e6 + 1e-3})
    assert big.outlier and big.suspect == "c"


def test_dixon_end_gaps_equal_up_to_rounding_are_a_tie():
    # gaps 0.30000000000000004 and 0.29999999999999993: a tie, which goes to the upper end
    r = dixon_q({"a": 0.0, "b": 0.1 + 0.2, "c": 0.6})
    assert r.suspect == "c" and r.q == pytest.approx(0.5)


# ------------------------------------------------------------------------------------------
# Bootstrap
# ------------------------------------------------------------------------------------------


def _two_groups(shift: float, n: int = 100, seed: int = 1) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.normal(0, 1, n), rng.normal(shift, 1, n)])
    return values, ["A"] * n + ["B"] * n


def test_bootstrap_is_deterministic_for_a_seed():
    values, groups = _two_groups(0.3)
    a = bootstrap_impact_ratio(values, groups, seed=3)
    b = bootstrap_impact_ratio(values, groups, seed=3)
    c = bootstrap_impact_ratio(values, groups, seed=4)
    assert a == b
    assert a != c
    assert isinstance(a, BootstrapInterval)
    assert a.resamples == 2000 and a.seed == 3 and a.confidence == 0.95 and a.undefined == 0
    json.dumps(a.to_dict(), allow_nan=False)


def test_bootstrap_interval_contains_the_estimate():
    values, groups = _two_groups(0.2, n=300)
    point = impact_ratio(values, groups).min_impact_ratio
    for standard in Standard.values():
        ci = bootstrap_impact_ratio(values, groups, SelectionRule(standard, quantile=0.5))
        assert 0.0 <= ci.low <= point <= ci.high <= 1.0
        assert ci.low < ci.high
    narrow = bootstrap_impact_ratio(values, groups, confidence=0.5)
    wide = bootstrap_impact_ratio(values, groups, confidence=0.99)
    assert wide.low <= narrow.low <= narrow.high <= wide.high


def test_bootstrap_of_a_sharply_biased_case_stays_below_four_fifths():
    values, groups = _two_groups(1.5)
    ci = bootstrap_impact_ratio(values, groups)
    assert ci.high < 0.8
    assert impact_ratio(values, groups).four_fifths_bias


def test_bootstrap_of_identical_values_is_exactly_one():
    values, groups = _pairs({"A": [0.7] * 5, "B": [0.7] * 4, "C": [0.7] * 3})
    for method in ("larger", "smaller"):
        ci = bootstrap_impact_ratio(values, groups, SelectionRule(method=method), resamples=500)
        assert (ci.low, ci.high, ci.undefined) == (1.0, 1.0, 0)


def test_bootstrap_counts_undefined_replicates():
    # Each group is {0, 1}; a replicate's pooled mean is 0, 0.25, 0.5, 0.75 or 1. Within 0.1 of
    # it lie scores only when all four drawn scores are 0 or all are 1: probability 2/16. Those
    # replicates select the same in both groups (IR 1); the other 7/8 select nothing, so each
    # group's rate runs from 0 to 1 and the interval is all of [0, 1].
    values, groups = _pairs({"A": [0.0, 1.0], "B": [0.0, 1.0]})
    ci = bootstrap_impact_ratio(values, groups, SelectionRule(method="within-range", within=0.1), resamples=4000)
    assert ci.undefined / ci.resamples == pytest.approx(7 / 8, abs=0.03)
    assert (ci.low, ci.high) == (0.0, 1.0)
    # the observed data select nothing at all: the point estimate is undefined
    with pytest.raises(StatisticsError, match="undefined"):
        impact_ratio(values, groups, SelectionRule(method="within-range", within=0.1))


def test_bootstrap_where_every_replicate_is_undefined():
    with pytest.raises(StatisticsError, match="in all 300 bootstrap replicates"):
        bootstrap_impact_ratio([0.0, 1.0], ["A", "B"], SelectionRule(method="within-range", within=0.1), resamples=300)


def test_bootstrap_agrees_with_a_naive_loop():
    """Oracle: resample group by group in a Python loop and call impact_ratio on each replicate."""
    rng = np.random.default_rng(8)
    data = {"A": rng.normal(0, 1, 40), "B": rng.normal(0.4, 1, 30), "C": rng.normal(0.2, 1, 25)}
    values, groups = _pairs({k: list(v) for k, v in data.items()})
    ci = bootstrap_impact_ratio(values, groups, SelectionRule("median"), resamples=2000, seed=1)
    loop_rng = np.random.default_rng(99)
    ratios = []
    for _ in range(600):
        sample = {k: list(loop_rng.choice(v, size=v.size, replace=True)) for k, v in data.items()}
        vs, gs = _pairs(sample)
        ratios.append(selection_rates(vs, gs, SelectionRule("median")))
    per_group = np.array([[r[g] for g in sorted(data)] for r in ratios])
    adjusted = 0.05 / len(data)  # Bonferroni: all three group intervals hold together
    lower = np.quantile(per_group, adjusted / 2, axis=0)
    upper = np.quantile(per_group, 1 - adjusted / 2, axis=0)
    assert ci.low == pytest.approx(lower.min() / upper.max(), abs=0.06)
    assert ci.high == pytest.approx(min(1.0, upper.min() / lower.max()), abs=0.06)


def _normal_groups(rng, shifts, n):
    values = np.concatenate([rng.normal(shift, 1, n) for shift in shifts])
    return values, [f"g{i:02d}" for i in range(len(shifts)) for _ in range(n)]


def test_a_model_without_disparity_is_not_failed_by_the_interval():
    """Four equal groups of 100: the point estimate falls below 0.8 in many runs (noise alone), the
    plain percentile interval of the replicates' min IR would too; the simultaneous interval
    reaches 0.8 in every run (its coverage is at least the nominal 95%)."""
    rng = np.random.default_rng(3)
    estimates_below, intervals_below = 0, 0
    for seed in range(40):
        values, groups = _normal_groups(rng, [0, 0, 0, 0], 100)
        estimates_below += impact_ratio(values, groups).min_impact_ratio < 0.8
        intervals_below += bootstrap_impact_ratio(values, groups, resamples=500, seed=seed).high < 0.8
    assert estimates_below >= 8
    assert intervals_below <= 2


def test_a_large_disparity_is_caught_by_the_interval():
    rng = np.random.default_rng(4)
    values, groups = _normal_groups(rng, [0, 0, 0, -1.0], 150)
    ci = bootstrap_impact_ratio(values, groups, resamples=1000)
    assert ci.high < 0.8
    assert ci.low <= impact_ratio(values, groups).min_impact_ratio <= ci.high


# ------------------------------------------------------------------------------------------
# The permutation null
# ------------------------------------------------------------------------------------------


def test_permutation_null_agrees_with_a_naive_loop():
    rng = np.random.default_rng(5)
    values, groups = _normal_groups(rng, [0, 0, -0.3], 30)
    null = permutation_null(values, groups, permutations=3000, seed=2)
    observed = impact_ratio(values, groups).min_impact_ratio
    loop_rng = np.random.default_rng(7)
    irs = []
    for _ in range(1500):
        shuffled = list(loop_rng.permutation(groups))
        irs.append(impact_ratio(values, shuffled).min_impact_ratio)
    irs = np.array(irs)
    assert null.observed == observed
    assert null.p_value == pytest.approx(np.mean(irs <= observed + 1e-12), abs=0.04)
    assert null.false_fail_rate == pytest.approx(np.mean(irs < 0.8), abs=0.04)
    assert null.to_dict()["permutations"] == 3000


def test_permutation_null_separates_noise_from_disparity():
    rng = np.random.default_rng(6)
    fair_values, fair_groups = _normal_groups(rng, [0] * 10, 12)
    fair = permutation_null(fair_values, fair_groups, permutations=1000)
    assert fair.false_fail_rate > 0.9  # ten groups of twelve: the rule fails a fair model by chance
    assert fair.p_value > 0.05
    biased_values, biased_groups = _normal_groups(rng, [0, 0, 0, -1.5], 40)
    biased = permutation_null(biased_values, biased_groups, permutations=1000)
    assert biased.p_value < 0.01


def test_permutation_null_is_deterministic_and_checks_its_input():
    values, groups = [0.1, 0.5, 0.9, 0.2, 0.6, 1.0], ["a", "a", "a", "b", "b", "b"]
    assert permutation_null(values, groups, seed=3) == permutation_null(values, groups, seed=3)
    with pytest.raises(StatisticsError, match="resamples must be a positive integer"):
        permutation_null(values, groups, permutations=0)
    with pytest.raises(StatisticsError, match="undefined"):
        permutation_null([0.0, 1.0], ["a", "b"], SelectionRule(method="within-range", within=0.1))


# ------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------

LABELS = ["a", "b", "c", "d"]
SETTINGS = settings(max_examples=80, deadline=None)

score = st.one_of(st.floats(-1, 1), st.sampled_from([0.0, 0.1, 0.7, 1 / 3, -0.2, 1.0]))
pairs = st.lists(st.tuples(score, st.sampled_from(LABELS)), min_size=2, max_size=30).filter(
    lambda ps: len({g for _, g in ps}) >= 2
)
config = st.one_of(
    st.tuples(st.sampled_from(Standard.values()), st.sampled_from(["larger", "smaller"]), st.none()),
    st.tuples(st.sampled_from(Standard.values()), st.just("within-range"), st.floats(0.01, 1.0)),
)


def _ir(values, groups, cfg, quantile=0.3):
    standard, method, within = cfg
    try:
        return impact_ratio(values, groups, SelectionRule(standard, method, quantile=quantile, within=within))
    except StatisticsError as exc:
        assert method == "within-range" and "undefined" in str(exc)
        return None


@SETTINGS
@given(ps=pairs, cfg=config)
def test_min_impact_ratio_lies_in_the_unit_interval(ps, cfg):
    values, groups = [v for v, _ in ps], [g for _, g in ps]
    r = _ir(values, groups, cfg)
    if r is not None:
        assert 0.0 <= r.min_impact_ratio <= 1.0
        assert max(r.impact_ratios.values()) == 1.0
        assert r.min_impact_ratio == min(r.impact_ratios.values())
        assert r.selection_rates[r.worst_pair[0]] == min(r.selection_rates.values())
        assert r.selection_rates[r.worst_pair[1]] == max(r.selection_rates.values())


@SETTINGS
@given(ps=pairs, cfg=config, order=st.randoms(use_true_random=False))
def test_invariant_to_the_order_of_the_pairs(ps, cfg, order):
    shuffled = list(ps)
    order.shuffle(shuffled)
    r1 = _ir([v for v, _ in ps], [g for _, g in ps], cfg)
    r2 = _ir([v for v, _ in shuffled], [g for _, g in shuffled], cfg)
    assert (r1 is None) == (r2 is None)
    if r1 is not None and r2 is not None:
        assert r2.selection_rates == r1.selection_rates
        assert r2.min_impact_ratio == r1.min_impact_ratio
        assert r2.worst_pair == r1.worst_pair


@SETTINGS
@given(ps=pairs, cfg=config)
def test_invariant_to_renaming_groups(ps, cfg):
    rename = {"a": "zeta", "b": "Ypsilon", "c": "x-ray", "d": "Whiskey"}
    values = [v for v, _ in ps]
    r1 = _ir(values, [g for _, g in ps], cfg)
    r2 = _ir(values, [rename[g] for _, g in ps], cfg)
    assert (r1 is None) == (r2 is None)
    if r1 is not None and r2 is not None:
        assert r2.min_impact_ratio == r1.min_impact_ratio
        assert r2.selection_rates == {rename[k]: v for k, v in r1.selection_rates.items()}


@SETTINGS
@given(
    base=st.one_of(
        st.lists(score, min_size=1, max_size=12),
        # one value repeated: the pooled mean of N copies of 0.7 (say) can round off 0.7
        st.builds(lambda v, m: [v] * m, st.sampled_from([0.1, 0.2, 0.3, 0.7, 1 / 3, -0.7]), st.integers(1, 12)),
    ),
    copies=st.integers(0, 3),
    k=st.integers(2, 4),
    cfg=config,
    order=st.randoms(use_true_random=False),
)
# six 0.7s average to 0.7000000000000001 (breaks a strict ">="); six 0.1s to 0.09999999999999999
@example(base=[0.7], copies=2, k=2, cfg=("mean", "larger", None), order=random.Random(0))
@example(base=[0.1], copies=2, k=2, cfg=("mean", "smaller", None), order=random.Random(0))
def test_exactly_one_when_every_group_holds_the_same_values(base, copies, k, cfg, order):
    base = base + [base[0]] * copies  # repeated identical values: where rounding of S bites
    values: list[float] = []
    groups: list[str] = []
    for label in LABELS[:k]:
        own = list(base)
        order.shuffle(own)
        values += own
        groups += [label] * len(own)
    r = _ir(values, groups, cfg)
    standard, method, _ = cfg
    if method == "within-range":
        if r is not None:
            assert r.min_impact_ratio == 1.0
    else:
        assert r is not None  # larger/smaller always select something
        assert r.min_impact_ratio == 1.0
        assert len(set(r.selection_rates.values())) == 1


@SETTINGS
@given(
    base=st.lists(score, min_size=1, max_size=12),
    sizes=st.lists(st.integers(1, 4), min_size=3, max_size=4),
    order=st.randoms(use_true_random=False),
)
def test_groups_holding_the_same_values_have_no_outlier(base, sizes, order):
    values: list[float] = []
    groups: list[str] = []
    # as many groups as sizes drawn (3 or 4): the labels left over are unused
    for label, copies in zip(LABELS, sizes, strict=False):
        own = base * copies
        order.shuffle(own)
        values += own
        groups += [label] * len(own)
    m = impact_ratio(values, groups).means
    assert (m.sd, m.max_z, m.max_z_group) == (0.0, 0.0, None)
    assert m.dixon is not None and not m.dixon.outlier and m.dixon.suspect is None


def test_constants():
    assert Standard.values() == ("mean", "median", "quantile")
    assert SelectionMethod.values() == ("larger", "smaller", "within-range")


# ------------------------------------------------------------------------------------------
# The selection rule
# ------------------------------------------------------------------------------------------


def test_selection_rule_parses_strings_into_the_enums():
    rule = SelectionRule("quantile", "within-range", quantile=0.25, within=1)
    assert rule.standard is Standard.QUANTILE and rule.method is SelectionMethod.WITHIN_RANGE
    assert rule == SelectionRule(Standard.QUANTILE, SelectionMethod.WITHIN_RANGE, 0.25, 1.0)
    assert rule == SelectionRule.parse("quantile", "within-range", quantile=0.25, within=1.0)
    assert isinstance(rule.within, float) and hash(rule) == hash(SelectionRule("quantile", "within-range", 0.25, 1))
    assert rule.to_dict() == {"standard": "quantile", "method": "within-range", "quantile": 0.25, "within": 1.0}
    assert json.loads(json.dumps(rule.to_dict())) == rule.to_dict()
    assert SelectionRule() == SelectionRule("mean", "larger", 0.5, None)
    with pytest.raises(AttributeError):
        rule.standard = Standard.MEAN  # type: ignore[misc]


def test_results_name_the_rule_in_plain_strings():
    r = impact_ratio(FIG6_VALUES, FIG6_GROUPS, SelectionRule("median", "smaller"))
    assert (r.standard, r.method) == ("median", "smaller")
    assert type(r.standard) is str and type(r.method) is str


@pytest.mark.parametrize(
    "func", [impact_ratio, selection_rates, summarize_groups, bootstrap_impact_ratio, permutation_null]
)
def test_a_rule_must_be_a_selection_rule(func):
    with pytest.raises(TypeError, match="rule must be a SelectionRule, got 'median'"):
        func(FIG6_VALUES, FIG6_GROUPS, "median")


def test_a_bootstrap_read_at_another_confidence_is_the_one_drawn_afresh() -> None:
    """The replicates are kept for the suite's Holm rounds, which read them at several levels: what
    a kept draw gives at any confidence is what a fresh draw with the same seed gives."""
    from pytest_llmbias.stats import resampling

    rng = np.random.default_rng(5)
    values = list(rng.normal(0.5, 0.2, 120))
    groups = [g for g in ("a", "b", "c") for _ in range(40)]
    kept = [resampling.bootstrap_impact_ratio(values, groups, confidence=c, resamples=400) for c in (0.95, 0.99)]
    resampling._KEPT.clear()
    fresh = resampling.bootstrap_impact_ratio(values, groups, confidence=0.99, resamples=400)
    assert kept[1] == fresh and kept[0].low >= fresh.low and kept[0] != fresh
    assert resampling.bootstrap_impact_ratio(values, groups, confidence=0.99, resamples=400, seed=1) != fresh


def test_a_kept_permutation_test_is_the_one_run_afresh() -> None:
    """The permutation tests are kept for the suite's Holm rounds too: a kept result is the fresh
    one, another seed or other values are run again, and bad input still fails."""
    from pytest_llmbias.stats import resampling

    rng = np.random.default_rng(6)
    values = list(rng.normal(0.5, 0.2, 90))
    groups = [g for g in ("a", "b", "c") for _ in range(30)]
    kept = (
        resampling.permutation_null(values, groups, permutations=300),
        resampling.group_effect_test(values, groups, permutations=300),
    )
    resampling._KEPT.clear()
    fresh = (
        resampling.permutation_null(values, groups, permutations=300),
        resampling.group_effect_test(values, groups, permutations=300),
    )
    assert kept == fresh
    assert resampling.group_effect_test(values, groups, permutations=300, seed=1) != fresh[1]
    assert resampling.group_effect_test([v + 1 for v in values[:-1]] + [9.0], groups, permutations=300) != fresh[1]
    with pytest.raises(StatisticsError):
        resampling.group_effect_test(values[:-1], groups, permutations=300)
