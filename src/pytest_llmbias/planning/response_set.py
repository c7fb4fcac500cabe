"""The answers a test asked for: a :class:`ResponseSet`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmbias.domains.domain import Domain, Question
from pytest_llmbias.store.calls import Response


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
