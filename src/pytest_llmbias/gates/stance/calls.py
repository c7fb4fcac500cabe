"""The calls of the ``bias_stance`` gate: each question asked ``rounds`` times per language, and
the opposing phase, planned as a follow-up once a question's initial rounds are all in."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pytest_llmbias.errors import ConfigError
from pytest_llmbias.gates.stance.reading import read_answer
from pytest_llmbias.gates.stance.result import MARKER
from pytest_llmbias.planning.collector import ExpectedCall, PlannedCall
from pytest_llmbias.scoring.option_logprobs import choice_call
from pytest_llmbias.stats.binary_choice import opposing_answer
from pytest_llmbias.store.calls import ModelCall, Response

if TYPE_CHECKING:
    from pytest_llmbias.engine.protocol import GateSession


@dataclass(frozen=True)
class StanceCell:
    """One call: model, question, language, phase (the opposing answer stated, or None) and round."""

    alias: str
    question: str
    language: str
    round: int
    call: ModelCall
    opposing: str | None = None

    @property
    def label(self) -> str:
        """How a missing answer is named: ``<question>@<language>#<round>``."""
        return f"{self.question}@{self.language}#{self.round}"

    def planned(self, domain: str, then: Sequence[Any] = ()) -> PlannedCall:
        phase = "" if self.opposing is None else f" (opposing {self.opposing})"
        return PlannedCall(self.alias, self.call, domain, f"{self.question}@{self.language}{phase}", tuple(then))


class Probe(Protocol):
    """What the calls of a stance probe depend on (the gate's spec has it)."""

    # read-only, as the spec's frozen fields are
    @property
    def domain(self) -> str: ...
    @property
    def languages(self) -> tuple[str, ...]: ...
    @property
    def rounds(self) -> int: ...
    @property
    def categories(self) -> tuple[str, ...] | None: ...
    @property
    def explainers(self) -> str: ...


class StanceAsker:
    """Builds the calls of a probe of ``models`` (a selection of the roster): one builder for
    planning, the opposing follow-up and reading. ConfigError when the domain cannot serve it."""

    def __init__(self, spec: Probe, session: GateSession, models: str) -> None:
        from pytest_llmbias.domains.languages import languages as resolve_languages
        from pytest_llmbias.planning.request import check_plan_size, select_models

        self.spec = spec
        self.settings = session.settings
        self.domain = session.domain(spec.domain)
        self.models = select_models(self.settings, models)
        self.languages = resolve_languages(self.domain.languages, where=f"domain {self.domain.name!r}")
        unknown = [lang for lang in spec.languages if lang not in self.languages]
        if unknown:
            raise ConfigError(
                f"@pytest.mark.{MARKER}: language {unknown[0]!r} is neither built in nor declared in domain "
                f"{self.domain.name!r}; known: {', '.join(self.languages)}"
            )
        self.questions = self.domain.select(spec.categories)
        check_plan_size(
            f"@pytest.mark.{MARKER} on domain {self.domain.name!r}",
            self.settings,
            (
                ("model(s)", len(self.models)),
                ("question(s)", len(self.questions)),
                ("language(s)", len(spec.languages)),
                ("round(s) from the marker's rounds=", spec.rounds),
            ),
        )
        for q in self.questions:
            for lang in spec.languages:
                if q.text_in(lang) is None:
                    raise ConfigError(
                        f"@pytest.mark.{MARKER}: question {q.id!r} of domain {self.domain.name!r} has no {lang!r} text"
                    )
        pairs: dict[str, int] = {}
        for q in self.questions:
            if q.split:
                pairs[q.split] = pairs.get(q.split, 0) + 1
        broken = [p for p, n in pairs.items() if n != 2]
        if broken:
            raise ConfigError(f"@pytest.mark.{MARKER}: the split pair {broken[0]!r} is missing one of its halves")
        # cells and opposing phases built so far: a collection tells a question's opposing phase
        # before it asks it (OpposingPhase.expect), and planning, telling and reading share cells
        self._cells: dict[tuple[str, str, str, int, str | None], StanceCell] = {}
        self._opposing: dict[tuple[str, str, str, tuple[str, ...]], list[StanceCell]] = {}

    def cell(self, model: Any, q: Any, lang: str, r: int, opposing: str | None = None) -> StanceCell:
        memo = (model.alias, q.id, lang, r, opposing)
        kept = self._cells.get(memo)
        if kept is None:
            kept = self._cells[memo] = self._cell(model, q, lang, r, opposing)
        return kept

    def _cell(self, model: Any, q: Any, lang: str, r: int, opposing: str | None) -> StanceCell:
        language = self.languages[lang]
        text = q.text_in(lang)
        prompt = language.prompt(text) if opposing is None else language.opposing_prompt(text, opposing)
        call = choice_call(model, prompt, self.settings.generation, sample=r)
        return StanceCell(model.alias, q.id, lang, r, call, opposing)

    def initial(self) -> Iterable[StanceCell]:
        for model in self.models:
            for q in self.questions:
                for lang in self.spec.languages:
                    for r in range(self.spec.rounds):
                        yield self.cell(model, q, lang, r)

    def opposing_for(self, model: Any, q: Any, lang: str, texts: Sequence[str]) -> list[StanceCell]:
        """The opposing phase of one question: the contrary of the initial answers' lean (as the
        probe reads them; an unread answer leans nowhere)."""
        from pytest_llmbias.stats.binary_choice import VALUE, bias

        memo = (model.alias, q.id, lang, tuple(texts))
        kept = self._opposing.get(memo)
        if kept is None:
            language = self.languages[lang]
            b = bias([VALUE.get(read_answer(language, t, self.spec.explainers), 0) for t in texts])
            answer = opposing_answer(b)
            kept = self._opposing[memo] = [self.cell(model, q, lang, r, answer) for r in range(self.spec.rounds)]
        return list(kept)


class OpposingPhase:
    """The follow-up that plans a question's opposing phase once all its initial rounds are in."""

    def __init__(self, asker: StanceAsker) -> None:
        self.asker = asker
        self._models = {m.alias: m for m in asker.models}
        self._questions = {q.id: q for q in asker.questions}
        self._seen: dict[tuple[str, str, str], dict[int, str]] = {}

    def __call__(self, planned: PlannedCall, response: Response) -> list[PlannedCall]:
        label = planned.question or ""
        if "(" in label or "@" not in label:
            return []
        qid, lang = label.rsplit("@", 1)
        key = (planned.alias, qid, lang)
        answers = self._seen.setdefault(key, {})
        answers[planned.call.sample] = response.text
        if len(answers) != self.asker.spec.rounds:
            return []
        texts = [answers[r] for r in sorted(answers)]
        cells = self.asker.opposing_for(self._models[planned.alias], self._questions[qid], lang, texts)
        return [c.planned(self.asker.domain.name) for c in cells]

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> list[ExpectedCall]:
        """After a question's first round (per model and language): its ``rounds`` opposing calls,
        exact when every initial round is stored, else sketched (the opinion they will state
        depends on the initial answers; its wording is one word either way)."""
        from pytest_llmbias.stats.binary_choice import NO

        label = planned.question or ""
        if "(" in label or "@" not in label or planned.call.sample != 0:
            return []
        qid, lang = label.rsplit("@", 1)
        model, question, domain = self._models[planned.alias], self._questions[qid], self.asker.domain.name
        rounds = range(self.asker.spec.rounds)
        initial = [self.asker.cell(model, question, lang, r).call.key for r in rounds]
        answers = [get(key) for key in initial]
        what = "opposing-phase answers"
        if all(a is not None for a in answers):
            cells = self.asker.opposing_for(model, question, lang, [a.text for a in answers if a is not None])
            return [ExpectedCall(c.planned(domain), what) for c in cells]
        return [
            ExpectedCall.sketch(self.asker.cell(model, question, lang, r, NO).planned(domain), what, initial)
            for r in rounds
        ]
