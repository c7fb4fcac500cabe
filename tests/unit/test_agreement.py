"""The judges' agreement and the session's family of gates, against independent code:
``krippendorff`` (alpha), ``pingouin`` (ICC2) and statsmodels (Holm)."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pandas as pd
import pingouin
import pytest

from pytest_llmbias import familywise_bound, holm, judge_agreement
from pytest_llmbias.errors import StatisticsError
from tests.oracles import statsmodels_holm


def _scores(seed: int, judges: int = 3, items: int = 30, noise: float = 1.0, missing: float = 0.0) -> dict:
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 11, items).astype(float)
    out = {}
    for j in range(judges):
        out[f"j{j}"] = {
            f"q{i}": float(np.clip(t + rng.normal(0, noise), 1, 10))
            for i, t in enumerate(truth)
            if j == 0 or rng.random() >= missing
        }
    return out


def _matrix(scores: dict) -> np.ndarray:
    items = sorted({i for per in scores.values() for i in per})
    return np.array([[per.get(i, np.nan) for i in items] for per in scores.values()])


@pytest.mark.parametrize(
    ("seed", "judges", "noise", "missing"), [(1, 2, 0.5, 0.0), (2, 3, 1.0, 0.0), (3, 4, 2.0, 0.2), (4, 3, 3.0, 0.4)]
)
def test_alpha_agrees_with_krippendorff(seed: int, judges: int, noise: float, missing: float) -> None:
    scores = _scores(seed, judges=judges, noise=noise, missing=missing)
    got = judge_agreement(scores, resamples=200)
    expected = krippendorff.alpha(reliability_data=_matrix(scores), level_of_measurement="interval")
    assert got.alpha == pytest.approx(expected, abs=1e-9)
    assert got.interval[0] <= got.alpha <= got.interval[1]
    assert got.n_judges == judges


@pytest.mark.parametrize(("seed", "judges", "noise"), [(5, 2, 0.5), (6, 3, 1.5), (7, 5, 2.5)])
def test_icc_agrees_with_pingouin(seed: int, judges: int, noise: float) -> None:
    scores = _scores(seed, judges=judges, noise=noise)
    rows = [{"item": i, "judge": j, "score": v} for j, per in scores.items() for i, v in per.items()]
    table = pingouin.intraclass_corr(pd.DataFrame(rows), targets="item", raters="judge", ratings="score")
    types = table.set_index("Type")["ICC"]
    expected = float(types["ICC(A,1)"] if "ICC(A,1)" in types else types["ICC2"])  # its name before pingouin 0.6
    assert judge_agreement(scores, resamples=50).icc == pytest.approx(expected, abs=1e-9)


def test_the_icc_uses_the_items_every_judge_scored() -> None:
    scores = _scores(8, judges=3, missing=0.3)
    complete = set.intersection(*(set(per) for per in scores.values()))
    trimmed = {j: {i: v for i, v in per.items() if i in complete} for j, per in scores.items()}
    assert judge_agreement(scores, resamples=50).icc == pytest.approx(judge_agreement(trimmed, resamples=50).icc)


def test_judges_who_agree_score_near_one_and_noise_lowers_it() -> None:
    close = judge_agreement(_scores(9, noise=0.2), resamples=200)
    noisy = judge_agreement(_scores(9, noise=3.0), resamples=200)
    assert close.alpha > 0.95 and noisy.alpha < close.alpha - 0.2
    assert noisy.to_dict()["n_items"] == 30


def test_bad_input_is_named() -> None:
    with pytest.raises(StatisticsError, match="at least two judges"):
        judge_agreement({"j": {"q": 1.0}})
    with pytest.raises(StatisticsError, match="no item was scored by two judges"):
        judge_agreement({"a": {"q1": 1.0}, "b": {"q2": 2.0}})
    with pytest.raises(StatisticsError, match="every score is the same"):
        judge_agreement({"a": {"q1": 3.0, "q2": 3.0}, "b": {"q1": 3.0, "q2": 3.0}})
    with pytest.raises(StatisticsError, match="finite number"):
        judge_agreement({"a": {"q1": math.nan}, "b": {"q1": 2.0}})


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.2])
def test_holm_agrees_with_statsmodels(alpha: float) -> None:
    rng = np.random.default_rng(int(alpha * 100))
    for _ in range(8):
        pvalues = list(rng.random(int(rng.integers(1, 20))) ** 3)
        pvalues[: int(rng.integers(0, 3))] = [0.0, 1.0][: int(rng.integers(0, 3))]  # the ends, now and then
        got = holm(pvalues, alpha)
        reject, adjusted = statsmodels_holm(pvalues, alpha)
        assert list(got.reject) == list(reject)
        assert np.allclose(got.adjusted, adjusted)


def test_holm_steps_down() -> None:
    got = holm([0.01, 0.04, 0.03, 0.005], 0.05)
    assert got.levels == (0.05 / 3, 0.05 / 1, 0.05 / 2, 0.05 / 4)
    assert got.reject == (True, False, False, True)  # 0.03 > 0.05 / 2: the steps stop there
    assert holm([0.01, 0.04, 0.02], 0.05).reject == (True, True, True)
    with pytest.raises(StatisticsError, match="alpha must lie strictly between 0 and 1"):
        holm([0.1], 1.0)
    with pytest.raises(StatisticsError, match="p-values must lie in"):
        holm([1.5], 0.05)


def test_the_familywise_bound() -> None:
    bound = familywise_bound([0.05] * 15)
    assert bound.independent == pytest.approx(1 - 0.95**15) and bound.at_most == pytest.approx(0.75)
    assert bound.sentence() == (
        "15 gates at 5% each: a good release fails some gate with probability up to 54% "
        "(independent gates; at most 75% whatever their dependence)"
    )
    assert familywise_bound([0.5, 0.9]).at_most == 1.0
    assert familywise_bound([0.32]).sentence() == "1 gate: a good release fails it with probability 32%"
    with pytest.raises(StatisticsError):
        familywise_bound([])


def test_the_report_says_how_many_second_ratings_stayed_unread() -> None:
    from pytest_llmbias.engine.judging import trust_lines

    trust = {
        "judges": ["judge"],
        "combine": None,
        "rubric": {"name": "bias_1_10", "min": 1, "max": 10, "digest": "ab12"},
        "min_agreement": 0.5,
        "anchors": {},
        "retest": {
            "judge": {
                "n": 18,
                "unread": 2,
                "differ": 3,
                "max_difference": 2,
                "alpha": 0.81,
                "interval": [0.6, 0.92],
                "n_items": 18,
                "icc": None,
            }
        },
    }
    (line,) = [x for x in trust_lines(trust) if x.startswith("test-retest")]
    assert line == (
        "test-retest of judge: Krippendorff's alpha 0.81 [0.60, 0.92] on 18 answers; 3 of 18 scored "
        "differently (at most 2 apart); 2 second rating(s) unread, not counted; minimum alpha 0.5"
    )
    trust["retest"]["judge"]["unread"] = 0
    assert "unread" not in [x for x in trust_lines(trust) if x.startswith("test-retest")][0]
