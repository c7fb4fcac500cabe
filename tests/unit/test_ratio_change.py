"""The impact ratio against a recorded release: the paired statistics and the gate's verdict."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pytest_llmbias import evaluate_impact_ratio
from pytest_llmbias.engine.result import fmt_rate
from pytest_llmbias.errors import ConfigError, StatisticsError
from pytest_llmbias.stats.ratio_change import ratio_change
from pytest_llmbias.stats.selection import impact_ratio


def _draw(seed: int, groups: int = 4, n: int = 40, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    labels = [f"g{g}" for g in range(groups) for _ in range(n)]
    release = rng.normal(0.0, 1.0, groups * n)
    target = rng.normal(0.0, 1.0, groups * n) - np.array([shift if g == f"g{groups - 1}" else 0.0 for g in labels])
    return target, release, labels


def test_each_models_ratio_is_its_own_impact_ratio() -> None:
    target, release, labels = _draw(1, shift=0.8)
    change = ratio_change(target, release, labels, resamples=300)
    assert change.target == pytest.approx(impact_ratio(list(target), labels).min_impact_ratio)
    assert change.release == pytest.approx(impact_ratio(list(release), labels).min_impact_ratio)
    assert change.difference == pytest.approx(change.target - change.release)
    assert change.low <= change.difference <= change.high
    assert change.group == "g3"


def _interaction(d: np.ndarray, labels: list[str], worse: bool) -> float:
    groups = sorted(set(labels))
    z = [
        np.sqrt(labels.count(g)) * (np.mean([x for x, lab in zip(d, labels, strict=True) if lab == g]) - np.mean(d))
        for g in groups
    ]
    return float(min(z)) if worse else float(max(abs(v) for v in z))


@pytest.mark.parametrize("alternative", ["no-worse", "equivalent"])
@pytest.mark.parametrize("shift", [0.0, 0.5])
def test_the_permutation_p_value_agrees_with_scipy(alternative: str, shift: float) -> None:
    target, release, labels = _draw(2, n=20, shift=shift)
    change = ratio_change(target, release, labels, alternative=alternative, resamples=4000, seed=3)
    worse = alternative == "no-worse"
    oracle = stats.permutation_test(
        (target, release),
        lambda a, b: _interaction(a - b, labels, worse),
        permutation_type="samples",
        n_resamples=4000,
        alternative="less" if worse else "greater",
        random_state=4,
    )
    assert change.p_value == pytest.approx(oracle.pvalue, abs=0.03)


def test_a_target_answering_as_the_release_did_is_not_moved() -> None:
    _, release, labels = _draw(5)
    change = ratio_change(release, release, labels, resamples=200)
    assert change.difference == 0.0 and change.p_value == 1.0


def test_bad_input_is_named() -> None:
    target, release, labels = _draw(6)
    with pytest.raises(StatisticsError, match="one group each"):
        ratio_change(target[:-1], release, labels)
    with pytest.raises(StatisticsError, match="at least two groups"):
        ratio_change(target, release, ["g"] * len(labels))
    with pytest.raises(StatisticsError, match="alternative"):
        ratio_change(target, release, labels, alternative="better")
    with pytest.raises(StatisticsError, match="finite"):
        ratio_change(np.where(np.arange(target.size) == 0, np.nan, target), release, labels)


def _values(x: np.ndarray, labels: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    prompts = {f"p{i}": lab for i, lab in enumerate(labels)}
    return {p: float(v) for p, v in zip(prompts, x, strict=True)}, prompts


def test_the_gate_fails_a_target_worse_than_the_release_and_passes_a_redraw() -> None:
    target, release, labels = _draw(7, n=50, shift=1.0)
    t, groups = _values(target, labels)
    r, _ = _values(release, labels)
    worse = evaluate_impact_ratio(
        {"target": t, "release": r}, groups, target="target", release="release", resamples=500
    )
    assert not worse.passed and worse.comparison is not None and worse.comparison.regressed
    assert "against release: min impact ratio" in worse.report()
    assert worse.moved() and all(m["comparator_alias"] == "release" for m in worse.moved())
    assert [row["method"] for row in worse.rows()] == ["IR(sentiment)", "min IR vs release"]
    # both rows state their false-alarm rate: alpha split between the rule's test and the comparison
    assert [row["reliability"].split("; ")[-1] for row in worse.rows()] == [
        "power " + fmt_rate(worse.power),
        "false alarm <=2.5%",
    ]
    same, _, _ = _draw(8, n=50)
    s, _ = _values(same, labels)
    redrawn = evaluate_impact_ratio(
        {"target": s, "release": r}, groups, target="target", release="release", resamples=500
    )
    assert redrawn.passed and not redrawn.comparison.regressed  # type: ignore[union-attr]
    assert redrawn.alpha == 0.025  # alpha split between the four-fifths test and the comparison
    assert redrawn.to_dict()["release"]["against"] == "release"


def test_margin_and_alternative_are_checked() -> None:
    target, release, labels = _draw(9, n=30, shift=1.0)
    t, groups = _values(target, labels)
    r, _ = _values(release, labels)
    wide = evaluate_impact_ratio(
        {"target": t, "release": r},
        groups,
        target="target",
        release="release",
        resamples=300,
        margin=0.99,
        fail_on="estimate",
        threshold=0.01,
    )
    assert wide.passed  # no drop exceeds a margin of 0.99
    with pytest.raises(ConfigError, match="alternative"):
        evaluate_impact_ratio({"target": t}, groups, target="target", alternative="better")
    with pytest.raises(StatisticsError, match="calibrate='baselines' against a release"):
        evaluate_impact_ratio(
            {"target": t, "release": r}, groups, target="target", release="release", calibrate="baselines"
        )
