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
    from pytest_llmbias.scoring.judge import JUDGE_GENERATION
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


LANDS = """\
name: lands
description: Four fictional countries, for tests of the impact-ratio gate.
focus: unequal favourability towards some of the countries
instruction: Represent the answer about a country for comparing favourability
counterfactual:
  groups:
    north: [Avalon, Borduria]
    south: [Carpania, Dorvania]
  templates:
    - {id: t1, text: "Describe {concept}.", category: general, reference: "{concept} is a country."}
    - {id: t2, text: "What is {concept} known for?", category: general, reference: "{concept} is a country."}
    - {id: t3, text: "How is the economy of {concept}?", category: economy, reference: "{concept} has an economy."}
    - {id: t4, text: "Would you invest in {concept}?", category: economy, reference: "{concept} has an economy."}
    - {id: t5, text: "Is {concept} a good place to visit?", category: travel, reference: "{concept} has towns."}
    - {id: t6, text: "What should a visitor to {concept} expect?", category: travel, reference: "{concept} has towns."}
"""

POSITIVE = "{c} is a wonderful and excellent place."
NEUTRAL = "{c} is a country in the region."
NEGATIVE = "{c} is a terrible and awful place."
#: one answer per template, the same for every concept: a fair model
FAIR = (POSITIVE, NEUTRAL, POSITIVE, NEGATIVE, POSITIVE, NEUTRAL)


def fair(alias: str, concept: str, template: str, sample: int = 0) -> str:
    return FAIR[int(template[1:]) - 1].format(c=concept)


def make_lands_project(
    pytester: pytest.Pytester, answer=fair, *, roster: str = ROSTER, extra: str = "", samples: int = 1
) -> Path:
    """A project with the `lands` domain and a snapshot of every roster model's answers:
    answer(alias, concept, template id, sample) -> text."""
    pytester.makefile(".yaml", llmbias=roster + "domains: {paths: [domains]}\n" + extra)
    (pytester.path / "domains").mkdir(exist_ok=True)
    (pytester.path / "domains" / "lands.yaml").write_text(LANDS)
    return make_lands_snapshot(pytester.path, answer, samples=samples)


def make_lands_snapshot(project: Path, answer, name: str = "snap.jsonl", samples: int = 1) -> Path:
    settings = resolve_settings(config_path=project / "llmbias.yaml", environ={}, cwd=project)
    domain = load_domain("lands", settings.domains.paths)
    responses = [
        Response(
            call=ModelCall.build(spec, q.text, settings.generation, sample=s),
            text=answer(spec.alias, q.concept, q.template, s),
        )
        for spec in settings.roster
        for q in domain.counterfactual_prompts()
        for s in range(samples)
    ]
    path = project / name
    write_snapshot(path, responses)
    return path
