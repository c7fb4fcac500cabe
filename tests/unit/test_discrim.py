"""discrim-eval scored from sampled yes/no decisions: ``evaluate_discrim`` worked by hand, its
interval against ``scipy.stats.ttest_1samp``, its score against a logistic regression (statsmodels)
and against lm-evaluation-harness's mixed-effects model of the paper (``discrim_eval`` task's
``utils.py``, loaded by its path) on simulated decisions, unreadable decisions counted and left
out, and bad input named.

The items (``data/discrim_explicit.jsonl``, ``data/discrim_implicit.jsonl``) are in discrim-eval's
published format, written for these tests: three scenarios, ages 40, 60 and 80, every gender, three
of the five races, both fill types.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pytest_llmbias.errors import DomainError, StatisticsError
from pytest_llmbias.stats.discrim import (
    AGES,
    ATTRIBUTES,
    FIELDS,
    GENDERS,
    RACES,
    REFERENCE,
    check_record,
    evaluate_discrim,
    group_of,
    item_id,
    scenario_differences,
)

DATA = Path(__file__).parent / "data"
EXPLICIT = [json.loads(line) for line in (DATA / "discrim_explicit.jsonl").read_text().splitlines()]
IMPLICIT = [json.loads(line) for line in (DATA / "discrim_implicit.jsonl").read_text().splitlines()]
ITEMS = EXPLICIT + IMPLICIT


def person(q: int, age: float = 60.0, gender: str = "male", race: str = "white", fill: str = "explicit") -> dict:
    return {
        "filled_template": f"Should scenario {q} go ahead for this person?",
        "decision_question_id": q,
        "age": age,
        "gender": gender,
        "race": race,
        "fill_type": fill,
    }


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_ids_groups_and_the_reference():
    assert FIELDS == ("filled_template", "decision_question_id", "age", "gender", "race", "fill_type")
    assert ATTRIBUTES == ("age", "gender", "race") and dict(REFERENCE) == {"age": 60, "gender": "male", "race": "white"}
    assert item_id(EXPLICIT[0]) == "3/40/male/white/explicit"
    assert len({item_id(i) for i in ITEMS}) == len(ITEMS) == 162
    assert [group_of(person(1, age=a), "age") for a in (20.0, 50, 60, 70.0, 100)] == [
        "younger",
        "younger",
        "60",
        "older",
        "older",
    ]
    assert group_of(person(1, gender="non-binary"), "gender") == "non-binary"
    assert group_of(person(1, race="Native American"), "race") == "Native American"


def test_the_formulas_by_hand():
    """Gender only (every item is 60 and white). Scenario 1: the male answers yes 3 times of 4, so
    p̂ = 3.5/5 = 0.7; the female yes once of 3 readable (one unreadable), p̂ = 1.5/4 = 0.375;
    d = logit 0.375 − logit 0.7. Scenario 2: both yes twice of 2: d = 0. The score is their mean,
    the interval mean ± t(0.975, 1) · s/√2."""
    items = [person(1), person(1, gender="female"), person(2), person(2, gender="female")]
    decisions = {
        item_id(items[0]): [True, True, True, False],
        item_id(items[1]): [True, False, False, None],
        item_id(items[2]): [True, True],
        item_id(items[3]): [True, True],
    }
    scores = evaluate_discrim(items, decisions)
    assert (scores.n_items, scores.n_decisions, scores.unparsed) == (4, 12, 1)
    assert scores.yes_rate == pytest.approx(8 / 11)
    assert scores.by_fill_type == {}
    (female,) = scores.groups  # the reference groups (60, male, white) have no score of their own
    d1 = logit(0.375) - logit(0.7)
    assert (female.attribute, female.group, female.n_scenarios) == ("gender", "female", 2)
    assert female.score == pytest.approx(d1 / 2)
    half = stats.t.ppf(0.975, 1) * abs(d1) / math.sqrt(2) / math.sqrt(2)  # s of (d1, 0) is |d1|/√2
    assert (female.low, female.high) == pytest.approx((d1 / 2 - half, d1 / 2 + half))
    assert female.yes_rate == pytest.approx(3 / 5) and female.reference_rate == pytest.approx(5 / 6)
    assert female.rate_difference == pytest.approx((3 / 5 - 5 / 6) * 100)
    assert scenario_differences(items, decisions) == {
        "1": {"gender:female": pytest.approx(d1)},
        "2": {"gender:female": 0.0},
    }
    # one decision instead of a list is one sample
    single = evaluate_discrim(items, {k: v[0] for k, v in decisions.items()})
    assert single.n_decisions == 4 and single.groups[0].score == pytest.approx(0.0)


def test_each_reference_group_is_every_item_of_the_reference_value():
    """Yes exactly for the males: the males of a scenario (every age and race: 9 items) have
    p̂ = 9.5/10, the females 0.5/10. Every race and age group holds males and others alike, so
    those scores are 0 with a zero-width interval."""
    decisions = {item_id(i): i["gender"] == "male" for i in EXPLICIT}
    scores = evaluate_discrim(EXPLICIT, decisions)
    by = {(g.attribute, g.group): g for g in scores.groups}
    assert list(by) == [
        ("age", "younger"),
        ("age", "older"),
        ("gender", "female"),
        ("gender", "non-binary"),
        ("race", "Black"),
        ("race", "Asian"),
    ]  # only the groups the items hold
    for group in ("female", "non-binary"):
        g = by[("gender", group)]
        assert g.score == pytest.approx(logit(0.05) - logit(0.95)) and g.n_scenarios == 3
        assert (g.yes_rate, g.reference_rate, g.rate_difference) == (0.0, 1.0, -100.0)
    for key in [("age", "younger"), ("age", "older"), ("race", "Black"), ("race", "Asian")]:
        g = by[key]
        assert g.score == pytest.approx(0.0, abs=1e-12) and g.low == g.high == g.score
        assert g.rate_difference == pytest.approx(0.0)


@pytest.mark.parametrize("seed", range(8))
def test_the_interval_is_scipy_s_one_sample_t_interval(seed):
    rng = random.Random(seed)
    decisions = {item_id(i): [rng.choice([True, True, False, None]) for _ in range(rng.randint(1, 4))] for i in ITEMS}
    confidence = rng.choice([0.8, 0.9, 0.95, 0.99])
    scores = evaluate_discrim(ITEMS, decisions, confidence=confidence)
    differences = scenario_differences(ITEMS, decisions)
    for g in scores.groups:
        d = [per[f"{g.attribute}:{g.group}"] for per in differences.values() if f"{g.attribute}:{g.group}" in per]
        assert g.n_scenarios == len(d) and g.score == pytest.approx(np.mean(d), abs=1e-12)
        ci = stats.ttest_1samp(d, 0.0).confidence_interval(confidence_level=confidence)
        assert (g.low, g.high) == pytest.approx((ci.low, ci.high), abs=1e-10)
    # both fill types: each scored apart as well
    assert set(scores.by_fill_type) == {"explicit", "implicit"}
    alone = evaluate_discrim(IMPLICIT, {item_id(i): decisions[item_id(i)] for i in IMPLICIT}, confidence=confidence)
    assert scores.by_fill_type["implicit"] == alone.groups


def _simulated(seed: int, effects: dict, scenarios: int = 30, samples: int = 200):
    """Every person of discrim-eval's full grid in ``scenarios`` scenarios, each answering
    ``samples`` times with logit p(yes) = α_q + the effects of the person's groups."""
    rng = np.random.default_rng(seed)
    alpha = rng.normal(0.5, 1.0, scenarios)
    items, decisions, counts = [], {}, []
    for q in range(scenarios):
        for age in AGES:
            for gender in GENDERS:
                for race in RACES:
                    item = person(q, float(age), gender, race)
                    eta = alpha[q] + sum(effects.get((a, group_of(item, a)), 0.0) for a in ATTRIBUTES)
                    yes = int(rng.binomial(samples, 1 / (1 + math.exp(-eta))))
                    items.append(item)
                    decisions[item_id(item)] = [True] * yes + [False] * (samples - yes)
                    counts.append((q, item, yes))
    return items, decisions, counts


@pytest.mark.parametrize("seed", [0, 1])
def test_the_score_agrees_with_a_logistic_regression_with_scenario_effects(seed):
    """The paper estimates the score with a mixed-effects logistic model of p(yes) on the
    demographics with the reference person as baseline; here a logistic regression (statsmodels GLM,
    binomial) with a fixed effect per scenario and a dummy per non-reference group, fitted on the
    same simulated decisions (200 per person). The mean scenario-level logit difference of pooled
    rates is not the model's coefficient (the logit is not collapsible: pooling over the other
    attributes pulls it a little towards 0), but with effects of this size they agree within 0.04
    logit and 8 % of the coefficient, and both find the simulated effects."""
    sm = pytest.importorskip("statsmodels.api")
    effects = {
        ("gender", "female"): 0.4,
        ("gender", "non-binary"): -0.3,
        ("race", "Black"): 0.5,
        ("race", "Asian"): 0.2,
        ("race", "Hispanic"): 0.3,
        ("race", "Native American"): 0.35,
        ("age", "younger"): 0.25,
        ("age", "older"): -0.6,
    }
    items, decisions, counts = _simulated(seed, effects)
    columns = list(effects)
    exog = np.zeros((len(counts), 30 + len(columns)))
    endog = np.zeros((len(counts), 2))
    for row, (q, item, yes) in enumerate(counts):
        exog[row, q] = 1.0
        for j, (attribute, group) in enumerate(columns):
            exog[row, 30 + j] = group_of(item, attribute) == group
        endog[row] = (yes, 200 - yes)
    fit = sm.GLM(endog, exog, family=sm.families.Binomial()).fit()
    scores = evaluate_discrim(items, decisions)
    for j, (attribute, group) in enumerate(columns):
        coefficient = float(fit.params[30 + j])
        ours = scores.group(attribute, group)
        assert abs(ours.score - coefficient) < 0.04 and abs(ours.score - coefficient) < 0.08 * abs(coefficient)
        assert ours.low < effects[(attribute, group)] + 0.05 and ours.high > effects[(attribute, group)] - 0.05
        assert ours.n_scenarios == 30


@pytest.fixture(scope="module")
def harness():
    """lm-evaluation-harness's discrim-eval task module (numpy, pandas and statsmodels only)."""
    pytest.importorskip("pandas")
    pytest.importorskip("statsmodels.formula.api")
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("lm-evaluation-harness is not installed (the README's test command installs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / "tasks" / "discrim_eval" / "utils.py"
    if not path.is_file():
        pytest.skip("this lm-evaluation-harness has no discrim_eval task")
    module_spec = importlib.util.spec_from_file_location("lm_eval_discrim_eval_utils", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def test_the_score_agrees_with_the_harness_s_mixed_effects_model(harness):
    """The harness fits the paper's model: a linear mixed model of each prompt's logit p(yes) on
    race and gender (treatment contrasts against white and male) and centred age, with a random
    intercept and random slopes per scenario. Fed each simulated person's logit of its smoothed
    yes-rate (200 samples), its race and gender coefficients agree with the mean scenario-level logit
    differences within 0.04 logit. (Its age term is a slope, not this module's younger/older
    contrast: not compared.)"""
    effects = {
        ("gender", "female"): 0.4,
        ("gender", "non-binary"): -0.3,
        ("race", "Black"): 0.5,
        ("race", "Native American"): 0.35,
    }
    items, decisions, counts = _simulated(0, effects)
    results = []
    for _, item, yes in counts:
        p = (yes + 0.5) / 201
        # log-probabilities of "yes", "Yes", "no", "No": the capitalised forms all but impossible
        results.append(
            harness.process_results(
                item, [(math.log(p), False), (-50.0, False), (math.log(1 - p), False), (-50.0, False)]
            )
        )
    scores = evaluate_discrim(items, decisions)
    for metric, (attribute, group) in [("female_bias", ("gender", "female")), ("black_bias", ("race", "Black"))]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the random-slopes fit warns about its convergence
            coefficient = harness.agg_demographic_bias_regression([r[metric] for r in results])
        assert scores.group(attribute, group).score == pytest.approx(coefficient, abs=0.04), metric


def test_unreadable_decisions_are_counted_and_left_out():
    rng = random.Random(5)
    decisions = {item_id(i): [rng.random() < 0.6 for _ in range(3)] for i in ITEMS}
    padded = {k: [*v, None, None] if n % 3 else [*v, None] for n, (k, v) in enumerate(decisions.items())}
    plain, noisy = evaluate_discrim(ITEMS, decisions), evaluate_discrim(ITEMS, padded)
    assert plain.unparsed == 0 and noisy.unparsed == sum(v.count(None) for v in padded.values())
    assert noisy.n_decisions == plain.n_decisions + noisy.unparsed
    assert noisy.yes_rate == plain.yes_rate and noisy.groups == plain.groups
    # a group left with no readable decision: counted, no score, and said why
    silent = {k: (None if "/female/" in k else v) for k, v in decisions.items()}
    female = next(g for g in evaluate_discrim(ITEMS, silent).groups if g.group == "female")
    assert female.n_scenarios == 0 and math.isnan(female.score) and "no scenario has a readable decision" in female.note
    with pytest.raises(StatisticsError, match="no discrimination interval for gender:female: no scenario"):
        evaluate_discrim(ITEMS, silent).group("gender", "female")
    # one scenario: a score, no interval
    one = [i for i in EXPLICIT if i["decision_question_id"] == 8]
    scores = evaluate_discrim(one, {item_id(i): True for i in one})
    assert all(g.n_scenarios == 1 and math.isnan(g.low) and g.score == 0.0 for g in scores.groups)
    out = scores.to_dict()
    assert out["groups"][0]["low"] is None and "an interval needs 2 scenarios" in out["groups"][0]["note"]
    with pytest.raises(StatisticsError, match="an interval needs 2 scenarios"):
        scores.group("race", "Black")
    with pytest.raises(StatisticsError, match="no discrimination score for race:Hispanic: the items hold age:younger"):
        scores.group("race", "Hispanic")
    with pytest.raises(StatisticsError, match="none of the 162 decisions could be read"):
        evaluate_discrim(ITEMS, {item_id(i): None for i in ITEMS})


def test_to_dict_is_plain_json():
    scores = evaluate_discrim(ITEMS, {item_id(i): i["race"] != "Black" for i in ITEMS})
    out = json.loads(json.dumps(scores.to_dict()))
    assert out["n_items"] == 162 and set(out["by_fill_type"]) == {"explicit", "implicit"}
    black = next(g for g in out["groups"] if g["group"] == "Black")
    assert black["rate_difference"] == -100.0 and black["score"] == pytest.approx(logit(0.5 / 19) - logit(18.5 / 19))


def test_bad_input_is_named():
    good = EXPLICIT[:2]
    decisions = {item_id(i): True for i in good}
    with pytest.raises(DomainError, match="needs race, fill_type"):
        evaluate_discrim([{k: v for k, v in good[0].items() if k not in ("race", "fill_type")}], decisions)
    for field, value, message in [
        ("age", 65, "age must be one of 20, 30"),
        ("age", "60", "age must be one of"),
        ("gender", "Male", "gender must be one of male, female, non-binary"),
        ("race", "black", "race must be one of white, Black"),
        ("fill_type", "both", "fill_type must be one of explicit, implicit"),
        ("decision_question_id", True, "decision_question_id must be an integer"),
        ("filled_template", "  ", "filled_template must be the prompt's text"),
    ]:
        with pytest.raises(DomainError, match=message):
            check_record(dict(good[0], **{field: value}), "here")
    check_record(dict(good[0], age=60), "an integer age is fine")
    with pytest.raises(DomainError, match=r"no decision for discrim-eval item\(s\) '3/40/male/Black/explicit'"):
        evaluate_discrim(good, {item_id(good[0]): True})
    with pytest.raises(DomainError, match=r"items #0 and #1 are the same item '3/40/male/white/explicit'"):
        evaluate_discrim([good[0], dict(good[0])], decisions)
    for bad in (1, "yes", [True, "no"], []):
        with pytest.raises(DomainError, match="decision"):
            evaluate_discrim(good, dict(decisions, **{item_id(good[0]): bad}))
    with pytest.raises(StatisticsError, match="confidence must lie strictly between 0 and 1"):
        evaluate_discrim(good, decisions, confidence=1.0)
    # groups of an attribute with no item of its reference value: nothing to compare them with
    women = [i for i in EXPLICIT if i["gender"] == "female"]
    with pytest.raises(
        StatisticsError,
        match="no discrimination score for gender: the items hold female but no item of the reference value 'male'",
    ):
        evaluate_discrim(women, {item_id(i): True for i in women})
    with pytest.raises(StatisticsError, match="gender: the implicit items hold female"):
        mixed = EXPLICIT + [i for i in IMPLICIT if i["gender"] == "female"]
        evaluate_discrim(mixed, {item_id(i): True for i in mixed})
