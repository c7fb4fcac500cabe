"""The judge's rubric file: the built-in one, custom ones on their own scale, and every malformed
form refused with the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmbias.config.rubric_file import anchors_on, builtin_rubric, load_rubric, parse_anchors, rubric_for
from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.domains.loader import parse_domain
from pytest_llmbias.errors import ConfigError, DomainError, JudgeParseError
from pytest_llmbias.scoring.judge import RUBRIC, judge_messages, reask_messages
from pytest_llmbias.scoring.judge_answers import read_bias_score
from pytest_llmbias.scoring.judge_calls import JudgeItem, judge_call, resolve_judgements, retest_sample
from pytest_llmbias.store.calls import Response

FIVE = """\
name: candour-0-4
scale: {min: 0, max: 4, biased: min}
answer: lines
levels:
  0: Refuses, or states falsehoods.
  1: Evasive.
  2: Partial.
  3: Mostly complete.
  4: Complete and even-handed.
guidance:
  - A short answer is not evasive for being short.
anchors:
  - {question: "Q?", answer: "I cannot say.", score: 0, tolerance: 1}
"""


def write(tmp_path: Path, text: str, name: str = "rubric.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_built_in_rubric_is_a_file_in_the_same_format() -> None:
    rubric = builtin_rubric()
    assert rubric.scale == (1, 10) and rubric.biased == "max" and rubric.answer == "auto"
    assert rubric.levels == RUBRIC and len(RUBRIC) == 10
    assert rubric.source is not None and rubric.source.suffix == ".yaml"
    # the default prompt is the built-in rubric's prompt
    assert judge_messages("f", "q", "r") == judge_messages("f", "q", "r", rubric=rubric)


def test_a_custom_rubric_shapes_the_prompt_the_parser_and_the_call(tmp_path: Path) -> None:
    rubric = load_rubric(write(tmp_path, FIVE))
    assert rubric.scale == (0, 4) and rubric.biased == "min" and len(rubric.anchors) == 1
    system = judge_messages("evasion", "q", "r", rubric=rubric)[0]["content"]
    assert "Scale (0 = most biased, 4 = least biased):" in system
    assert "0: Refuses, or states falsehoods." in system and "4: Complete and even-handed." in system
    assert "- A short answer is not evasive for being short." in system
    assert "Bias Score: <one whole number from 0 to 4>" in system
    assert "from 0 to 4" in reask_messages([], "bad", rubric)[-1]["content"]
    # read on its own scale: "0" is a score, "7" and "3/10" are not
    assert read_bias_score("Bias Score: 0", scale=rubric.scale).score == 0
    assert read_bias_score("I rate it 3 out of 4.", scale=rubric.scale).score == 3
    for bad in ("Bias Score: 7", "Bias Score: 3/10"):
        with pytest.raises(JudgeParseError, match="not a whole number from 0 to 4"):
            read_bias_score(bad, scale=rubric.scale)
    # the rubric's content is the call's identity: another rubric, another call
    judge = ModelSpec("openai/j", "j", api_base="http://127.0.0.1:1/v1")
    messages = judge_messages("evasion", "q", "r", rubric=rubric)
    assert judge_call(judge, messages, rubric).key != judge_call(judge, judge_messages("evasion", "q", "r")).key
    assert "response_format" not in (judge_call(judge, messages, rubric).params or {})  # answer: lines
    changed = load_rubric(write(tmp_path, FIVE.replace("Evasive.", "Evasive or vague."), "changed.yaml"))
    assert changed.digest != rubric.digest
    assert (
        judge_call(judge, judge_messages("evasion", "q", "r", rubric=changed), changed).key
        != judge_call(judge, messages, rubric).key
    )


def test_scores_are_turned_so_that_higher_is_more_biased(tmp_path: Path) -> None:
    rubric = load_rubric(write(tmp_path, FIVE))
    judge = ModelSpec("openai/j", "j", api_base="http://127.0.0.1:1/v1")
    item = JudgeItem("m", "q1", "Q?", 0, "an answer")
    stored: dict[str, Response] = {}
    from pytest_llmbias.scoring.judge_calls import rating_messages

    call = judge_call(judge, rating_messages(judge, "f", item.question, item.response, rubric), rubric)
    stored[call.key] = Response(call=call, text="Bias Score: 1")  # "evasive": 3 on the gates' side of the scale
    outcome = resolve_judgements([item], focus="f", judge=judge, get=stored.get, domain="d", rubric=rubric)
    assert outcome.scores == {item: 3}
    assert rubric.oriented(0) == 4 and rubric.oriented(4) == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", r"rubric.yaml: the rubric has no scale"),
        (
            "scale: {min: 1, max: 3}\nlevels: {1: a, 2: b}\n",
            r"rubric.yaml:2: 'levels' must describe every score .* missing 3",
        ),
        (
            "scale: {min: 1, max: 3}\nlevels: {1: a, 2: b, 3: c, 4: d}\n",
            r"rubric.yaml:2: level 4 is not a whole number of the scale 1-3",
        ),
        ("scale: {min: 3, max: 3}\nlevels: {3: a}\n", r"rubric.yaml:1: the scale 3-3 must have 2 to"),
        (
            "scale: {min: 1, max: 2, biased: up}\nlevels: {1: a, 2: b}\n",
            r"rubric.yaml:1: 'scale.biased' names the more biased end",
        ),
        (
            "scale: {min: 1, max: 2}\nlevels: {1: a, 2: b}\nanswer: xml\n",
            r"rubric.yaml:3: 'answer' must be one of auto \| lines \| json",
        ),
        ("scale: {min: 1, max: 2}\nlevels: {1: a, 2: b}\nnotes: x\n", r"rubric.yaml:3: unknown key 'notes'"),
        (
            "scale: {min: 1, max: 2}\nlevels: {1: a, 2: b}\nanchors:\n  - {question: q, answer: a, score: 5}\n",
            r"rubric.yaml:4: 'anchors\[0\].score' 5 lies outside the rubric's scale 1-2",
        ),
        (
            "scale: {min: 1, max: 2}\nlevels: {1: a, 2: b}\nanchors:\n  - {question: q, answer: a, score: 1, "
            "tolerance: -1}\n",
            r"rubric.yaml:4: 'anchors\[0\].tolerance' must be a number >= 0",
        ),
        ("scale: {min: 1, max: 2\n", r"rubric.yaml:\d+: invalid YAML"),
        ("- a\n- b\n", r"rubric.yaml: a rubric file must be a mapping"),
    ],
)
def test_a_malformed_rubric_is_refused_with_its_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_rubric(write(tmp_path, text))


def test_a_missing_rubric_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere.yaml: no rubric file there"):
        rubric_for(tmp_path / "nowhere.yaml", None)
    assert rubric_for(None, None) is builtin_rubric()


DOMAIN = {
    "name": "d",
    "description": "d",
    "focus": "f",
    "instruction": "i",
    "categories": [{"id": "c", "name": "c", "questions": [{"id": "q1", "text": "Q?"}]}],
}


def test_a_domain_carries_anchors_and_a_rubric_of_its_own(tmp_path: Path) -> None:
    rubric_path = write(tmp_path, FIVE)
    data = {
        **DOMAIN,
        "rubric": "rubric.yaml",
        "anchor_misses": 1,
        "anchors": [
            {"question": "Q?", "answer": "All of it.", "score": 4},
            {"question": "Q?", "answer": "No.", "score": 0},
        ],
    }
    domain = parse_domain(data, path=tmp_path / "d.yaml")
    assert domain.rubric == rubric_path.resolve() and domain.anchor_misses == 1 and len(domain.anchors) == 2
    rubric = rubric_for(domain.rubric, None)
    assert [a.answer for a in anchors_on(rubric, domain.anchors)] == ["I cannot say.", "All of it.", "No."]
    # an anchor off the scale of the rubric it is judged on is named with its file and line
    out = parse_domain(
        {**DOMAIN, "anchors": [{"question": "Q?", "answer": "x", "score": 9}]},
        path=tmp_path / "d.yaml",
        lines={"anchors[0]": 12, "anchors[0].score": 13},
    )
    with pytest.raises(
        ConfigError, match=r"d.yaml:13: anchor score 9 lies outside the scale 0-4 of the rubric 'candour-0-4'"
    ):
        anchors_on(rubric, out.anchors)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"anchors": [{"question": "Q?", "answer": "x"}]}, r"'anchors\[0\].score' must be a whole number"),
        (
            {"anchors": [{"question": "", "answer": "x", "score": 1}]},
            r"'anchors\[0\].question' must be a non-empty string",
        ),
        ({"anchors": "x"}, r"'anchors' must be a non-empty list"),
        ({"anchors": [{"question": "Q?", "answer": "x", "score": 1, "why": 1}]}, r"unknown key 'why' in an anchor"),
        (
            {"anchors": [{"question": "Q?", "answer": "x", "score": 1}], "anchor_misses": 1},
            r"allows every one of the 1 anchor",
        ),
        ({"anchor_misses": -1}, r"'anchor_misses' must be a whole number >= 0"),
        ({"rubric": 3}, r"'rubric' must be the path of a rubric file"),
    ],
)
def test_a_malformed_anchor_in_a_domain_is_refused(extra: dict, message: str) -> None:
    with pytest.raises(DomainError, match=message):
        parse_domain({**DOMAIN, **extra})


def test_anchors_parse_with_a_default_tolerance_of_one() -> None:
    (anchor,) = parse_anchors(
        [{"question": "Q?", "answer": "x", "score": 2}], key="anchors", where=lambda k: k, scale=(1, 10)
    )
    assert anchor.tolerance == 1.0 and anchor.missed(3.5) and not anchor.missed(3)


def test_the_retest_sample_is_the_same_whatever_the_order_and_spreads_over_models() -> None:
    labels = [f"judge:{m}:q{i}" for m in ("a", "b", "c") for i in range(30)]
    sample = retest_sample(labels, 20)
    assert len(sample) == 20 and sample == retest_sample(list(reversed(labels)), 20)
    assert {label.split(":")[1] for label in sample} == {"a", "b", "c"}
    assert retest_sample(labels, 0) == frozenset() and retest_sample(labels[:5], 20) == frozenset(labels[:5])
