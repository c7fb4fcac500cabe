"""The answers a test asked for: a :class:`ResponseSet`, and how its calls are planned."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmbias.calls import ModelCall, Response
from pytest_llmbias.collector import PlannedCall
from pytest_llmbias.domains.model import Domain, Question
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.markers import ResponsesSpec
from pytest_llmbias.settings import ModelSpec, Settings


def select_models(settings: Settings, models: str | tuple[str, ...]) -> tuple[ModelSpec, ...]:
    """The model specs a marker's ``models`` argument names; the roster must provide them."""
    if models == "target":
        settings.require_roster(min_baselines=0)
        assert settings.target is not None
        return (settings.target,)
    if models == "baselines":
        settings.require_roster(min_baselines=1)
        return settings.baselines
    if models == "all":
        settings.require_roster(min_baselines=1)
        return settings.roster
    return tuple(settings.model(alias) for alias in models)


def plan_responses(spec: ResponsesSpec, settings: Settings, domain: Domain) -> list[PlannedCall]:
    """Every (model, question, sample) call ``spec`` needs."""
    samples = spec.samples or settings.generation.samples
    questions = domain.select(spec.categories)
    return [
        PlannedCall(
            alias=model.alias,
            call=ModelCall.build(model, q.text, settings.generation, sample=s),
            domain=domain.name,
            question=q.id,
        )
        for model in select_models(settings, spec.models)
        for q in questions
        for s in range(samples)
    ]


@dataclass(frozen=True)
class ResponseSet:
    """Every answer of ``aliases`` to ``questions``, ``samples`` per question.

    ``target`` is the target's alias when the target was asked; ``baselines`` the baselines' aliases.
    """

    domain: Domain
    questions: tuple[Question, ...]
    aliases: tuple[str, ...]
    target: str | None
    baselines: tuple[str, ...]
    samples: int
    responses: Mapping[tuple[str, str, int], Response] = field(repr=False)

    def __len__(self) -> int:
        return len(self.responses)

    @property
    def n_questions(self) -> int:
        return len(self.questions)

    def response(self, alias: str, question_id: str, sample: int = 0) -> Response:
        try:
            return self.responses[(alias, question_id, sample)]
        except KeyError:
            raise KeyError(f"no response of {alias!r} to {question_id!r} sample {sample}") from None

    def text(self, alias: str, question_id: str, sample: int = 0) -> str:
        return self.response(alias, question_id, sample).text

    def texts(self, alias: str) -> dict[str, list[str]]:
        """Question id -> the model's answers (one per sample)."""
        if alias not in self.aliases:
            raise KeyError(f"{alias!r} was not asked; asked: {', '.join(self.aliases)}")
        return {q.id: [self.responses[(alias, q.id, s)].text for s in range(self.samples)] for q in self.questions}

    def by_question(self, question_id: str) -> dict[str, list[str]]:
        """Alias -> answers to one question."""
        return {a: [self.responses[(a, question_id, s)].text for s in range(self.samples)] for a in self.aliases}

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain.name,
            "aliases": list(self.aliases),
            "target": self.target,
            "baselines": list(self.baselines),
            "samples": self.samples,
            "questions": [q.to_dict() for q in self.questions],
            "responses": [
                {"alias": a, "question": q, "sample": s, "text": r.text, "key": r.key}
                for (a, q, s), r in self.responses.items()
            ],
        }


def describe_missing(missing: Mapping[str, list[str]], errors: Mapping[str, str], limit: int = 8) -> str:
    """A readable list: per alias, the question ids without a response, and the first errors."""
    lines = []
    for alias, ids in missing.items():
        shown = ", ".join(ids[:limit]) + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")
        lines.append(f"  {alias}: {shown}")
    distinct = list(dict.fromkeys(errors.values()))
    for message in distinct[:3]:
        lines.append(f"  error: {message}")
    if len(distinct) > 3:
        lines.append(f"  ... and {len(distinct) - 3} other errors")
    return "\n".join(lines)


def check_domain_selection(spec: ResponsesSpec, domain: Domain) -> None:
    if not domain.select(spec.categories):
        raise ConfigError(f"domain {domain.name!r} has no questions for categories {spec.categories}")
