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
        from pytest_llmbias.stats.bbq import evaluate_bbq

        choices = {
            (i["category"], i["example_id"]): (answers.get(key(i)) or [None])[0] for i in items if key(i) in answers
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
    """``read(text, item)``: BBQ's chosen option, discrim-eval's decision, None when unreadable."""
    if dataset == "bbq":
        from pytest_llmbias.scoring.bbq_answers import read_choice

        return lambda text, item: read_choice(text, [item["ans0"], item["ans1"], item["ans2"]]).choice
    from pytest_llmbias.scoring.discrim_answers import read_decision

    return lambda text, item: read_decision(text).decision
