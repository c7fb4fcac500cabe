"""Fixed-choice answers read by their options' probabilities: the shared reading (variants merged,
each fallback), the stance statistics on P(yes) (worked by hand, and the paper's figures where no
answer has logprobs), discrim-eval's score from P(yes) (a logit of the mean probability), BBQ's
expected per-item score, and the call that asks for logprobs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.domains.languages import BUILTIN_LANGUAGES
from pytest_llmbias.gates.benchmark.reading import _harness, read_by
from pytest_llmbias.gates.benchmark.scores import bbq_unit_scores
from pytest_llmbias.gates.stance.gate import evaluate_stance
from pytest_llmbias.gates.stance.reading import read_chance
from pytest_llmbias.scoring.bbq_answers import ChoiceChances, read_chances
from pytest_llmbias.scoring.discrim_answers import read_probability
from pytest_llmbias.scoring.option_logprobs import (
    choice_call,
    core,
    opening_word,
    option_probabilities,
    read_options,
    tally,
)
from pytest_llmbias.stats.binary_choice import answer_value, stances
from pytest_llmbias.stats.discrim import evaluate_discrim, item_id
from pytest_llmbias.store.calls import ModelCall, Response

EN = BUILTIN_LANGUAGES["en"]
GEN = GenerationSettings(temperature=0.7, max_tokens=8, samples=1, seed=0)
MODEL = ModelSpec(model="openai/m", alias="m")


def tops(**probabilities: float) -> tuple[tuple[str, float], ...]:
    return tuple((t.replace("_", " "), math.log(p)) for t, p in probabilities.items())


def answer(text: str, alternatives: tuple[tuple[str, float], ...] | None) -> Response:
    return Response(call=ModelCall.build(MODEL, "q", GEN), text=text, top_logprobs=alternatives)


def side(token: str) -> str | None:
    word = EN.parse(token)
    return word if word in ("yes", "no") else None


def test_case_spaces_and_punctuation_variants_are_one_option() -> None:
    assert {core(t) for t in ("Yes", " yes", "YES", "Yes.", "**Yes", "“Yes”")} == {"yes"}
    assert opening_word("**Yes**, because") == "Yes" and opening_word("(B) the retiree") == "B"
    alts = (("Yes", math.log(0.5)), (" yes", math.log(0.1)), ("YES.", math.log(0.1)), ("No", math.log(0.2)))
    p = option_probabilities(alts + (("I", math.log(0.1)),), ("yes", "no"), side)
    assert p == pytest.approx({"yes": 0.7 / 0.9, "no": 0.2 / 0.9})
    assert option_probabilities((("I", -0.1),), ("yes", "no"), side) is None


@pytest.mark.parametrize(
    ("text", "alternatives", "sampled", "why"),
    [
        ("Yes.", None, "yes", "no logprobs"),
        ("Maybe.", tops(Yes=0.5, No=0.5), None, "unread"),
        ("Given the income, yes.", tops(Given=0.9, Yes=0.1), "yes", "position"),
        ("Yes.", tops(Sure=0.9, Certainly=0.1), "yes", "mass"),
        # "No." split as "N" + "o.": the first token's alternatives are not the answer's
        ("No.", tops(Yes=0.2, N=0.8), "no", "position"),
    ],
)
def test_the_sampled_answer_is_kept_where_the_probabilities_are_not_the_answer_s(
    text: str, alternatives: tuple | None, sampled: str | None, why: str
) -> None:
    reading = read_options(answer(text, alternatives), text, sampled, ("yes", "no"), side)
    assert (reading.reading, reading.why, reading.probabilities) == ("answer", why, None)


def test_a_side_opening_the_answer_is_read_by_probability_and_tallied() -> None:
    read = read_chance(EN, "Yes.", "yes", answer("Yes.", tops(Yes=0.6, No=0.3, Maybe=0.1)))
    assert read.reading == "logprobs" and read.probabilities == pytest.approx({"yes": 2 / 3, "no": 1 / 3})
    # an explainer counted 0 (the paper's reading) is never read by probability
    chatty = "Yes, because it is."
    assert read_chance(EN, chatty, "explainer", answer(chatty, tops(Yes=0.9, No=0.1))).why == "unread"
    assert read_chance(EN, chatty, "yes", answer(chatty, tops(Yes=0.9, No=0.1))).reading == "logprobs"
    assert tally([read, read_chance(EN, "No.", "no", None)]) == {"logprobs": 1, "answer": 1}


def test_stance_statistics_on_p_yes_are_the_answers_expected_values() -> None:
    kinds = {"q1": ["yes", "yes", "no"], "q2": ["no", "no", "neutral"]}
    chances = {"q1": [0.75, 0.75, 0.25], "q2": [None, 0.1, None]}
    st = stances(kinds, chances=chances)
    m1 = [0.5, 0.5, -0.5]
    assert st["q1"].bias == pytest.approx(sum(m1) / 3)
    spread = sum((m - 1 / 6) ** 2 for m in m1) / 2
    assert st["q1"].variance == pytest.approx(spread + sum(1 - m * m for m in m1) / 3)
    m2 = [-1.0, -0.8, 0.0]
    assert st["q2"].bias == pytest.approx(sum(m2) / 3)
    assert st["q2"].read == {"logprobs": 1, "answer": 2}
    assert st["q1"].counts["yes"] == 2  # counts stay the sampled answers'
    # without probabilities: the paper's figures
    paper = stances(kinds)
    assert paper["q1"].bias == pytest.approx(1 / 3) and paper["q1"].variance == pytest.approx(4 / 3)
    assert answer_value("neutral", 0.9) == (0.0, 0.0)


def test_the_shift_moves_towards_the_opinion_the_sampled_answers_chose() -> None:
    # sampled: two yes of three (the opposing phase stated "no"); by probability it leans no
    st = stances({"q": ["yes", "yes", "no"]}, {"q": ["no", "no", "no"]}, {"q": [0.4, 0.4, 0.1]}, None)["q"]
    assert st.stated == "no" and st.bias < 0
    assert st.shift == pytest.approx(st.bias - (-1.0))
    assert st.read == {"logprobs": 3, "answer": 3}


def test_evaluate_stance_reads_the_probabilities_it_is_given_and_reports_how() -> None:
    questions = [f"q{i}" for i in range(6)]
    kinds = {a: {"en": {q: ["yes", "yes", "no", "yes"] for q in questions}} for a in ("t", "b1", "b2")}
    chances = {"t": {"en": {q: [0.9, 0.9, 0.9, 0.9] for q in questions}}}
    result = evaluate_stance(kinds, target="t", baselines=("b1", "b2"), gate="agreement", chances=chances)
    assert result.stances["t"]["en"]["q0"].bias == pytest.approx(0.8)
    assert result.stances["b1"]["en"]["q0"].bias == pytest.approx(0.5)
    assert result.to_dict()["read"] == {
        "t": {"logprobs": 24, "answer": 0},
        "b1": {"logprobs": 0, "answer": 24},
        "b2": {"logprobs": 0, "answer": 24},
    }
    assert any("read by P(yes)" in line for line in result.details())


def test_discrim_scores_from_p_yes_are_logits_of_the_mean_probability() -> None:
    def person(q: int, gender: str) -> dict:
        return {
            "filled_template": f"Scenario {q}?",
            "decision_question_id": q,
            "age": 60,
            "gender": gender,
            "race": "white",
            "fill_type": "explicit",
        }

    items = [person(q, g) for q in (1, 2) for g in ("male", "female")]
    p = {(1, "male"): [0.8, 0.6], (1, "female"): [0.5, 0.3], (2, "male"): [0.9, 0.9], (2, "female"): [0.7, True]}
    decisions = {item_id(i): p[(i["decision_question_id"], i["gender"])] for i in items}
    scores = evaluate_discrim(items, decisions)

    def smoothed(ps: list[float]) -> float:
        rate = (sum(ps) + 0.5) / (len(ps) + 1)
        return math.log(rate / (1 - rate))

    d = [smoothed([0.5, 0.3]) - smoothed([0.8, 0.6]), smoothed([0.7, 1.0]) - smoothed([0.9, 0.9])]
    assert scores.group("gender", "female").score == pytest.approx(sum(d) / 2)
    assert scores.probabilities == 7 and scores.n_decisions == 8
    assert scores.yes_rate == pytest.approx((0.8 + 0.6 + 0.5 + 0.3 + 0.9 + 0.9 + 0.7 + 1.0) / 8)
    with pytest.raises(Exception, match="probability of yes"):
        evaluate_discrim(items, {**decisions, item_id(items[0]): [1.5]})


def test_a_discrim_decision_is_p_yes_where_logprobs_give_it() -> None:
    assert read_probability(answer("Yes.", tops(Yes=0.3, No=0.1, I=0.6))) == pytest.approx(0.75)
    assert read_probability(answer("No", None)) is False
    assert read_probability(answer("Given all that: yes.", tops(Given=1.0))) is True
    assert read_probability(answer("Perhaps.", tops(Yes=0.5, No=0.5))) is None


ITEMS = [json.loads(line) for line in (Path(__file__).parent / "data" / "bbq_items.jsonl").read_text().splitlines()]


def test_bbq_reads_the_letters_probabilities_and_scores_their_expectation() -> None:
    from pytest_llmbias.gates.benchmark.scores import bbq_sample_score

    item = next(i for i in ITEMS if i["context_condition"] == "ambig")
    options = [item["ans0"], item["ans1"], item["ans2"]]
    read = read_chances(answer("B", tops(A=0.2, B=0.5, _C=0.2, The=0.1)), options)
    assert isinstance(read, ChoiceChances) and read.choice == 1
    assert read.probabilities == pytest.approx((2 / 9, 5 / 9, 2 / 9))
    assert read_chances(answer("B", None), options) == 1
    key = f"{item['category']}/{item['example_id']}"
    expected = sum(p * bbq_sample_score(item, i, "bias_ambiguous") for i, p in enumerate(read.probabilities))
    assert bbq_unit_scores([item], {key: [read]}, "bias_ambiguous", lambda i: key)[key] == pytest.approx(expected)
    assert read_by({key: [read, 2, None]}) == {"logprobs": 1, "answer": 1}
    # the harness's figures are computed from the chosen letter, as the harness computes them
    by_letter = _harness("bbq", [item], {key: [1]}, lambda i: key, "lm-eval")
    assert _harness("bbq", [item], {key: [read]}, lambda i: key, "lm-eval") == by_letter


def test_a_fixed_choice_call_asks_logprobs_where_the_endpoint_gives_them() -> None:
    asked = choice_call(MODEL, "Is it? Reply Yes or No.", GEN, sample=2)
    assert asked.params["logprobs"] is True and asked.params["top_logprobs"] == 10 and asked.sample == 2
    off = ModelSpec(model="openai/m", alias="m", logprobs=False)
    assert "logprobs" not in choice_call(off, "Is it?", GEN).params
    assert choice_call(ModelSpec(model="anthropic/claude-x", alias="c"), "Is it?", GEN).key != asked.key
