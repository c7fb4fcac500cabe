"""A judge's score as the expectation of its score distribution (G-Eval), and when its label stays."""

from __future__ import annotations

import math

import pytest

from pytest_llmbias.config.rubric_file import builtin_rubric
from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.scoring.judge_calls import (
    LOGPROB_PARAMS,
    JudgeItem,
    asks_logprobs,
    judge_call,
    rating_messages,
    resolve_judgements,
)
from pytest_llmbias.scoring.judge_logprobs import MIN_MASS, SPLIT_TOLERANCE, expected_score
from pytest_llmbias.store.calls import Response, answer_alternatives

SCALE = (1, 10)


def alts(**probabilities: float) -> tuple[tuple[str, float], ...]:
    """Alternatives from ``t7=0.6`` style names: ``t`` then the token ("_" stands for a space)."""
    return tuple((name[1:].replace("_", " "), math.log(p)) for name, p in probabilities.items())


def test_expectation_is_the_mean_over_the_scale_renormalised() -> None:
    # 7: 0.5, 8: 0.2, 6: 0.1 in-scale; "seven" holds 0.2 off the scale: renormalised over 0.8
    got = expected_score(7, [("7", alts(t7=0.5, t8=0.2, t6=0.1, tseven=0.2)), (",", ())], SCALE)
    assert got.reading == "logprobs" and got.why is None
    assert got.score == pytest.approx((7 * 0.5 + 8 * 0.2 + 6 * 0.1) / 0.8)
    assert got.mass == pytest.approx(0.8)


def test_tokens_with_a_leading_space_count_as_their_number() -> None:
    got = expected_score(3, [(" 3", alts(t_3=0.6, t3=0.2, t_4=0.2))], SCALE)
    assert got.reading == "logprobs" and got.score == pytest.approx(3.2)


def test_without_logprobs_the_label_is_the_score() -> None:
    got = expected_score(6, None, SCALE)
    assert (got.score, got.reading, got.why) == (6.0, "label", "no logprobs")


def test_too_little_mass_on_the_scale_keeps_the_label() -> None:
    got = expected_score(4, [("4", alts(t4=0.3, tthe=0.5, tfour=0.2))], SCALE)
    assert got.reading == "label" and got.why == "mass" and got.score == 4.0
    assert got.mass == pytest.approx(0.3) and got.mass < MIN_MASS


def test_a_number_that_is_not_the_label_is_not_the_score_position() -> None:
    # the first number of the answer is not the score it gives (or a token such as "7.")
    assert expected_score(4, [("3", alts(t3=0.9, t4=0.1))], SCALE).why == "position"
    assert expected_score(7, [("7.", alts(t7=0.9))], SCALE).why == "position"


def test_a_split_ten_that_was_sampled_is_resolved_by_the_next_position() -> None:
    # "10" written "1", "0": after the sampled "1", "0" (0.8) makes 10, a comma (0.2) makes 1
    positions = [("1", alts(t1=0.7, t9=0.3)), ("0", alts(t0=0.8, **{"t,": 0.2})), (",", ())]
    got = expected_score(10, positions, SCALE)
    assert got.reading == "logprobs"
    assert got.score == pytest.approx(10 * 0.56 + 1 * 0.14 + 9 * 0.3)


def test_a_sampled_one_followed_by_another_digit_is_off_the_scale() -> None:
    # "1" then "1" would be 11: that share is off the scale and the rest renormalised
    positions = [("1", alts(t1=0.9, t2=0.1)), (",", alts(**{"t,": 0.5}, t0=0.25, t1=0.25))]
    got = expected_score(1, positions, SCALE)
    assert got.reading == "logprobs"
    # 1: 0.9 * 0.5, 10: 0.9 * 0.25, 2: 0.1; 11: 0.9 * 0.25 off the scale
    assert got.score == pytest.approx((0.45 + 10 * 0.225 + 0.2) / 0.775)


def test_an_unsampled_one_of_a_split_tokenizer_is_ambiguous() -> None:
    # sampled "3": what would have followed a "1" is unknown; read both ways, 9 * 0.3 = 2.7 apart
    got = expected_score(3, [("3", alts(t3=0.6, t1=0.3, t4=0.1)), (",", ())], SCALE)
    assert got.reading == "label" and got.why == "split" and got.score == 3.0
    # a small "1": both readings within the tolerance, their mean is the score
    small = expected_score(3, [("3", alts(t3=0.9, t1=0.01, t4=0.09)), (",", ())], SCALE)
    low, high = 2.7 + 0.01 + 0.36, 2.7 + 0.1 + 0.36
    assert high - low <= SPLIT_TOLERANCE
    assert small.reading == "logprobs" and small.score == pytest.approx((low + high) / 2)


def test_a_tokenizer_that_writes_ten_whole_reads_one_as_one() -> None:
    got = expected_score(3, [("3", alts(t3=0.6, t10=0.3, t1=0.1))], SCALE)
    assert got.reading == "logprobs" and got.score == pytest.approx(1.8 + 3.0 + 0.1)


def test_a_score_read_stays_on_the_scale_of_the_rubric() -> None:
    got = expected_score(2, [("2", alts(t2=0.5, t3=0.3, t9=0.2))], (1, 3))
    assert got.reading == "logprobs" and got.score == pytest.approx((1.0 + 0.9) / 0.8)


def _content(text_tokens: list[tuple[str, dict[str, float]]]) -> list[dict]:
    return [
        {
            "token": t,
            "logprob": math.log(tops.get(t, 1.0)),
            "top_logprobs": [{"token": a, "logprob": math.log(p)} for a, p in tops.items()],
        }
        for t, tops in text_tokens
    ]


def test_the_clients_keep_the_alternatives_of_the_first_number() -> None:
    content = _content(
        [("Bias", {}), (" Score", {}), (":", {}), (" ", {}), ("1", {"1": 0.6, "2": 0.4}), ("0", {"0": 0.9}), ("\n", {})]
    )
    first, number = answer_alternatives(content)
    assert first == (("Bias", 0.0),)
    assert number is not None and [t for t, _ in number] == ["1", "0", "\n"]
    assert expected_score(10, number, SCALE).reading == "logprobs"
    assert answer_alternatives(_content([("A", {"A": 0.9})]))[1] is None


def test_a_record_keeps_the_number_positions_and_an_old_one_reads_as_before() -> None:
    judge = ModelSpec(model="openai/j", alias="j", api_base="http://127.0.0.1:1/v1")
    call = judge_call(judge, [{"role": "user", "content": "rate"}])
    positions = (("7", (("7", -0.2), ("8", -1.8))), (",", ()))
    response = Response(call, '{"bias_score": 7, "explanation": "x"}', number_logprobs=positions)
    record = response.to_dict()
    assert record["number_logprobs"] == [["7", [["7", -0.2], ["8", -1.8]]], [",", []]]
    assert Response.from_dict(record, source="test").number_logprobs == positions
    old = {k: v for k, v in record.items() if k != "number_logprobs"}
    assert Response.from_dict(old, source="test").number_logprobs is None


def test_logprobs_are_asked_where_the_provider_gives_them_and_can_be_turned_off() -> None:
    assert asks_logprobs(ModelSpec(model="openai/gpt-4o-mini", alias="a"))
    assert asks_logprobs(ModelSpec(model="openai/local", alias="a", api_base="http://127.0.0.1:8000/v1"))
    assert not asks_logprobs(ModelSpec(model="anthropic/claude-sonnet-4", alias="a"))
    assert not asks_logprobs(ModelSpec(model="openai/o3-mini", alias="a"))
    assert not asks_logprobs(ModelSpec(model="openai/gpt-5", alias="a"))
    off = ModelSpec(model="openai/gpt-4o-mini", alias="a", logprobs=False)
    assert not asks_logprobs(off)
    call = judge_call(off, [{"role": "user", "content": "rate"}])
    assert "logprobs" not in call.params
    on = judge_call(ModelSpec(model="openai/gpt-4o-mini", alias="a"), [{"role": "user", "content": "rate"}])
    assert {k: on.params[k] for k in LOGPROB_PARAMS} == LOGPROB_PARAMS


def test_resolve_reads_an_expectation_where_the_answer_has_logprobs_and_a_label_where_not() -> None:
    judge = ModelSpec(model="openai/j", alias="j", api_base="http://127.0.0.1:1/v1", structured=False)
    rubric = builtin_rubric()
    items = [JudgeItem("m", f"q{i}", f"question {i}", 0, f"answer {i}") for i in range(3)]
    store = {}
    for i, item in enumerate(items):
        call = judge_call(judge, rating_messages(judge, "bias", item.question, item.response, rubric), rubric)
        number = (("4", (("4", math.log(0.5)), ("5", math.log(0.5)))), ("\n", ())) if i < 2 else None
        store[call.key] = Response(call, "Bias Score: 4\nExplanation: x", number_logprobs=number)
    outcome = resolve_judgements(items, focus="bias", judge=judge, get=store.get, domain="d", rubric=rubric)
    assert [outcome.scores[i] for i in items] == [4.5, 4.5, 4.0]
    assert outcome.scored == {"logprobs": 2, "label": 1} and outcome.fallbacks == {"no logprobs": 1}
