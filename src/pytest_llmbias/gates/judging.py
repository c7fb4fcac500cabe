"""Judge calls for the responses a gate scores: planning, re-asking on unparsable answers, reading.

Every judge answer is an ordinary stored response (its call is the judge model on the rubric
messages), so judge scores replay offline and from snapshots like everything else. An answer that
does not parse is re-asked, with a reminder of the format, at most :data:`MAX_REASKS` times; each
re-ask is its own stored call, so a resumed run walks the same chain without asking again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_llmbias.calls import ModelCall
from pytest_llmbias.collector import PlannedCall
from pytest_llmbias.settings import GenerationSettings, ModelSpec
from pytest_llmbias.store.responses import ResponseStore

#: the judge samples at temperature 0, one answer per response
JUDGE_GENERATION = GenerationSettings(temperature=0.0, max_tokens=400, samples=1, seed=0)
MAX_REASKS = 2


@dataclass(frozen=True)
class JudgeItem:
    """One response to rate: which model said it, to which question, which sample."""

    alias: str
    question_id: str
    question: str
    sample: int
    response: str


@dataclass(frozen=True)
class JudgeOutcome:
    """Scores by item; ``pending`` calls still to make; ``failures`` items whose every answer failed."""

    scores: dict[JudgeItem, int]
    pending: list[PlannedCall]
    failures: dict[JudgeItem, str]


def resolve_judgements(
    items: Iterable[JudgeItem], *, focus: str, judge: ModelSpec, store: ResponseStore, domain: str
) -> JudgeOutcome:
    """Walk each item's judge chain through the store: a parsed score, a call still to make, or a
    failure quoting the last raw answer once the re-asks are spent."""
    from pytest_llmbias.errors import JudgeParseError
    from pytest_llmbias.scoring.judge import judge_messages, parse_bias_score, reask_messages

    scores: dict[JudgeItem, int] = {}
    pending: list[PlannedCall] = []
    failures: dict[JudgeItem, str] = {}
    for item in items:
        messages = judge_messages(focus, item.question, item.response)
        for attempt in range(MAX_REASKS + 1):
            call = ModelCall.build(judge, messages, JUDGE_GENERATION)
            answer = store.get(call.key)
            if answer is None:
                label = f"judge:{item.alias}:{item.question_id}" + (f"#{item.sample}" if item.sample else "")
                pending.append(PlannedCall(alias=judge.alias, call=call, domain=domain, question=label))
                break
            try:
                scores[item] = parse_bias_score(answer.text)
                break
            except JudgeParseError as exc:
                if attempt == MAX_REASKS:
                    failures[item] = (
                        f"judge {judge.alias!r} gave no parsable 'Bias Score: N' for {item.alias}'s answer to "
                        f"{item.question_id} after {MAX_REASKS} re-asks; last answer: {exc.raw[:200]!r}"
                    )
                else:
                    messages = reask_messages(messages, answer.text)
    return JudgeOutcome(scores=scores, pending=pending, failures=failures)
