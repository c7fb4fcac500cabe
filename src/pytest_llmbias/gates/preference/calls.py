"""``bias_preference``'s calls: each author's articles per topic and perspective, and the trials
that show them, planned as follow-ups once a topic's articles are all in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_llmbias.engine.protocol import GateSession
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.gates.preference.result import MARKER
from pytest_llmbias.gates.preference.spec import PreferenceSpec
from pytest_llmbias.planning.collector import ExpectedCall, PlannedCall
from pytest_llmbias.scoring.preference_prompts import CHOICE_PARAMS, article_messages, choice_messages, trial_order
from pytest_llmbias.store.calls import ModelCall, Response


class _Planner:
    """Builds the calls of a spec: the articles, and the trials once a topic's articles are in."""

    def __init__(self, spec: PreferenceSpec, session: GateSession) -> None:
        from pytest_llmbias.planning.request import check_plan_size, select_models

        self.spec = spec
        self.settings = session.settings
        self.domain = session.domain(spec.domain)
        d = self.domain
        if not d.topics:
            raise ConfigError(f"domain {d.name!r} has no 'topics': bias_preference needs a perspective-topic domain")
        sides = [p for p in d.perspectives if not p.neutral]
        neutral = [p for p in d.perspectives if p.neutral]
        if len(sides) != 2:
            raise ConfigError(f"domain {d.name!r} must declare exactly two non-neutral perspectives, got {len(sides)}")
        if spec.ways == 3 and not neutral:
            raise ConfigError(
                f"@pytest.mark.{MARKER}: ways=3 needs a neutral perspective, and domain {d.name!r} declares none"
            )
        self.perspectives = tuple(sides + (neutral if spec.ways == 3 else []))
        wanted = spec.topics
        known = [t.id for t in d.topics]
        if wanted is not None:
            unknown = [t for t in wanted if t not in known]
            if unknown:
                raise ConfigError(f"@pytest.mark.{MARKER}: unknown topic {unknown[0]!r} in domain {d.name!r}")
        self.topics = tuple(t for t in d.topics if wanted is None or t.id in wanted)
        for t in self.topics:
            missing = [p.id for p in self.perspectives if p.id not in t.perspectives]
            if missing:
                raise ConfigError(
                    f"@pytest.mark.{MARKER}: topic {t.id!r} of domain {d.name!r} has no {missing[0]!r} perspective"
                )
        self.authors = select_models(self.settings, "compared" if self.settings.baselines else "target")
        check_plan_size(  # the articles; as many trials follow them
            f"@pytest.mark.{MARKER} on domain {d.name!r}",
            self.settings,
            (
                ("author(s)", len(self.authors)),
                ("topic(s)", len(self.topics)),
                ("perspective(s)", len(self.perspectives)),
                ("article(s) from the marker's articles=", spec.articles),
            ),
        )
        if spec.judge_by == "judge" and self.settings.judge is None:
            raise ConfigError(
                "judge_by='judge' needs a judge model: set 'judge' in llmbias.yaml or pass --llmbias-judge MODEL"
            )
        # trials built so far: a collection tells a topic's trials (TrialsWhenWritten.expect)
        # before it asks them, from the same articles
        self._trials: dict[tuple[Any, ...], tuple[ModelCall, list[str], Any]] = {}

    def article(self, model: Any, topic: Any, perspective: Any, a: int) -> ModelCall:
        messages = article_messages(topic, perspective, self.spec.configuration)
        return ModelCall.build(model, messages, self.settings.generation, sample=a)

    def articles(self, then: Sequence[Any] = ()) -> list[PlannedCall]:
        """Every author's articles, each followed by ``then`` once it is in."""
        return [
            PlannedCall(
                m.alias,
                self.article(m, t, p, a),
                self.domain.name,
                f"{t.id}/{p.id}/{self.spec.configuration}#{a}",
                tuple(then),
            )
            for m in self.authors
            for t in self.topics
            for p in self.perspectives
            for a in range(self.spec.articles)
        ]

    def trial(self, author: Any, topic: Any, texts: Mapping[str, str], t: int) -> tuple[ModelCall, list[str], Any]:
        """Trial ``t``: the chooser's call, the perspectives in the order shown, and the chooser."""
        memo = (author.alias, topic.id, t, *sorted(texts.items()))
        kept = self._trials.get(memo)
        if kept is None:
            kept = self._trials[memo] = self._trial(author, topic, texts, t)
        call, shown, chooser = kept
        return call, list(shown), chooser

    def _trial(self, author: Any, topic: Any, texts: Mapping[str, str], t: int) -> tuple[ModelCall, list[str], Any]:
        order = trial_order(
            len(self.perspectives),
            self.domain.name,
            topic.id,
            author.recorded_as or author.alias,
            self.spec.configuration,
            self.spec.ways,
            t,
        )
        shown = [self.perspectives[i].id for i in order]
        chooser = self.settings.judge if self.spec.judge_by == "judge" else author
        assert chooser is not None  # judge_by="judge" without a judge is refused when the planner is made
        messages = choice_messages(topic, [texts[p] for p in shown], self.spec.ask)
        return (
            ModelCall.build(chooser, messages, self.settings.generation, sample=t, params=CHOICE_PARAMS),
            shown,
            chooser,
        )


class TrialsWhenWritten:
    """The follow-up that plans a topic's trials once its author's articles are all in."""

    def __init__(self, planner: _Planner) -> None:
        self.planner = planner
        self._authors = {m.alias: m for m in planner.authors}
        self._topics = {t.id: t for t in planner.topics}
        self._written: dict[tuple[str, str], dict[tuple[str, int], str]] = {}

    def __call__(self, planned: PlannedCall, response: Response) -> list[PlannedCall]:
        label = planned.question or ""
        if "#" not in label:
            return []
        head, a = label.rsplit("#", 1)
        topic, perspective, _ = head.split("/")
        written = self._written.setdefault((planned.alias, topic), {})
        written[(perspective, int(a))] = response.text
        if len(written) != len(self.planner.perspectives) * self.planner.spec.articles:
            return []
        out = []
        for t in range(self.planner.spec.articles):
            texts = {p: written[(p, t)] for p, _ in written if _ == t}
            call, _, chooser = self.planner.trial(self._authors[planned.alias], self._topics[topic], texts, t)
            out.append(
                PlannedCall(chooser.alias, call, self.planner.domain.name, f"trial {topic} by {planned.alias} {t}")
            )
        return out

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> list[ExpectedCall]:
        """After a topic's first article (per author): its ``articles`` trials, each exact when the
        articles it shows are stored, else sketched with stand-in articles of the articles'
        ``max_tokens``."""
        from pytest_llmbias.clients.pricing import answer_tokens, stand_in_text

        label = planned.question or ""
        if "#" not in label:
            return []
        head, a = label.rsplit("#", 1)
        topic_id, perspective, _ = head.split("/")
        p = self.planner
        if int(a) != 0 or perspective != p.perspectives[0].id:
            return []
        author, topic = self._authors[planned.alias], self._topics[topic_id]
        out = []
        for t in range(p.spec.articles):
            calls = {q.id: p.article(author, topic, q, t) for q in p.perspectives}
            stored = {q: get(c.key) for q, c in calls.items()}
            texts = {
                q: r.text if r is not None else stand_in_text(answer_tokens(calls[q], p.settings.generation.max_tokens))
                for q, r in stored.items()
            }
            call, _, chooser = p.trial(author, topic, texts, t)
            trial = PlannedCall(chooser.alias, call, p.domain.name, f"trial {topic_id} by {planned.alias} {t}")
            if all(r is not None for r in stored.values()):
                out.append(ExpectedCall(trial, "preference trials"))
            else:
                out.append(ExpectedCall.sketch(trial, "preference trials", [c.key for c in calls.values()]))
        return out
