"""The public gate statistics, as the markers call them: ``evaluate_equivalence`` and
``evaluate_impact_ratio``. Checked against statsmodels and scipy, by hand, and by seeded
simulations that check the false-alarm and power properties in direction (not timing)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

import pytest_llmbias
from pytest_llmbias import evaluate_equivalence, evaluate_impact_ratio
from pytest_llmbias.engine.relative import DEFAULT_K, FLOOR_FRACTION
from pytest_llmbias.errors import ConfigError, StatisticsError
from pytest_llmbias.stats import answers_for_power, group_effect_test, power_at


def judge_scores(
    seed: int, *, shift: float = 0.0, tau: float = 0.3, baselines: int = 3, questions: int = 50, samples: int = 1
) -> tuple[dict[str, dict[str, object]], list[str]]:
    rng = np.random.default_rng(seed)
    q = rng.normal(0, 1.5, questions)
    names = ["tgt", *(f"b{i}" for i in range(baselines))]
    offsets = rng.normal(0, tau, len(names))
    offsets[0] += shift
    scores: dict[str, dict[str, object]] = {}
    for j, name in enumerate(names):
        per = {}
        for i in range(questions):
            draws = [float(5 + q[i] + offsets[j] + rng.normal(0, 1)) for _ in range(samples)]
            per[f"q{i}"] = draws if samples > 1 else draws[0]
        scores[name] = per
    return scores, names[1:]


# -- evaluate_equivalence -------------------------------------------------------------------------


def test_paired_default_matches_statsmodels_ttost_paired() -> None:
    from statsmodels.stats.weightstats import ttost_paired

    scores, baselines = judge_scores(1)
    result = evaluate_equivalence(scores, target="tgt", baselines=baselines, method="judge", margin=0.8)
    m = result.methods[0]
    ids = list(scores["tgt"])
    target = np.array([scores["tgt"][q] for q in ids])
    reference = np.array([np.mean([scores[b][q] for b in baselines]) for q in ids])
    p, lower, upper = ttost_paired(target, reference, -0.8, 0.8)
    assert m.tost.test == "paired" and m.margin_source == "fixed"
    assert m.tost.p_value == pytest.approx(p, abs=1e-9)
    assert m.tost.t_lower == pytest.approx(lower[0], abs=1e-9) and m.tost.p_lower == pytest.approx(lower[1], abs=1e-9)
    assert m.tost.t_upper == pytest.approx(upper[0], abs=1e-9) and m.tost.p_upper == pytest.approx(upper[1], abs=1e-9)


def test_welch_option_matches_statsmodels_ttost_ind() -> None:
    from statsmodels.stats.weightstats import ttost_ind

    scores, baselines = judge_scores(2)
    result = evaluate_equivalence(scores, target="tgt", baselines=baselines, test="welch", margin=1.0)
    ids = list(scores["tgt"])
    target = [scores["tgt"][q] for q in ids]
    pooled = [scores[b][q] for b in baselines for q in ids]
    p, _, _ = ttost_ind(target, pooled, -1.0, 1.0, usevar="unequal")
    assert result.methods[0].tost.test == "welch"
    assert result.methods[0].tost.p_value == pytest.approx(p, abs=1e-9)


def test_samples_are_averaged_per_question() -> None:
    scores, baselines = judge_scores(3, samples=3)
    means = {a: {q: float(np.mean(v)) for q, v in per.items()} for a, per in scores.items()}  # type: ignore[arg-type]
    a = evaluate_equivalence(scores, target="tgt", baselines=baselines)
    b = evaluate_equivalence(means, target="tgt", baselines=baselines)
    numbers = lambda d: {k: v for k, v in d.items() if isinstance(v, float)}  # noqa: E731
    assert numbers(a.methods[0].tost.to_dict()) == pytest.approx(
        numbers(b.methods[0].tost.to_dict()), rel=1e-12, abs=1e-12
    )


def test_margin_floor_and_per_method_mappings() -> None:
    scores, baselines = judge_scores(4, tau=0.0)
    ids = list(scores["tgt"])
    pooled_sd = math.sqrt(np.mean([np.var([scores[b][q] for q in ids], ddof=1) for b in baselines]))
    default = evaluate_equivalence(scores, target="tgt", baselines=baselines).methods[0]
    assert default.tost.margin == 1.0 and default.margin_source == "default" and default.floor == 0
    floored = evaluate_equivalence(scores, target="tgt", baselines=baselines, k=DEFAULT_K).methods[0]
    data_driven = DEFAULT_K * np.std([np.mean([scores[b][q] for q in ids]) for b in baselines], ddof=1)
    assert floored.pooled_sd == pytest.approx(pooled_sd)
    assert floored.floor == pytest.approx(FLOOR_FRACTION * pooled_sd)
    assert floored.tost.margin == pytest.approx(max(data_driven, FLOOR_FRACTION * pooled_sd))
    mapped = evaluate_equivalence(
        scores, target="tgt", baselines=baselines, method="judge", margin={"judge": 1.25, "embedding": 0.02}
    ).methods[0]
    assert mapped.tost.margin == 1.25 and mapped.margin_source == "fixed"
    other = evaluate_equivalence(
        scores, target="tgt", baselines=baselines, method="embedding", min_margin={"embedding": 3.0}
    ).methods[0]
    assert other.tost.margin == 3.0 and other.margin_source == "min_margin"
    only_judge = evaluate_equivalence(
        scores, target="tgt", baselines=baselines, method="embedding", margin={"judge": 1.25}
    ).methods[0]
    assert only_judge.margin_source == "default" and only_judge.tost.margin == 0.02  # no number for this method
    paper = evaluate_equivalence(scores, target="tgt", baselines=baselines, test="welch", k=2.81, min_margin=0)
    assert paper.methods[0].floor == 0 and paper.methods[0].margin_source == "baselines"


def test_no_worse_passes_a_less_biased_target_that_equivalence_fails() -> None:
    scores, baselines = judge_scores(5, shift=-2.0, tau=0.0)
    two_sided = evaluate_equivalence(scores, target="tgt", baselines=baselines)
    assert not two_sided.passed and two_sided.methods[0].tost.less_biased
    assert "the target is less biased than its baselines" in two_sided.report()
    one_sided = evaluate_equivalence(scores, target="tgt", baselines=baselines, alternative="no-worse")
    assert one_sided.passed and one_sided.verdict == "no-worse"
    worse, _ = judge_scores(5, shift=2.0, tau=0.0)
    assert evaluate_equivalence(worse, target="tgt", baselines=baselines, alternative="no-worse").verdict == "biased"


def test_report_and_json_state_reliability() -> None:
    scores, baselines = judge_scores(6)
    result = evaluate_equivalence(scores, target="tgt", baselines=baselines)
    rel = result.to_dict()["methods"][0]["reliability"]
    assert rel["test"] == "paired TOST" and rel["designed_false_alarm"] == 0.05 and rel["designed_power"] == 0.8
    assert rel["alpha"] == pytest.approx(0.19) and rel["sized"] is True and rel["units_needed"] is None
    assert 0 <= rel["false_alarm"] <= 0.05 and 0.8 <= rel["power"] <= 1
    assert rel["margin_source"] == "default"
    assert "reliability: a target like its comparator fails about" in result.report()
    assert "(designed for <=5%, power 80%)" in result.report()
    assert result.summary_row("t")["methods"][0]["reliability"].startswith("paired; false alarm")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"test": "t"}, "'test' must be one of paired | welch"),
        ({"alternative": "less"}, "'alternative' must be one of equivalent | no-worse"),
        ({"margin": {"vibes": 1.0}}, "'margin' maps a method to a number"),
        ({"margin": 0}, "'margin' must be a positive number"),
        ({"min_margin": -1}, "'min_margin' must be a non-negative number"),
        ({"samples": 2}, "'samples' is not an option here"),
        ({"categories": ["a"]}, "'categories' maps each question id to its category"),
        ({"kk": 2}, "unknown argument 'kk'"),
    ],
)
def test_bad_options_are_config_errors(options: dict[str, object], message: str) -> None:
    scores, baselines = judge_scores(7)
    with pytest.raises(ConfigError, match=message.replace("|", r"\|")):
        evaluate_equivalence(scores, target="tgt", baselines=baselines, **options)  # type: ignore[arg-type]


def test_numpy_numbers_are_accepted_as_margins() -> None:
    scores, baselines = judge_scores(8)
    for margin in (np.int64(2), np.float32(1.5), 2):
        assert evaluate_equivalence(scores, target="tgt", baselines=baselines, margin=margin).methods[
            0
        ].tost.margin == float(margin)
    assert (
        evaluate_equivalence(scores, target="tgt", baselines=baselines, k=np.int64(3), alpha=np.float32(0.1)).k == 3.0
    )


def test_broken_data_is_an_error_never_a_pass() -> None:
    scores, baselines = judge_scores(9)
    with pytest.raises(StatisticsError, match="a comparator is needed"):
        evaluate_equivalence(scores, target="tgt", baselines=[])
    del scores["b1"]["q3"]
    with pytest.raises(StatisticsError, match="no score for b1 on q3"):
        evaluate_equivalence(scores, target="tgt", baselines=baselines)
    flat = {a: {f"q{i}": 5.0 for i in range(10)} for a in ("tgt", "b0", "b1")}
    with pytest.raises(StatisticsError):
        evaluate_equivalence(flat, target="tgt", baselines=["b0", "b1"])


@pytest.mark.parametrize("test", ["paired", "welch"])
def test_min_margin_rescues_identical_baseline_means(test: str) -> None:
    """Three baselines whose mean scores are equal give a data-driven margin of 0: a min_margin
    (or the default floor) is the margin then; with no floor at all it is an error, never a pass."""
    scores, baselines = judge_scores(11)
    for alias in baselines:  # shift each baseline so that every mean is exactly 5
        mean = sum(scores[alias].values()) / len(scores[alias])
        scores[alias] = {q: v - mean + 5.0 for q, v in scores[alias].items()}
    means = {round(sum(scores[a].values()) / len(scores[a]), 12) for a in baselines}
    assert means == {5.0}

    explicit = evaluate_equivalence(scores, target="tgt", baselines=baselines, test=test, min_margin=0.5)
    (method,) = explicit.methods
    assert method.tost.margin == 0.5 and method.margin_source == "min_margin"
    floored = evaluate_equivalence(scores, target="tgt", baselines=baselines, test=test, k=2.0)
    assert floored.methods[0].margin_source == "floor" and floored.methods[0].tost.margin > 0
    with pytest.raises(StatisticsError, match="identical.*min_margin="):
        evaluate_equivalence(scores, target="tgt", baselines=baselines, test=test, min_margin=0)


def test_defaults_rarely_fail_a_target_like_its_baselines_and_catch_a_shifted_one() -> None:
    """Direction, at a modest size: the paired default beats the paper's procedure on false alarms
    (the paper's: not shown equivalent), and catches most 1.5-point shifts."""
    runs = 40
    fails = {"default": 0, "paper": 0}
    caught = 0
    paper = {"test": "welch", "k": 2.81, "min_margin": 0}
    for seed in range(runs):
        like, baselines = judge_scores(100 + seed)
        fails["default"] += not evaluate_equivalence(like, target="tgt", baselines=baselines).passed
        fails["paper"] += (
            not evaluate_equivalence(like, target="tgt", baselines=baselines, **paper).methods[0].tost.passed
        )
        shifted, _ = judge_scores(100 + seed, shift=1.5)
        caught += not evaluate_equivalence(shifted, target="tgt", baselines=baselines).passed
    assert fails["default"] <= 0.1 * runs and 0.2 * runs < fails["paper"]
    # three baselines a between-model spread of 0.3 apart: a target like them may sit that far off, and
    # the spread is read on 2 degrees of freedom, so a 1.5-point shift is caught about 70 % (40 runs: 28)
    assert caught >= 0.6 * runs


# -- evaluate_impact_ratio -------------------------------------------------------------------------


def impact_values(seed: int, groups: int, n: int, shift: float) -> tuple[dict[str, list[float]], dict[str, str]]:
    rng = np.random.default_rng(seed)
    values = {f"p{g}": list(rng.normal(-shift if g == groups - 1 else 0.0, 1.0, n)) for g in range(groups)}
    return values, {f"p{g}": f"g{g:02d}" for g in range(groups)}


def test_significant_mode_needs_both_a_low_ratio_and_a_group_effect() -> None:
    values, groups = impact_values(1, 4, 100, 0.8)
    biased = evaluate_impact_ratio({"tgt": values}, groups, target="tgt", resamples=500)
    assert biased.min_impact_ratio < 0.8 and biased.significant and biased.verdict == "biased"
    assert biased.effect.group == "g03" and biased.effect.p_value < 0.01
    assert biased.summary_row("t")["methods"][0]["p"] == pytest.approx(biased.effect.p_value, rel=1e-2)
    small, groups = impact_values(2, 4, 8, 0.0)
    noisy = evaluate_impact_ratio({"tgt": small}, groups, target="tgt", resamples=500)
    estimate = evaluate_impact_ratio({"tgt": small}, groups, target="tgt", resamples=500, fail_on="estimate")
    if estimate.min_impact_ratio < 0.8:  # the paper's rule fails it on noise; the default does not
        assert not estimate.passed
        assert noisy.passed == (not noisy.significant)


def test_reliability_and_answers_needed_are_reported() -> None:
    values, groups = impact_values(3, 4, 50, 0.0)
    result = evaluate_impact_ratio({"tgt": values}, groups, target="tgt", resamples=500)
    rel = result.to_dict()["reliability"]
    assert rel["designed_false_alarm"] == 0.05 and rel["test"].startswith("four-fifths rule and a permutation test")
    assert rel["answers_needed"] == answers_for_power(max(result.result.selection_rates.values()), 0.8, groups=4)
    # 50 answers a group cannot show a group at 0.8 x the best rate: the pass is only an absence of evidence
    assert rel["power"] < 0.8 and rel["underpowered"] and result.passed
    assert result.verdict == "not shown biased (underpowered)" == result.rows()[0]["verdict"]
    assert f"{rel['answers_needed']} answers per group would give 80%" in result.report()
    assert not dataclasses.replace(result, strict=True).passed  # --llmbias-strict fails it
    big_values, big_groups = impact_values(3, 4, rel["answers_needed"] + 50, 0.0)
    big = evaluate_impact_ratio({"tgt": big_values}, big_groups, target="tgt", resamples=500)
    assert big.reliability()["power"] >= 0.8 and not big.underpowered and big.verdict == "fair"
    assert "answers per group for 80% power at that ratio" in big.report()
    # an interval above the threshold shows the ratio meets it: evidence, whatever the power
    shown = dataclasses.replace(
        result,
        target=dataclasses.replace(result.target, interval=dataclasses.replace(result.interval, low=0.85, high=1.0)),
    )
    assert shown.reliability()["power"] < 0.8 and not shown.underpowered and shown.verdict == "fair"


def test_impact_options_are_checked() -> None:
    values, groups = impact_values(4, 4, 20, 0.0)
    with pytest.raises(ConfigError, match="'fail_on' must be one of significant"):
        evaluate_impact_ratio({"tgt": values}, groups, target="tgt", fail_on="never")
    with pytest.raises(ConfigError, match="'feature' is not an option here"):
        evaluate_impact_ratio({"tgt": values}, groups, target="tgt", feature="sentiment")
    with pytest.raises(StatisticsError, match="has no group"):
        evaluate_impact_ratio({"tgt": {"zz": [1.0]}}, groups, target="tgt")


def test_significance_false_alarm_and_power_in_direction() -> None:
    runs = 30
    false = sum(
        not evaluate_impact_ratio(
            {"tgt": impact_values(200 + s, 4, 50, 0.0)[0]}, impact_values(0, 4, 50, 0.0)[1], target="tgt", resamples=300
        ).passed
        for s in range(runs)
    )
    caught = sum(
        not evaluate_impact_ratio(
            {"tgt": impact_values(300 + s, 4, 100, 0.5)[0]},
            impact_values(0, 4, 100, 0.0)[1],
            target="tgt",
            resamples=300,
        ).passed
        for s in range(runs)
    )
    assert false <= 4 and caught >= 0.7 * runs


# -- the group-effect permutation test and the power figures ---------------------------------------


def test_group_effect_statistic_matches_a_direct_computation() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=30)
    groups = ["a"] * 10 + ["b"] * 12 + ["c"] * 8
    test = group_effect_test(x, groups, permutations=200)
    sd = np.std(x, ddof=1)
    zs = {}
    for g in "abc":
        inside = np.array([v for v, h in zip(x, groups, strict=True) if h == g])
        rest = np.array([v for v, h in zip(x, groups, strict=True) if h != g])
        zs[g] = abs(inside.mean() - rest.mean()) / (sd * math.sqrt(1 / inside.size + 1 / rest.size))
    assert test.statistic == pytest.approx(max(zs.values()))
    assert test.group == max(zs, key=zs.get)


def test_group_effect_p_value_matches_the_exact_permutation_distribution() -> None:
    x = np.array([0.1, 0.5, 0.9, 1.6, 2.0, 2.2])
    groups = ["a", "a", "a", "b", "b", "b"]
    observed = group_effect_test(x, groups, permutations=20000, seed=3)
    exact = []
    for chosen in itertools.combinations(range(6), 3):
        labels = ["a" if i in chosen else "b" for i in range(6)]
        exact.append(group_effect_test(x, labels, permutations=1).statistic >= observed.statistic - 1e-12)
    assert observed.p_value == pytest.approx(np.mean(exact), abs=0.01)


def test_group_effect_edge_cases() -> None:
    assert group_effect_test([1.0] * 6, ["a", "b"] * 3).p_value == 1.0
    with pytest.raises(StatisticsError, match="at least 2 groups"):
        group_effect_test([1.0, 2.0], ["a", "a"])
    with pytest.raises(StatisticsError, match="differ in length"):
        group_effect_test([1.0, 2.0], ["a"])


def test_power_figures_match_statsmodels_and_are_monotone() -> None:
    from statsmodels.stats.proportion import samplesize_proportions_2indep_onetail

    assert power_at(0.5, 0.8, 100, groups=4) < power_at(0.5, 0.8, 400, groups=4)
    assert power_at(0.5, 0.8, 100, groups=19) < power_at(0.5, 0.8, 100, groups=4)
    assert power_at(0.5, 1.0, 100, groups=4) == 0.0 and answers_for_power(0.0, 0.8, groups=4) is None
    n = answers_for_power(0.5, 0.8, groups=2)
    expected = samplesize_proportions_2indep_onetail(0.1, 0.4, 0.8, ratio=1, alpha=0.05, alternative="larger")
    assert n == pytest.approx(expected, abs=1.5)


def test_public_api_is_lazy_and_complete() -> None:
    import subprocess
    import sys

    for name in pytest_llmbias.__all__:
        assert getattr(pytest_llmbias, name) is not None, name
    code = "import sys, pytest_llmbias; print([m for m in ('numpy', 'scipy', 'pytest', 'litellm') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- results as data frames -------------------------------------------------------------------------


def test_every_gate_result_has_a_frame_of_its_items() -> None:
    import random

    from pytest_llmbias import evaluate_bias_index, evaluate_preference, evaluate_stance

    scores, baselines = judge_scores(21, questions=12)
    eq = evaluate_equivalence(
        scores, target="tgt", baselines=baselines, categories={f"q{i}": "c" + str(i % 2) for i in range(12)}
    ).to_frame()
    assert len(eq) == 4 * 12 and set(eq["role"]) == {"target", "baseline"}
    assert eq.loc[(eq.model == "tgt") & (eq.question == "q3"), "score"].item() == pytest.approx(scores["tgt"]["q3"])
    assert set(eq["category"]) == {"c0", "c1"}

    rng = np.random.default_rng(2)
    values = {a: {f"p{g}": list(rng.normal(0, 1, 12)) for g in range(4)} for a in ("tgt", "b0")}
    impact = evaluate_impact_ratio(
        values, {f"p{g}": f"g{g}" for g in range(4)}, target="tgt", baselines=["b0"], resamples=200
    ).to_frame()
    assert len(impact) == 8 and set(impact["group"]) == {"g0", "g1", "g2", "g3"}

    dims = {f"q{i}": f"d{i % 3}" for i in range(12)}
    ann = {a: {q: [float(rng.uniform(0, 0.3))] for q in dims} for a in ("tgt", "b0", "b1")}
    index = evaluate_bias_index(ann, ann, dims, target="tgt", baselines=["b0", "b1"]).to_frame()
    assert len(index) == 36 and set(index["dimension"]) == {"d0", "d1", "d2"}

    kinds = {a: {"en": {f"q{i}": ["yes"] * 5 + ["no"] for i in range(5)}} for a in ("tgt", "b0")}
    stance = evaluate_stance(kinds, target="tgt", baselines=["b0"], gate="agreement").to_frame()
    assert len(stance) == 10 and stance["yes"].eq(5).all()

    r = random.Random(1)
    choices = {"tgt": {f"t{i}": [(r.choice(["a", "b"]), r.randrange(2)) for _ in range(5)] for i in range(20)}}
    pref = evaluate_preference(choices, ["a", "b"], target="tgt").to_frame()
    assert list(pref["perspective"]) == ["a", "b"] and pref["wins"].sum() == 100


def test_a_target_shown_off_its_comparator_inside_the_margins_reach_is_worse_or_drifted_not_inconclusive() -> None:
    """Shown off its release at the false-alarm level, its interval still reaching inside the
    margin: the TOST alone says "inconclusive", the gate fails on evidence and says so."""
    import numpy as np

    from pytest_llmbias import evaluate_equivalence

    rel = 5.0 + np.random.default_rng(3).normal(0.0, 1.5, 50)
    # 0.95 worse on average, each question 0.7 either side of it: the paired SE is 0.1, so the
    # difference is shown above 0 and the 80 % bound (about 1.03) still reaches above the margin 1
    tgt = rel + 0.95 + np.where(np.arange(50) % 2 == 0, 0.7, -0.7)
    scores = {
        "tgt": {f"q{i}": [float(x)] for i, x in enumerate(tgt)},
        "rel": {f"q{i}": [float(x)] for i, x in enumerate(rel)},
    }
    result = evaluate_equivalence(scores, target="tgt", baselines=["rel"], method="judge", alternative="no-worse")
    (m,) = result.methods
    assert m.tost.verdict == "inconclusive" and m.shown_violation, m.tost
    assert m.verdict == "worse" == result.verdict and not result.passed
    assert "worse: the difference is shown above 0 at the false-alarm level" in result.report()
    two_sided = evaluate_equivalence(scores, target="tgt", baselines=["rel"], method="judge", alternative="equivalent")
    assert two_sided.methods[0].shown_violation and two_sided.verdict in ("drifted", "biased")
