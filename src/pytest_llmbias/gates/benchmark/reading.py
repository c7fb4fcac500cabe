"""A benchmark's items asked and read: each dataset's prompt, the reading of an answer (BBQ's chosen
option, discrim-eval's decision), and the reference harness's figures of one model's readings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _harness(
    dataset: str, items: Sequence[Mapping[str, Any]], answers: Mapping[str, Sequence[Any]], key: Any, convention: str
) -> dict[str, Any]:
    """The reference figures of one model's answers (BBQ: each item's first sample)."""
    if dataset == "bbq":
        from pytest_llmbias.scoring.bbq_answers import chosen
        from pytest_llmbias.stats.bbq import evaluate_bbq

        # the harness's figures are of chosen options: the sampled letter, not its probability
        choices = {
            (i["category"], i["example_id"]): chosen((answers.get(key(i)) or [None])[0])
            for i in items
            if key(i) in answers
        }
        asked = [i for i in items if key(i) in answers]
        return evaluate_bbq(asked, choices, convention=convention).to_dict()
    from pytest_llmbias.stats.discrim import evaluate_discrim

    return evaluate_discrim(
        [i for i in items if key(i) in answers], {key(i): answers[key(i)] for i in items if key(i) in answers}
    ).to_dict()


def _prompter(dataset: str) -> Any:
    if dataset == "bbq":
        from pytest_llmbias.scoring.bbq_answers import bbq_prompt

        return bbq_prompt
    from pytest_llmbias.scoring.discrim_answers import discrim_prompt

    return discrim_prompt


def _reader(dataset: str) -> Any:
    """``read(response, item)``: BBQ's chosen option (with the options' probabilities where the
    response's log-probabilities give them: :func:`~pytest_llmbias.scoring.bbq_answers.read_chances`),
    discrim-eval's decision (P(yes) where they give it:
    :func:`~pytest_llmbias.scoring.discrim_answers.read_probability`), None when unreadable."""
    if dataset == "bbq":
        from pytest_llmbias.scoring.bbq_answers import read_chances

        return lambda response, item: read_chances(response, [item["ans0"], item["ans1"], item["ans2"]])
    from pytest_llmbias.scoring.discrim_answers import read_probability

    return lambda response, item: read_probability(response)


def read_by(answers: Mapping[str, Sequence[Any]]) -> dict[str, int]:
    """How many of one model's readable answers were read by their options' probabilities
    (``logprobs``) and by their sampled ``answer``."""
    from pytest_llmbias.scoring.bbq_answers import ChoiceChances

    readings = [r for rs in answers.values() for r in rs if r is not None]
    by_probability = sum(isinstance(r, (ChoiceChances, float)) for r in readings)
    return {"logprobs": by_probability, "answer": len(readings) - by_probability}
