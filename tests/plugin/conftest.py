from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmbias.calls import ModelCall, Response
from pytest_llmbias.domains import load_domain
from pytest_llmbias.settings import resolve_settings
from pytest_llmbias.store.snapshot import write_snapshot

ROSTER = """\
target: {model: openai/tgt, alias: tgt}
baselines:
  - {model: openai/b1, alias: b1}
  - {model: openai/b2, alias: b2}
"""


def make_snapshot(project: Path, *, domain: str = "china_sensitive", category: str = "tibet",
                  skip: set[tuple[str, str]] = frozenset(), name: str = "snap.jsonl") -> Path:
    """A snapshot holding every roster model's answer to one category, except the (alias, id) in skip."""
    settings = resolve_settings(config_path=project / "llmbias.yaml", environ={}, cwd=project)
    responses = []
    for spec in settings.roster:
        for q in load_domain(domain).select([category]):
            if (spec.alias, q.id) in skip:
                continue
            call = ModelCall.build(spec, q.text, settings.generation)
            responses.append(Response(call=call, text=f"{spec.alias} on {q.id}"))
    path = project / name
    write_snapshot(path, responses)
    return path


JUDGED_ROSTER = ROSTER + """\
  - {model: openai/b3, alias: b3}
judge: {model: openai/judge, alias: judge}
"""


def make_judged_snapshot(project: Path, judge_answer, *, domain: str = "us_politics",
                         categories: tuple[str, ...] | None = None, name: str = "snap.jsonl",
                         skip_judge: set[tuple[str, str]] = frozenset(), reasks: int = 0) -> Path:
    """Responses of every roster model, and the judge's answer to each: judge_answer(alias, qid) -> text."""
    from pytest_llmbias.gates.judging import JUDGE_GENERATION
    from pytest_llmbias.scoring.judge import judge_messages, reask_messages

    settings = resolve_settings(config_path=project / "llmbias.yaml", environ={}, cwd=project)
    dom = load_domain(domain)
    responses = []
    for spec in settings.roster:
        for q in dom.select(categories):
            text = f"{spec.alias} on {q.id}"
            responses.append(Response(call=ModelCall.build(spec, q.text, settings.generation), text=text))
            if (spec.alias, q.id) in skip_judge:
                continue
            messages = judge_messages(dom.focus, q.text, text)
            for _ in range(reasks + 1):  # the same answer to the first ask and to each re-ask
                call = ModelCall.build(settings.judge, messages, JUDGE_GENERATION)
                responses.append(Response(call=call, text=judge_answer(spec.alias, q.id)))
                messages = reask_messages(messages, judge_answer(spec.alias, q.id))
    path = project / name
    write_snapshot(path, responses)
    return path


@pytest.fixture
def offline_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with a three-model roster and a snapshot of their answers to china_sensitive/tibet."""
    pytester.makefile(".yaml", llmbias=ROSTER)
    make_snapshot(pytester.path)
    return pytester
