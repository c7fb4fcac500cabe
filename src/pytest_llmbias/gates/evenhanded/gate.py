"""``@pytest.mark.bias_evenhanded``: does the model serve opposing sides of a question alike?

Source: the published paired-prompt political even-handedness evaluation (``eval_set.csv``, CC
BY 4.0; :mod:`pytest_llmbias.domains.pairs`), or a domain's own ``pairs:``. Each pair asks the same
task for two opposing sides. Every model answers both prompts; once both answers of a pair are in,
the judge sees the two conversations at once and says whether the assistant served both sides
alike, or the first or the second better (:mod:`pytest_llmbias.scoring.pair_judge`), in both
orders (``orders="both"``) or half the pairs in each order (``"half"``), so that a judge that
prefers a position cancels out; that preference is measured and reported. Each answer is also
rated for refusal and for acknowledging opposing perspectives, one judge call each. The figures
(:func:`pytest_llmbias.stats.evenhanded.evaluate_evenhanded`) count pairs: judged alike, refused,
refused on one side only (the refusal gap), acknowledging opposing views.

The verdict on ``metric`` (``evenhandedness``, ``refusal_gap`` or ``opposing``), per pair a 0/1
score, higher worse (not alike; one side refused; no opposing view acknowledged):

- relative (default): the target's per-pair scores against its baselines' or a recorded release's,
  paired by pair, through the comparison engine (:func:`pytest_llmbias.engine.relative.compare`):
  ``alternative="no-worse"``, H0: μT − μB ≥ δ, H1: μT − μB < δ, δ the metric's default margin in
  percentage points (:data:`pytest_llmbias.config.margins.MARGINS`) or ``margin=``; designed for the run's
  false-alarm share and power like every comparison;
- absolute: ``min_rate=`` (evenhandedness, opposing) passes when the target's rate is shown above
  the bound (the lower Wilson bound at ``confidence``), fails when shown below it (the upper bound
  below it), else *underpowered*; ``max_rate=`` (refusal_gap) the other way round.

More than ``max_unparsed`` of a model's judge answers unreadable makes the verdict *inconclusive*,
and so do the pair judges' trust problems: every judge of ``judges:`` makes every judgement, their
probabilities combined; a test-retest agreement below ``judging.min_agreement``, or an anchor pair
(the same refusal on both sides) not judged alike (:mod:`pytest_llmbias.gates.evenhanded.judging`).
With ``looks=K`` the pairs are asked in K batches (:mod:`pytest_llmbias.engine.sequential_gate`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmbias import markers
from pytest_llmbias.choices import Alternative, EquivalenceTest, Reference
from pytest_llmbias.config.settings import DEFAULT_MAX_UNPARSED
from pytest_llmbias.engine.base import SpecGate
from pytest_llmbias.engine.comparison_options import ComparedSpec, ComparisonOptions, designed_spec
from pytest_llmbias.engine.protocol import GateSession
from pytest_llmbias.engine.relative import compare
from pytest_llmbias.engine.relative_report import stability_warnings
from pytest_llmbias.engine.result import UNDERPOWERED, moved_items, quote
from pytest_llmbias.errors import ConfigError, StatisticsError
from pytest_llmbias.gates.evenhanded import judging as ev_judging
from pytest_llmbias.gates.evenhanded.result import MARKER, METRICS, EvenhandedResult, bound_verdict
from pytest_llmbias.planning.collector import ExpectedCall, PlannedCall
from pytest_llmbias.scoring import pair_judge as pj
from pytest_llmbias.store.calls import ModelCall, Response

if TYPE_CHECKING:
    from pytest_llmbias.config.settings import ModelSpec
    from pytest_llmbias.domains.domain import Pair
    from pytest_llmbias.report.plots import Figure
    from pytest_llmbias.stats.evenhanded import EvenhandedFigures


@dataclass(frozen=True)
class EvenhandedSpec(ComparedSpec):
    """``bias_evenhanded`` (see the module docstring)."""

    domain: str
    metric: str = "evenhandedness"
    min_rate: float | None = None
    max_rate: float | None = None
    orders: str = "both"
    confidence: float = 0.95
    rubrics: tuple[tuple[str, str], ...] | None = None
    test: EquivalenceTest = EquivalenceTest.PAIRED
    alternative: Alternative = Alternative.NO_WORSE
    k: float | None = None
    alpha: float | None = None
    margin: float | None = None
    min_margin: float | None = None
    false_alarm: float | None = None
    reference: Reference = Reference.MEAN
    clustered: bool = False
    categories: tuple[str, ...] | None = None
    max_unparsed: float | None = None
    looks: int | None = None
    spending: str | None = None

    @property
    def absolute(self) -> bool:
        return self.min_rate is not None or self.max_rate is not None

    @classmethod
    def parse(cls, a: tuple[Any, ...], kw: Mapping[str, Any], marker: str = MARKER) -> EvenhandedSpec:
        bound = markers.bind(marker, a, kw, [f.name for f in dataclasses.fields(cls)])
        metric = bound.get("metric", "evenhandedness")
        if metric not in METRICS:
            raise ConfigError(f"@pytest.mark.{marker}: 'metric' must be one of {' | '.join(METRICS)}, got {metric!r}")
        orders = bound.get("orders", "both")
        if orders not in pj.ORDERS:
            raise ConfigError(f"@pytest.mark.{marker}: 'orders' must be one of {' | '.join(pj.ORDERS)}, got {orders!r}")
        min_rate, max_rate = (markers.share(marker, k, bound.get(k)) for k in ("min_rate", "max_rate"))
        if min_rate is not None and metric == "refusal_gap":
            raise ConfigError(f"@pytest.mark.{marker}: metric='refusal_gap' is bounded from above: give max_rate=")
        if max_rate is not None and metric != "refusal_gap":
            raise ConfigError(f"@pytest.mark.{marker}: metric={metric!r} is bounded from below: give min_rate=")
        given = bound.get("rubrics")
        if given is not None and (
            not isinstance(given, Mapping)
            or any(k not in pj.BUILTIN or not isinstance(v, str) for k, v in given.items())
        ):
            raise ConfigError(
                f"@pytest.mark.{marker}: 'rubrics' maps any of {', '.join(pj.BUILTIN)} to a rubric "
                f"file's path, got {given!r}"
            )
        comparison = ComparisonOptions.parse(marker, bound, alternative="no-worse")
        return cls(
            domain=bound["domain"],
            metric=metric,
            min_rate=min_rate,
            max_rate=max_rate,
            orders=orders,
            confidence=markers.fraction(marker, "confidence", bound.get("confidence", 0.95)),
            rubrics=None if given is None else tuple(sorted(given.items())),
            **comparison.as_fields(),
            categories=markers.str_tuple(marker, "categories", bound.get("categories")),
            max_unparsed=markers.share(marker, "max_unparsed", bound.get("max_unparsed")),
            **markers.design(marker, bound),
        )


class _Planner:
    """A spec's calls: each model's answers to both prompts of each pair, and the judge's."""

    def __init__(self, spec: EvenhandedSpec, session: GateSession) -> None:
        from pytest_llmbias.planning.request import select_models

        settings = self.settings = session.settings
        self.spec, self.domain = spec, session.domain(spec.domain)
        d = self.domain
        if not d.pairs:
            raise ConfigError(
                f"@pytest.mark.{MARKER}: domain {d.name!r} has no pairs: configure the published file "
                "(domains: {evenhandedness: {path: eval_set.csv}} in llmbias.yaml) or write 'pairs:' in "
                "a domain file"
            )
        asked = {q.id for q in d.questions}
        pairs = [p for p in d.pairs if all(q in asked for q in p.question_ids)]
        if spec.categories is not None:
            known = sorted({p.category for p in d.pairs})
            unknown = [c for c in spec.categories if c not in known]
            if unknown:
                raise ConfigError(
                    f"@pytest.mark.{MARKER}: domain {d.name!r} has no category {unknown[0]!r}; "
                    f"known: {', '.join(known)}"
                )
            pairs = [p for p in pairs if p.category in spec.categories]
        self.pairs: tuple[Pair, ...] = tuple(pairs)
        if settings.judge is None:
            raise ConfigError(
                f"@pytest.mark.{MARKER} needs a judge model: set 'judge' in llmbias.yaml or pass --llmbias-judge MODEL"
            )
        self.judge = settings.judge
        self.panel = settings.panel
        source = getattr(settings, "source", None)
        base = Path(source).parent if source else None
        self.rubrics = pj.rubrics(dict(spec.rubrics or ()), base)
        self.orders = pj.pair_orders([p.id for p in self.pairs], spec.orders)
        self.models = select_models(settings, "target" if spec.absolute else "compared")
        self.by_id = {p.id: p for p in self.pairs}
        self.retest = ev_judging.retest_ids(settings, d, self.models, self.pairs)
        self.anchors = ev_judging.anchor_pairs(d, self.pairs)

    def anchor_calls(self) -> list[PlannedCall]:
        """Each judge's judgements of the anchor pairs (see :mod:`~pytest_llmbias.gates.evenhanded.judging`)."""
        return [
            PlannedCall(j.alias, call, self.domain.name, label)
            for j in self.panel
            for label, call in ev_judging.anchor_calls(j, self.rubrics["pair"], self.anchors)
        ]

    def answer(self, model: Any, pair: Pair, half: int) -> ModelCall:
        return ModelCall.build(model, pair.prompts[half], self.settings.generation, sample=0)

    def answers(self, then: Sequence[Any] = ()) -> list[PlannedCall]:
        return [
            PlannedCall(m.alias, self.answer(m, p, h), self.domain.name, p.question_ids[h], tuple(then))
            for m in self.models
            for p in self.pairs
            for h in (0, 1)
        ]

    def judge_calls(self, alias: str, pair: Pair, texts: Mapping[int, str]) -> list[tuple[ModelSpec, str, ModelCall]]:
        """(judge, label, call) of every judge's calls on ``alias``'s answers of ``pair`` known in
        ``texts`` (half -> answer): each known answer's two ratings, and the pair's orders (and its
        retest's second draw) once both are known."""
        out = []
        for judge in self.panel:
            for h, text in sorted(texts.items()):
                for what in ev_judging.RATINGS:
                    prompt = pj.answer_prompt(self.rubrics[what], pair.prompts[h], text)
                    call = pj.judge_call(judge, prompt, self.rubrics[what])
                    out.append((judge, f"{what}:{alias}:{pair.question_ids[h]}", call))
            if len(texts) == 2:
                for order in self.orders[pair.id]:
                    prompt = pj.pair_prompt(self.rubrics["pair"], pair.prompts, (texts[0], texts[1]), order)
                    call = pj.judge_call(judge, prompt, self.rubrics["pair"])
                    out.append((judge, f"pair:{alias}:{pair.id}:{''.join(order)}", call))
                if f"{alias}:{pair.id}" in self.retest:
                    order = self.orders[pair.id][0]
                    again = ev_judging.retest_calls(judge, self.rubrics["pair"], pair, texts, order)[1]
                    out.append((judge, f"pair:{alias}:{pair.id}:{''.join(order)}#retest", again))
        return out


class JudgeWhenAnswered:
    """The follow-up of each answer: its two ratings at once, and the pair judge's calls once both
    answers of its pair are in."""

    def __init__(self, planner: _Planner) -> None:
        self.planner = planner
        self._texts: dict[tuple[str, str], dict[int, str]] = {}

    def _split(self, planned: PlannedCall) -> tuple[Pair, int] | None:
        pid, _, half = (planned.question or "").rpartition(":")
        pair = self.planner.by_id.get(pid)
        return None if pair is None or half not in ("a", "b") else (pair, "ab".index(half))

    def __call__(self, planned: PlannedCall, response: Response) -> list[PlannedCall]:
        found = self._split(planned)
        if found is None:
            return []
        pair, half = found
        texts = self._texts.setdefault((planned.alias, pair.id), {})
        texts[half] = response.text
        calls = self.planner.judge_calls(planned.alias, pair, {half: response.text})
        if len(texts) == 2:
            calls += [c for c in self.planner.judge_calls(planned.alias, pair, texts) if c[1].startswith("pair:")]
        return [PlannedCall(j.alias, call, self.planner.domain.name, label) for j, label, call in calls]

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> list[ExpectedCall]:
        """After each answer its two ratings; after a pair's first answer the pair judge's calls:
        exact where the answers are stored, else sketched with stand-ins of the answers' length."""
        from pytest_llmbias.clients.pricing import answer_tokens, stand_in_text

        found = self._split(planned)
        if found is None:
            return []
        pair, half = found
        p = self.planner
        model = next(m for m in p.models if m.alias == planned.alias)
        calls = {h: p.answer(model, pair, h) for h in (0, 1)}
        stored = {h: get(c.key) for h, c in calls.items()}
        texts = {
            h: r.text if r is not None else stand_in_text(answer_tokens(calls[h], p.settings.generation.max_tokens))
            for h, r in stored.items()
        }
        out = []
        for judge, label, call in p.judge_calls(planned.alias, pair, texts):
            if label.startswith("pair:") and half != 0:
                continue
            if not label.startswith("pair:") and not label.endswith(pair.question_ids[half]):
                continue
            sources = [calls[h].key for h in ((0, 1) if label.startswith("pair:") else (half,))]
            call_ = PlannedCall(judge.alias, call, p.domain.name, label)
            exact = all(stored[h] is not None for h in ((0, 1) if label.startswith("pair:") else (half,)))
            out.append(
                ExpectedCall(call_, "even-handedness judgements")
                if exact
                else ExpectedCall.sketch(call_, "even-handedness judgements", sources)
            )
        return out


class EvenhandedGate(SpecGate):
    """The ``bias_evenhanded`` gate (see the module docstring)."""

    marker = MARKER
    compares_releases = True
    spec = EvenhandedSpec

    def plan(self, spec: EvenhandedSpec, session: GateSession) -> None:
        session.settings.require_roster(min_baselines=0 if spec.absolute else 1)
        planner = _Planner(spec, session)
        session.plan_calls(planner.anchor_calls())
        session.plan_calls(planner.answers(then=[JudgeWhenAnswered(planner)]))

    def evaluate(self, spec: EvenhandedSpec, session: GateSession) -> EvenhandedResult:
        from pytest_llmbias.stats.evenhanded import evaluate_evenhanded

        session.settings.require_roster(min_baselines=0 if spec.absolute else 1)
        spec = designed_spec(spec, spec.comparison, MARKER, spec.metric, session.settings)
        if spec.absolute and (spec.looks or 1) > 1:
            # each look's interval at a Bonferroni share of 1 - confidence, so that over the looks
            # a target on the bound's right side fails at most as often as with one look
            spec = dataclasses.replace(spec, confidence=1 - (1 - spec.confidence) / (spec.looks or 1))
        p = _Planner(spec, session)
        answer_calls = p.answers()
        found = session.read_calls(
            [(c.alias, c.question or "", c.call) for c in answer_calls],
            f"answer(s) to the pairs of domain {p.domain.name!r}",
        )
        texts: dict[tuple[str, str], dict[int, str]] = {}
        for c in answer_calls:
            pid, _, half = (c.question or "").rpartition(":")
            texts.setdefault((c.alias, pid), {})["ab".index(half)] = found[c.call.key].text
        calls = [
            (judge.alias, label, call)
            for m in p.models
            for pair in p.pairs
            for judge, label, call in p.judge_calls(m.alias, pair, texts[(m.alias, pair.id)])
        ]
        calls += [(c.alias, c.question or "", c.call) for c in p.anchor_calls()]
        ratings = session.read_calls(calls, f"even-handedness judgement(s) for domain {p.domain.name!r}")
        how = session.settings.judging.combine
        readings = {
            m.alias: ev_judging.read_model(
                p.pairs,
                {x.id: texts[(m.alias, x.id)] for x in p.pairs},
                p.panel,
                p.rubrics,
                p.orders,
                ratings,
                None if how is None else str(how),
            )
            for m in p.models
        }
        figures = {
            a: evaluate_evenhanded(p.pairs, r.judgements, confidence=spec.confidence) for a, r in readings.items()
        }
        target = session.settings.target.alias  # type: ignore[union-attr]
        baselines = tuple(m.alias for m in p.models if m.alias != target)
        per_model = {a: len(p.panel) * (4 * len(p.pairs) + sum(len(p.orders[x.id]) for x in p.pairs)) for a in readings}
        limit = next(
            v
            for v in (spec.max_unparsed, session.settings.collection.max_unparsed, DEFAULT_MAX_UNPARSED)
            if v is not None
        )
        reading: dict[str, int] = {}
        for r in readings.values():
            for form, n in r.reading.items():
                reading[form] = reading.get(form, 0) + n
        unread = {a: r.unread for a, r in readings.items()}
        trust = ev_judging.trust(p, texts, ratings, readings, session.settings)
        common: dict[str, Any] = dict(
            domain=p.domain.name,
            target=target,
            baselines=baselines,
            metric=spec.metric,
            figures=figures,
            orders=spec.orders,
            position=ev_judging.position({a: r.orders for a, r in readings.items()}),
            unread={a: (len(v), per_model[a]) for a, v in unread.items()},
            unread_examples=tuple(quote(a, t) for a, v in unread.items() for t in v)[:3],
            reading=reading,
            rubrics={k: r.describe() for k, r in p.rubrics.items()},
            judge=", ".join(j.alias for j in p.panel),
            trust=trust,
        )
        problems = ev_judging.trust_problems(trust)
        over = [a for a, v in unread.items() if len(v) / per_model[a] > limit]
        if over:
            worst = max(over, key=lambda a: len(unread[a]))
            problems.insert(
                0,
                f"{len(unread[worst])} of {per_model[worst]} judge answers on {worst}'s pairs could not be read "
                f"(no option letter), more than max_unparsed {limit:.0%}: use a judge that follows the rubric",
            )
        if problems:
            return EvenhandedResult(verdict="inconclusive", why="; ".join(problems), **common)
        if spec.absolute:
            verdict, why, bound = bound_verdict(spec, figures[target])
            return EvenhandedResult(
                verdict=verdict, why=why, bound=bound, strict=session.settings.suite.strict, **common
            )
        return self._compared(spec, session, p, figures, texts, common)

    @staticmethod
    def _compared(
        spec: EvenhandedSpec,
        session: GateSession,
        p: _Planner,
        figures: Mapping[str, EvenhandedFigures],
        texts: Mapping[tuple[str, str], Mapping[int, str]],
        common: dict[str, Any],
    ) -> EvenhandedResult:
        target, baselines = common["target"], common["baselines"]
        options = spec.comparison.designed(MARKER, session.settings)
        per: dict[str, dict[str, float]] = {}
        for a, f in figures.items():
            per[a] = {
                pair.id: s
                for pair, ps in zip(p.pairs, f.pairs, strict=True)
                if (s := ps.score(spec.metric)) is not None
            }
        kept = {x.id: x.category for x in p.pairs if all(x.id in per[a] for a in per)}
        scores = {a: {q: per[a][q] for q in kept} for a in per}
        try:
            relative = compare(
                spec.metric, scores, target=target, baselines=baselines, categories=kept, options=options
            )
        except StatisticsError as exc:
            diffs = {scores[target][q] - sum(scores[b][q] for b in baselines) / len(baselines) for q in kept}
            if len(diffs) != 1:
                raise
            diff, margin = next(iter(diffs)), options.margin_for(spec.metric)
            ok = margin is not None and diff < margin
            return EvenhandedResult(
                verdict="no-worse" if ok else "worse",
                why=(
                    f"the per-pair scores leave no spread to test ({exc}); every pair differs by {diff:+.2f}, "
                    f"{'below' if ok else 'not below'} the margin"
                ),
                strict=options.strict,
                **common,
            )
        t = relative.tost
        verdict = relative.verdict if relative.verdict == UNDERPOWERED or relative.passed else "worse"
        why = (
            f"share of {spec.metric} failures per pair: target {t.mean_target:.1%}, comparators {t.mean_baseline:.1%}; "
            f"difference {t.diff:+.1%} against the margin {t.margin:.1%} ({len(kept)} pairs, paired)"
        )
        moved: list[dict[str, Any]] = []
        if session.settings.release.against:

            def text(alias: str, pid: str) -> str:
                got = texts.get((alias, pid), {})
                return " | ".join(got.get(h, "")[:180] for h in (0, 1))

            moved = moved_items(spec.metric, relative.scores, target=target, comparators=baselines[:1], text=text)
        return EvenhandedResult(
            verdict=verdict,
            why=why,
            relative=relative,
            moved=tuple(moved),
            strict=options.strict,
            warnings=tuple(stability_warnings([relative])),
            **common,
        )

    def figures(self, entry: Mapping[str, Any]) -> list[Figure]:
        """Each model's even-handedness, refusal, one-sided refusal and opposing-views rates with
        their Wilson intervals; the comparison's interval against the margin."""
        from pytest_llmbias.report import plots

        result = entry["result"]
        rows = [
            (f"{a} · {name}", f[name]["rate"], f[name]["low"], f[name]["high"])
            for a, f in result["figures"].items()
            for name in ("evenhandedness", "refusal", "refusal_gap", "opposing")
            if f[name]["rate"] is not None
        ]
        out = (
            [
                plots.rates_with_intervals(
                    "even-handedness figures", rows, target=result["target"], reference=None, xlabel="share of pairs"
                )
            ]
            if rows
            else []
        )
        if result.get("relative"):
            out.append(plots.tost_interval("the target's difference against the margin", result["relative"]["tost"]))
        return out

    def at_level(self, spec: EvenhandedSpec, alpha: float) -> EvenhandedSpec | None:
        """The comparison fails a target like its comparator at most ``alpha`` of the time; None for
        the absolute bound and for a marker that sets its own ``false_alarm=``."""
        if spec.absolute or spec.false_alarm is not None:
            return None
        return dataclasses.replace(spec, false_alarm=alpha)


GATE = EvenhandedGate()
