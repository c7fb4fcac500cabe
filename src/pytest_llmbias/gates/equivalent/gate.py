"""``bias_equivalent``: is the target's relative bias on a domain equivalent to the baselines'?

Source: the relative-bias paper ("Relative Bias: A Comparative Framework for Quantifying Bias in
LLMs"), §3.4-3.6. Per question, each model gets a score:

- ``embedding``: its mean cosine distance to the other models' answers (eq. 1), instruction-tuned
  embeddings where the model supports an instruction;
- ``judge``: the judge's 1-10 bias score of its answer (appendix A.1), averaged over samples.

Each method's scores go to the comparison engine (:mod:`pytest_llmbias.engine.relative`): a paired
TOST of the target against the baselines' mean per question by default, the paper's Welch test as
an option, with the margin k × SD of the baseline models' means and its floor. The embedding test
compares deviation scores; the judge test compares raw judge scores (as the paper's tables do),
and reports D_LLM (eq. 3-4) beside it. :func:`evaluate_equivalence` runs the same comparison on
scores a team already has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_llmbias import markers
from pytest_llmbias.choices import Alternative, EquivalenceMethod, EquivalenceTest, Reference
from pytest_llmbias.engine.base import SpecGate
from pytest_llmbias.engine.comparison_options import ComparedSpec, ComparisonOptions
from pytest_llmbias.engine.relative import MethodResult, compare
from pytest_llmbias.engine.relative_report import stability_warnings
from pytest_llmbias.engine.result import moved_items
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.gates.equivalent.result import MARKER, EquivalentResult
from pytest_llmbias.planning.request import ResponseRequest
from pytest_llmbias.report.frames import Table

if TYPE_CHECKING:
    from pytest_llmbias.engine.protocol import GateSession
    from pytest_llmbias.planning.response_set import ResponseSet
    from pytest_llmbias.report.plots import Figure

METHOD_NAMES = ("embedding", "judge")


@dataclass(frozen=True)
class EquivalentSpec(ComparedSpec):
    """``bias_equivalent``: the target's bias scores on ``domain`` are equivalent to (or, with
    ``alternative="no-worse"``, no higher than) the baselines'.

    ``test="paired"`` (default) compares, question by question, the target's score with the
    baselines' mean score on that question; ``"welch"`` is the relative-bias paper's two-sample
    Welch TOST. The margin δ is ``margin`` when given (a number, or one per method), else the
    method's default (:mod:`pytest_llmbias.config.margins`: one judge point, 0.02 on the embedding); with
    ``k`` or ``min_margin`` it is drawn from the data: ``k`` × SD of the baseline models' means,
    never below ``min_margin`` (0 turns the floor off). ``alpha`` is the TOST's (None: 1 − the run's
    ``suite.power``), ``false_alarm`` the rate at which a target like its comparator may fail (None:
    the gate's share of ``suite.alpha``; see :mod:`pytest_llmbias.stats.design`).
    ``method="both"`` needs both scorers to pass. ``max_unparsed`` (default: the run's
    ``collection.max_unparsed``): the share of a model's judge ratings that may stay unreadable; their
    questions are dropped for every model, and above it the gate is inconclusive."""

    domain: str
    method: EquivalenceMethod = EquivalenceMethod.EMBEDDING
    test: EquivalenceTest = EquivalenceTest.PAIRED
    alternative: Alternative | None = None
    k: float | None = None
    alpha: float | None = None
    margin: float | Mapping[str, float] | None = field(default=None, hash=False)
    min_margin: float | Mapping[str, float] | None = field(default=None, hash=False)
    false_alarm: float | None = None
    reference: Reference = Reference.MEAN
    clustered: bool = False
    categories: tuple[str, ...] | None = None
    samples: int | None = None
    max_unparsed: float | None = None
    looks: int | None = None
    spending: str | None = None

    @property
    def methods(self) -> tuple[str, ...]:
        return METHOD_NAMES if self.method == EquivalenceMethod.BOTH else (str(self.method),)

    def responses(self) -> ResponseRequest:
        """The responses this gate needs: every roster model on the selected questions."""
        return ResponseRequest(domain=self.domain, models="all", categories=self.categories, samples=self.samples)

    @classmethod
    def parse(cls, a: tuple[Any, ...], kw: Mapping[str, Any], marker: str = MARKER) -> EquivalentSpec:
        bound = markers.bind(marker, a, kw, [f.name for f in dataclasses.fields(cls)])
        comparison = ComparisonOptions.parse(marker, bound, alternative=None, methods=METHOD_NAMES)
        return cls(
            domain=bound["domain"],
            method=markers.choice(marker, "method", bound.get("method", "embedding"), EquivalenceMethod),
            **comparison.as_fields(),
            categories=markers.str_tuple(marker, "categories", bound.get("categories")),
            samples=markers.positive_int(marker, "samples", bound.get("samples")),
            max_unparsed=markers.share(marker, "max_unparsed", bound.get("max_unparsed")),
            **markers.design(marker, bound),
        )


def method_result(
    method: str,
    scores: Mapping[str, Mapping[str, float | Sequence[float]]],
    *,
    target: str,
    baselines: Sequence[str],
    categories: Mapping[str, str] | None,
    options: ComparisonOptions,
    where: str = MARKER,
) -> MethodResult:
    """One method's comparison of ``scores`` (alias -> question id -> a score, or per-sample
    scores, averaged), with D_LLM beside it when the scores are on the judge's 1-10 scale. Raises
    :class:`StatisticsError` when the data cannot give a verdict."""
    import statistics

    from pytest_llmbias.errors import StatisticsError

    if not baselines:
        raise StatisticsError(f"{where}: a comparator is needed: at least 2 baselines, or a recorded release")
    if target in baselines:
        raise StatisticsError(f"{where}: the target {target!r} is also a baseline")
    means: dict[str, dict[str, float]] = {}
    for alias in (target, *baselines):
        if alias not in scores:
            raise StatisticsError(f"{where}: no scores for {alias!r}; scores has {', '.join(map(repr, scores))}")
        means[alias] = {}
        for q, value in scores[alias].items():
            values = [value] if not isinstance(value, Sequence) else list(value)
            if not values:
                raise StatisticsError(f"{where}: {alias!r} has no score for question {q!r}")
            means[alias][q] = float(statistics.fmean(float(v) for v in values))
    deviation = None
    if method == "judge":
        from pytest_llmbias.errors import JudgeDataError
        from pytest_llmbias.scoring.judge import relative_judge_deviation

        try:  # D_LLM is reported beside the test when the scores are on the judge's 1-10 scale
            deviation = relative_judge_deviation({a: means[a] for a in (target, *baselines)})
        except JudgeDataError:
            deviation = None
    question_categories = dict(categories) if categories is not None else {q: "all" for q in means[target]}
    return compare(
        method,
        means,
        target=target,
        baselines=baselines,
        categories=question_categories,
        options=options,
        deviation=deviation,
    )


def evaluate_equivalence(
    scores: Mapping[str, Mapping[str, float | Sequence[float]]],
    *,
    target: str,
    baselines: Sequence[str],
    method: str = "judge",
    categories: Mapping[str, str] | None = None,
    **options: Any,
) -> EquivalentResult:
    """The ``bias_equivalent`` verdict on scores a team already has (the marker runs the same
    comparison).

    ``scores`` maps each alias to question id -> a score, or a list of per-sample scores (averaged).
    ``method`` names the scale whose defaults apply (``"judge"`` or ``"embedding"``); a higher
    score means more bias on both. ``categories`` maps question id -> category for the report's
    per-category table (default: every question of the target, one category). ``options`` are the
    marker's keyword arguments with the same defaults and checks: ``test``, ``alternative``, ``k``,
    ``alpha``, ``margin``, ``min_margin``.

    H0 (two-sided): |μT − μB| ≥ δ; H1: |μT − μB| < δ; with ``alternative="no-worse"``, H0: μT − μB
    ≥ δ; H1: μT − μB < δ. Source: the relative-bias paper, §3.6, paired on the shared questions by
    default. Raises :class:`ConfigError` for a bad option and :class:`StatisticsError` when the
    data cannot give a verdict (too few baselines or questions, a missing score, zero variance).
    """
    where = "evaluate_equivalence"
    for key in options:
        if key in ("domain", "categories", "samples", "method"):
            raise ConfigError(f"{where}: {key!r} is not an option here; options: {', '.join(ComparisonOptions.KEYS)}")
        if key not in ComparisonOptions.KEYS:
            raise ConfigError(f"{where}: unknown argument {key!r}; accepted: {', '.join(ComparisonOptions.KEYS)}")
    if method not in METHOD_NAMES:
        raise ConfigError(f"{where}: 'method' must be one of {' | '.join(METHOD_NAMES)}, got {method!r}")
    if categories is not None and not isinstance(categories, Mapping):
        raise ConfigError(f"{where}: 'categories' maps each question id to its category, got {categories!r}")
    comparison = ComparisonOptions.parse(where, options, alternative="equivalent", methods=METHOD_NAMES).designed(
        MARKER
    )
    baselines = tuple(baselines)
    result = method_result(
        method, scores, target=target, baselines=baselines, categories=categories, options=comparison, where=where
    )
    return EquivalentResult(
        domain="scores",
        target=target,
        baselines=baselines,
        n_questions=len(result.categories),
        samples=1,
        k=comparison.k,
        alpha=comparison.alpha,
        methods=(result,),
        warnings=tuple(stability_warnings([result])),
    )


class EquivalentGate(SpecGate):
    """The ``bias_equivalent`` gate (see the module docstring)."""

    marker = MARKER
    spec = EquivalentSpec
    #: compares the target with a recorded release under --llmbias-against
    compares_releases = True

    def at_level(self, spec: EquivalentSpec, alpha: float) -> EquivalentSpec | None:
        """Each method may fail a target like its comparator at most ``alpha`` / the methods (see
        :mod:`pytest_llmbias.stats.design`); None when the marker sets its own ``false_alarm=``."""
        if spec.false_alarm is not None:
            return None
        return dataclasses.replace(spec, false_alarm=alpha / len(spec.methods))

    def figures(self, entry: Mapping[str, Any]) -> list[Figure]:
        """Per method: the mean score per category of each model, the distribution of per-question
        scores per model, and the target's difference against the margin (from the JSON entry)."""
        from pytest_llmbias.report import plots

        result, table = entry["result"], Table.from_dict(entry["table"])
        target, out = result["target"], []
        for m in result["methods"]:
            name, categories, models = m["method"], list(m["category_means"]), list(m["model_means"])
            out.append(
                plots.grouped_bars(
                    f"{name}: mean score per category",
                    categories,
                    {a: [m["category_means"][c].get(a) for c in categories] for a in models},
                    target=target,
                    ylabel="mean score",
                )
            )
            out.append(
                plots.distributions(
                    f"{name}: per-question scores",
                    plots.by_model(table, "score", where={"method": name}),
                    target=target,
                    ylabel="score",
                )
            )
            out.append(plots.tost_interval(f"{name}: the target's difference against the margin", m["tost"]))
        return out

    def plan(self, spec: EquivalentSpec, session: GateSession) -> None:
        """Every roster model's answers; the judge's rating of each as soon as it is in; the
        embedding of each in the background."""
        settings = session.settings
        settings.require_roster(min_baselines=1 if settings.release.against else 2)
        then = []
        domain = session.domain(spec.domain)
        if "judge" in spec.methods:
            from pytest_llmbias.engine.judging import plan_judging

            then.extend(plan_judging(session, spec.responses(), domain))
        if "embedding" in spec.methods:
            then.append(session.prefetch_embeddings(self._instruction(session, domain.instruction)))
        session.plan(spec.responses(), then)

    @staticmethod
    def _instruction(session: GateSession, domain_instruction: str | None) -> str | None:
        return session.settings.embedding.instruction or domain_instruction

    def evaluate(self, spec: EquivalentSpec, session: GateSession) -> EquivalentResult:
        """Score every answer by each method, then compare the target with its baselines per method."""
        responses = session.responses(spec.responses())
        target = responses.target
        assert target is not None
        categories = {q.id: q.category for q in responses.questions}
        methods: list[MethodResult] = []
        warnings: list[str] = []
        against = bool(session.settings.release.against)
        comparing = {m.alias for m in session.settings.comparators}
        comparators = tuple(a for a in responses.baselines if a in comparing)
        from pytest_llmbias.engine.judging import JudgeScores, judge_scores

        judged = JudgeScores({})
        for method in spec.methods:
            if method == "embedding":
                scores = self.embedding_scores(session, responses)
                if against:
                    scores = {a: v for a, v in scores.items() if a == target or a in comparing}
            else:
                limit = spec.max_unparsed if spec.max_unparsed is not None else session.settings.collection.max_unparsed
                judged = judge_scores(session, responses, max_unparsed=limit)
                scores = judged.scores
                for judge in session.settings.panel:
                    if any(m.model == judge.model for m in session.settings.roster):
                        warnings.append(
                            f"judge: the judge {judge.model} is also in the roster; a judge may favour its own answers"
                        )
                if judged.problems:
                    continue
            kept = {q: c for q, c in categories.items() if q not in judged.dropped} if method == "judge" else categories
            options = spec.comparison.designed(MARKER, session.settings).resolved(against)
            methods.append(
                method_result(method, scores, target=target, baselines=comparators, categories=kept, options=options)
            )
            if against and methods[-1].tost.se == 0 and methods[-1].tost.diff == 0:
                warnings.append(
                    f"{method}: the target scores exactly as {comparators[0]} on every question: the same deployment, "
                    "or its answers served from the store (a new release behind an unchanged model name needs "
                    "--llmbias-cache refresh)"
                )
        return EquivalentResult(
            domain=responses.domain.name,
            target=target,
            baselines=comparators,
            n_questions=responses.n_questions,
            samples=responses.samples,
            k=spec.k,
            alpha=spec.alpha,
            methods=tuple(methods),
            warnings=tuple(stability_warnings(methods) + warnings),
            judge_reading=judged.reading,
            problems=judged.problems,
            judging=dict(judged.trust),
            dropped=judged.dropped,
            unread_examples=judged.examples,
            moved=tuple(
                item
                for m in methods
                for item in moved_items(
                    m.method,
                    m.scores,
                    target=target,
                    comparators=comparators,
                    text=lambda a, q: responses.text(a, q, 0) if a in responses.aliases else None,
                )
            ),
        )

    def embedding_scores(self, session: GateSession, responses: ResponseSet) -> dict[str, dict[str, float]]:
        """Alias -> question id -> mean cosine deviation from the other models (eq. 1); against a
        recorded release, the target's and the release's each from the configured baselines."""
        from pytest_llmbias.errors import ConfigError
        from pytest_llmbias.scoring.embedding import embedding_deviations

        reference = None
        if session.settings.release.against:
            reference = {m.alias for m in session.settings.context}
            if not reference:
                raise ConfigError(
                    "method='embedding' against a release measures how far the target and the release each are "
                    "from the baselines' answers: configure baselines beside --llmbias-against, or use method='judge'"
                )
        texts = {
            (alias, q.id): [responses.text(alias, q.id, s) for s in range(responses.samples)]
            for alias in responses.aliases
            for q in responses.questions
        }
        instruction = self._instruction(session, responses.domain.instruction)
        return embedding_deviations(session.embedding_scorer(), texts, instruction, reference)


GATE = EquivalentGate()
