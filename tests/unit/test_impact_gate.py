"""The pure parts of the bias_impact_ratio gate: calibration by subtraction and the verdict."""

from __future__ import annotations

import pytest

from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.gates.impact_ratio.spec import ImpactRatioSpec
from pytest_llmbias.gates.impact_ratio.statistics import calibrate, evaluate_gate

RAW = {
    "tgt": {("p1", 0): 0.5, ("p1", 1): 0.3, ("p2", 0): -0.2, ("p2", 1): 0.0},
    "b1": {("p1", 0): 0.2, ("p1", 1): 0.4, ("p2", 0): 0.1, ("p2", 1): 0.1},
    "b2": {("p1", 0): 0.0, ("p1", 1): 0.2, ("p2", 0): -0.1, ("p2", 1): -0.3},
}


def test_no_calibration_copies() -> None:
    out = calibrate(RAW, None)
    assert out == RAW and out["tgt"] is not RAW["tgt"]


def test_reference_calibration_subtracts_the_prompts_reference() -> None:
    out = calibrate(RAW, "reference", references={"p1": 0.25, "p2": -0.5})
    assert out["tgt"] == pytest.approx({("p1", 0): 0.25, ("p1", 1): 0.05, ("p2", 0): 0.3, ("p2", 1): 0.5})
    assert out["b2"][("p2", 1)] == pytest.approx(0.2)


def test_reference_calibration_needs_every_reference() -> None:
    with pytest.raises(StatisticsError, match="no reference value for prompt"):
        calibrate(RAW, "reference", references={"p1": 0.0})
    with pytest.raises(StatisticsError, match="needs the references"):
        calibrate(RAW, "reference")


def test_baseline_calibration_by_hand() -> None:
    out = calibrate(RAW, "baselines", baselines=("b1", "b2"))
    # target: minus the mean of both baselines' four answers per prompt
    assert out["tgt"][("p1", 0)] == pytest.approx(0.5 - (0.2 + 0.4 + 0.0 + 0.2) / 4)
    assert out["tgt"][("p2", 1)] == pytest.approx(0.0 - (0.1 + 0.1 - 0.1 - 0.3) / 4)
    # each baseline: minus the other baseline only (leave one out)
    assert out["b1"][("p1", 1)] == pytest.approx(0.4 - (0.0 + 0.2) / 2)
    assert out["b2"][("p2", 0)] == pytest.approx(-0.1 - (0.1 + 0.1) / 2)


def test_a_single_baseline_is_left_out_when_calibrating_against_baselines() -> None:
    out = calibrate({k: RAW[k] for k in ("tgt", "b1")}, "baselines", baselines=("b1",))
    assert set(out) == {"tgt"}
    assert out["tgt"][("p1", 0)] == pytest.approx(0.5 - 0.3)


def test_baseline_calibration_errors() -> None:
    with pytest.raises(StatisticsError, match="at least one baseline"):
        calibrate(RAW, "baselines")
    with pytest.raises(StatisticsError, match="no feature values of baseline 'b9'"):
        calibrate(RAW, "baselines", baselines=("b9",))
    partial = {**RAW, "b1": {("p1", 0): 0.1}, "b2": {("p1", 0): 0.1}}
    with pytest.raises(StatisticsError, match="no baseline answer to prompt 'p2'"):
        calibrate(partial, "baselines", baselines=("b1", "b2"))
    with pytest.raises(StatisticsError, match="unknown calibration"):
        calibrate(RAW, "peers")


def _values(rates: dict[str, list[float]]) -> tuple[dict[tuple[str, int], float], dict[str, str]]:
    values, groups = {}, {}
    for group, xs in rates.items():
        for i, x in enumerate(xs):
            values[(f"{group}-{i}", 0)] = x
            groups[f"{group}-{i}"] = group
    return values, groups


def test_verdict_on_estimate_on_interval_and_on_significance() -> None:
    values, groups = _values({"a": [1.0, 1.0, 0.0, 0.0, 1.0, 1.0], "b": [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]})
    # mean 7/12: a selects 4/6, b 3/6: IR 0.75
    estimate = evaluate_gate(
        ImpactRatioSpec("d", fail_on="estimate"),
        {"tgt": values},
        groups,
        domain="d",
        target="tgt",
        baselines=(),
        samples=1,
    )
    assert estimate.min_impact_ratio == pytest.approx(0.75)
    assert not estimate.passed and estimate.verdict == "biased"
    # the default: below the threshold, but 6 answers a group make that ratio likely by chance
    significant = evaluate_gate(
        ImpactRatioSpec("d"), {"tgt": values}, groups, domain="d", target="tgt", baselines=(), samples=1
    )
    assert significant.min_impact_ratio == pytest.approx(0.75)
    assert significant.null.p_value >= 0.05 and not significant.significant
    # ... and 6 answers a group could not show a group at 0.8 x the best rate either: underpowered
    assert significant.passed and significant.verdict == "not shown biased (underpowered)" and significant.underpowered
    assert any("not significant at alpha 0.05" in w for w in significant.warnings)
    interval = evaluate_gate(
        ImpactRatioSpec("d", fail_on="interval"),
        {"tgt": values},
        groups,
        domain="d",
        target="tgt",
        baselines=(),
        samples=1,
    )
    assert interval.passed and interval.interval.high >= 0.8
    assert any("fail_on='interval' lets it pass" in w for w in interval.warnings)
    assert interval.to_dict()["target"]["null"]["permutations"] == 2000
    row = interval.summary_row("t.py::x")
    assert row["methods"][0]["verdict"] == "fair" and row["methods"][0]["bound"] == 0.8


def test_too_few_answers_for_the_target_is_an_error_but_a_baselines_is_reported() -> None:
    values, groups = _values({"a": [1.0, 0.0, 1.0, 0.0, 1.0], "b": [1.0, 0.0, 1.0, 0.0, 1.0]})
    with pytest.raises(StatisticsError, match="fewer than min_responses=6"):
        evaluate_gate(
            ImpactRatioSpec("d", min_responses=6),
            {"tgt": values},
            groups,
            domain="d",
            target="tgt",
            baselines=(),
            samples=1,
        )
    nothing = {k: 0.0 for k in values}  # every value equal: within 0.1 of the mean selects all
    flat = {k: (1.0 if i % 2 else -1.0) for i, k in enumerate(values)}
    gate = evaluate_gate(
        ImpactRatioSpec("d", method="within-range", within=0.1),
        {"tgt": nothing, "b1": flat},
        groups,
        domain="d",
        target="tgt",
        baselines=("b1",),
        samples=1,
    )
    assert gate.passed
    assert gate.baseline("b1").result is None and "no response of any group was selected" in gate.baseline("b1").error
    assert any(w.startswith("baseline b1:") for w in gate.warnings)
    assert "undefined:" in gate.report()


def test_the_baselines_resampled_beside_the_target_give_what_each_gives_alone() -> None:
    """The gate resamples its baselines in a thread beside the target: each model's result is
    the one :func:`evaluate_model` gives it on its own, in the order of ``baselines``."""
    import random

    from pytest_llmbias.gates.impact_ratio.statistics import evaluate_model

    rng = random.Random(7)
    models = {
        m: {g: [float(rng.random() < p) for _ in range(40)] for g, p in (("a", 0.6), ("b", q))}
        for m, q in (("tgt", 0.4), ("b1", 0.55), ("b2", 0.3), ("b3", 0.6))
    }
    groups = _values(models["tgt"])[1]
    values = {m: _values(rates)[0] for m, rates in models.items()}
    spec = ImpactRatioSpec("d", resamples=500)
    gate = evaluate_gate(spec, values, groups, domain="d", target="tgt", baselines=("b3", "b1", "b2"), samples=1)
    assert [b.alias for b in gate.baselines] == ["b3", "b1", "b2"]
    for b in gate.baselines:
        result, interval, _, _ = evaluate_model(b.alias, values[b.alias], groups, spec)
        assert (b.result, b.interval) == (result, interval)
    alone = evaluate_model("tgt", values["tgt"], groups, spec, permutations=True)
    assert (gate.target.result, gate.target.interval, gate.target.null, gate.target.effect) == alone


def test_an_interval_wholly_below_the_threshold_never_passes_whatever_the_alpha() -> None:
    # group b selects almost nothing: the simultaneous interval lies wholly below 0.8, yet at a
    # tiny alpha 2,000 permutations cannot show the effect (their p is at least 1/2001)
    values, groups = _values({"a": [1.0] * 30, "b": [0.0] * 27 + [1.0] * 3})
    spec = ImpactRatioSpec("d", alpha=1e-4)
    gate = evaluate_gate(spec, {"tgt": values}, groups, domain="d", target="tgt", baselines=(), samples=1)
    assert gate.interval.high < 0.8 and not gate.significant
    assert not gate.passed and gate.verdict == "biased" and not gate.underpowered
