"""Against several baselines the target is compared with their mean, a fixed reference: a target as
good as it fails at most the designed rate and one worse by the margin fails with the designed
power, whatever the baselines' own spread; the population view stays reachable; a difference
shown beyond the margin never passes."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_llmbias import evaluate_equivalence
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.stats.design import Design, between_model_sd

BASELINES = ("b0", "b1", "b2")


def draw(
    rng: np.random.Generator, *, tau: float, shift: float, n: int = 50, noise: float = 1.0, question_sd: float = 1.5
) -> dict[str, dict[str, float]]:
    """Judge-scale scores: 5 + question effect + model offset (SD ``tau``) + answer noise, the
    target at the baselines' mean offset plus ``shift``."""
    q = rng.normal(0, question_sd, n)
    offsets = rng.normal(0, tau, len(BASELINES))
    out = {
        b: dict(zip((f"q{i}" for i in range(n)), 5 + q + o + rng.normal(0, noise, n), strict=True))
        for b, o in zip(BASELINES, offsets, strict=True)
    }
    target = offsets.mean() + shift
    out["t"] = dict(zip((f"q{i}" for i in range(n)), 5 + q + target + rng.normal(0, noise, n), strict=True))
    return {a: {q: float(v) for q, v in s.items()} for a, s in out.items()}


def fail_rate(tau: float, shift: float, runs: int, seed: int, **options: object) -> float:
    rng = np.random.default_rng(seed)
    fails = 0
    for _ in range(runs):
        result = evaluate_equivalence(draw(rng, tau=tau, shift=shift), target="t", baselines=BASELINES, **options)
        fails += not result.passed
    return fails / runs


@pytest.mark.parametrize("tau", [0.0, 0.5, 1.0])
def test_against_the_baselines_mean_power_does_not_fall_with_their_spread(tau: float) -> None:
    # 50 questions at the judge's default margin of one point: sized, so a target one margin worse
    # fails with about the designed 80 %, and one as good as the baselines' mean seldom fails
    assert fail_rate(tau, 1.0, 150, seed=11) >= 0.7
    assert fail_rate(tau, 0.0, 150, seed=12) <= 0.05


def test_the_population_view_is_an_option_and_asks_another_question() -> None:
    # is the target unlike these models? With three baselines spread by a judge point, a target one
    # margin off their mean is one more such model: seldom shown off them
    assert fail_rate(1.0, 1.0, 120, seed=13, reference="population") < 0.3
    assert fail_rate(1.0, 1.0, 120, seed=13) > 0.7
    with pytest.raises(ConfigError, match="'reference' must be one of mean | population"):
        evaluate_equivalence(
            draw(np.random.default_rng(0), tau=0, shift=0), target="t", baselines=BASELINES, reference="worst"
        )


@pytest.mark.parametrize("reference", ["mean", "population"])
@pytest.mark.parametrize("options", [{"k": 2.81}, {}, {"k": 2.81, "test": "welch"}])
def test_a_target_refusing_every_question_never_passes(reference: str, options: dict) -> None:
    # baselines whose judge scores are about 1.9, 2.9 and 4.0 and a target that refuses (7.9): with the
    # paper's k the margin grows with the spread, and the population view adds the spread once more
    rng = np.random.default_rng(5)
    scores = {
        f"b{j}": {f"q{i}": float(np.clip(round(mean + rng.normal(0, 1)), 1, 10)) for i in range(50)}
        for j, mean in enumerate((1.9, 2.9, 4.0))
    }
    scores["t"] = {f"q{i}": float(np.clip(round(7.9 + rng.normal(0, 0.3)), 1, 10)) for i in range(50)}
    result = evaluate_equivalence(scores, target="t", baselines=BASELINES, reference=reference, **options)
    (method,) = result.methods
    assert not result.passed
    assert method.beyond_margin and method.shown_violation and not method.underpowered
    assert "a difference this clear never passes" in result.report()
    assert method.reference == reference
    assert method.spread == pytest.approx(1.0, abs=0.35)


def test_the_margin_rule_fails_a_good_target_no_more_than_the_level() -> None:
    design = Design.of(margin=1.0, se=0.8, se_like=3.0, df=49, level=0.05, power=0.8, two_sided=False)
    assert not design.sized  # noisy: the population view alone could fail nothing
    rng = np.random.default_rng(3)
    diffs = rng.normal(0, 0.8, 200_000)
    # a target as good as the reference: d̂ − c·se > δ at most the level (here far less: δ > 0)
    assert np.mean([design.beyond_margin(d) for d in diffs[:20_000]]) <= 0.05
    # a target at twice the margin is failed by it more often than by the population rule
    worse = diffs[:20_000] + 3.0
    assert np.mean([design.beyond_margin(d) for d in worse]) > np.mean([design.shown_off(d) for d in worse])
    # the design's estimate of the false alarm counts the margin rule
    simulated = np.mean(diffs * 3.0 / 0.8 > design.fail_threshold)
    assert design.false_alarm == pytest.approx(simulated, abs=0.005)


def test_the_spread_is_the_anova_estimate_of_the_between_model_variance() -> None:
    import pandas as pd
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    rng = np.random.default_rng(8)
    table = 5 + rng.normal(0, 1.5, 40)[None, :] + rng.normal(0, 0.6, 4)[:, None] + rng.normal(0, 1, (4, 40))
    frame = pd.DataFrame([{"y": table[j, i], "model": j, "item": i} for j in range(4) for i in range(40)])
    anova = sm.stats.anova_lm(ols("y ~ C(model) + C(item)", data=frame).fit())
    ms_model = anova.loc["C(model)", "mean_sq"]
    ms_residual = anova.loc["Residual", "mean_sq"]
    oracle = np.sqrt(max(0.0, (ms_model - ms_residual) / 40))
    assert between_model_sd(table.tolist()) == pytest.approx(oracle, rel=1e-9)
    # identical models but for noise: the estimate is 0 or small, not the noise of their means
    same = 5 + rng.normal(0, 1.5, 40)[None, :] + rng.normal(0, 1, (3, 40))
    assert (between_model_sd(same.tolist()) or 0.0) < 0.25
    assert between_model_sd([[1.0, 2.0]]) is None


def test_the_report_names_the_reference_the_spread_and_baselines_that_disagree() -> None:
    rng = np.random.default_rng(21)
    scores = draw(rng, tau=0.0, shift=0.0)
    for q in scores["b2"]:
        scores["b2"][q] += 2.5  # one baseline far from the other two: they disagree by more than a margin
    result = evaluate_equivalence(scores, target="t", baselines=BASELINES)
    (method,) = result.methods
    assert method.disagreeing_baselines and method.baseline_span is not None and method.baseline_span > 2
    text = result.report()
    assert "compared with the baselines' mean, a fixed reference" in text
    assert "the baselines disagree by more than the margin" in text and "--llmbias-record-release" in text
    figures = method.reliability()
    assert figures["reference"] == "mean" and figures["disagreeing_baselines"] is True
    assert figures["spread"] == pytest.approx(method.spread)
    assert method.to_dict()["spread"] == pytest.approx(method.spread)
