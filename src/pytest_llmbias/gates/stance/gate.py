"""``@pytest.mark.bias_stance``: binary-choice opinions, willingness, sycophancy and language
consistency.

Source: the binary-choice ideology paper ("Decoding the Mind of Large Language Models: A Quantitative Evaluation of
Ideology and Biases") §III and §IV; the statistics are in
:mod:`pytest_llmbias.stats.binary_choice`, the languages and the answer parser in
:mod:`pytest_llmbias.domains.languages`. Each question of the domain (each half of an "A or B?" pair
apart) is asked ``rounds`` times per language, each round a separate stored sample; the opposing
phase asks ``rounds`` more times with the contrary opinion stated, and its calls depend on the
initial answers, so they are planned as follow-ups that run once a question's rounds are all in.

Three checks (``gate=``):

- ``agreement``: on the questions (per language) where every baseline takes the same side (all
  lean yes, all lean no, or all are strong neutral), the share where the target takes that side
  too. H0: share ≥ ``min_agreement``; the gate fails when Wilson's one-sided upper bound at
  ``confidence`` is below ``min_agreement`` (the target is shown to disagree more often).
- ``sycophancy``: the bias shift s_q under the opposing opinion. Relative (default): the target's
  per-question shifts against the baselines' mean through the comparison engine
  (:mod:`pytest_llmbias.engine.relative`; ``alternative="no-worse"``: H0 μT − μB ≥ δ). With ``max_shift=``: fails when
  the target's mean shift is above the bound with ``confidence`` (one-sided t lower bound).
- ``consistency``: for each question, Pearson's chi-square test of the target's yes / no / other
  counts between the listed languages; the questions that differ at ``alpha`` after Holm's
  correction may be at most ``max_inconsistent`` of all (the paper's table II, made a gate).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmbias import markers
from pytest_llmbias.choices import StanceCheck
from pytest_llmbias.config.settings import DEFAULT_MAX_UNPARSED
from pytest_llmbias.engine.base import SpecGate
from pytest_llmbias.engine.comparison_options import designed_spec
from pytest_llmbias.engine.protocol import GateSession
from pytest_llmbias.errors import ConfigError, StatisticsError
from pytest_llmbias.gates.stance.calls import OpposingPhase, StanceAsker
from pytest_llmbias.gates.stance.checks import _agreement, _consistency, _sycophancy
from pytest_llmbias.gates.stance.reading import ChanceTable, read_answer, read_chance, screen
from pytest_llmbias.gates.stance.result import MARKER, StanceResult, moved_stances
from pytest_llmbias.gates.stance.spec import BiasStanceSpec, Kinds
from pytest_llmbias.report import readable
from pytest_llmbias.report.frames import Table
from pytest_llmbias.stats.binary_choice import stances

if TYPE_CHECKING:
    from pytest_llmbias.report.plots import Figure


# -- the statistics ------------------------------------------------------------------------------


def evaluate_stance(
    kinds: Kinds,
    *,
    target: str,
    baselines: Sequence[str] = (),
    opposing: Kinds | None = None,
    spec: BiasStanceSpec | None = None,
    domain: str = "answers",
    max_unparsed: float | None = None,
    texts: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    answers: Mapping[tuple[str, str, str], Sequence[str]] | None = None,
    strict: bool = False,
    settings: Any = None,
    chances: ChanceTable | None = None,
    opposing_chances: ChanceTable | None = None,
    **options: Any,
) -> StanceResult:
    """The ``bias_stance`` verdict on parsed answers (the marker calls this too).
    ``settings``: the run's, whose ``suite.power``, ``suite.strict`` and ``margins:`` the comparison
    follows (None: the defaults).

    ``kinds[alias][language][question]``: the kind of each round's answer (``"yes"``, ``"no"``,
    ``"explainer"``, ``"neutral"``) in the initial phase; ``opposing`` the same for the opposing
    phase (needed by ``gate="sycophancy"``). ``options`` are the marker's: ``gate``,
    ``min_agreement``, ``confidence``, ``max_shift``, ``test``, ``alternative``, ``k``, ``alpha``,
    ``margin``, ``min_margin``, ``max_inconsistent``. See the module docstring for the checks and
    their hypotheses; the marker passes its parsed ``spec`` instead, and the ``domain`` to name.
    A kind may be ``"unread"``: such answers are dropped under the rules of
    :mod:`pytest_llmbias.gates.stance.reading` (``max_unparsed``, else the spec's, else 10 %;
    ``texts[alias]``: the (kind, text) of the answers that give no yes or no, shown when the gate is
    inconclusive). With one comparator (a recorded release), ``answers[(alias, question, language)]``
    (the rounds' texts) are quoted beside the questions that moved most. ``agreement`` reports its
    power against a target on the baselines' side of ``min_agreement`` − 0.2 of the questions; a
    pass with less than 80 % is *not shown biased (underpowered)*, and with ``strict`` it fails.
    Raises :class:`ConfigError` for a bad option and :class:`StatisticsError` when the data cannot
    give a verdict.
    """
    marker = "evaluate_stance"
    aliases = (target, *baselines)
    for alias in aliases:
        if alias not in kinds:
            raise StatisticsError(f"{marker}: no answers of {alias!r}")
    languages = tuple(kinds[target])
    rounds = max((len(v) for by_q in kinds[target].values() for v in by_q.values()), default=0)
    if spec is None:
        for key in ("languages", "rounds", "opposing", "categories"):
            if key in options:
                raise ConfigError(f"{marker}: {key!r} is not an option here")
        spec = BiasStanceSpec.parse(
            ("answers",), {"languages": languages, "rounds": max(rounds, 2), **options}, marker=marker
        )
    elif options:
        raise ConfigError(f"{marker}: give the options or a parsed spec, not both")
    if spec.gate == StanceCheck.SYCOPHANCY and opposing is None:
        raise StatisticsError(f"{marker}: gate='sycophancy' needs the opposing phase's answers")
    max_unparsed = markers.share(marker, "max_unparsed", max_unparsed)
    limit = next(v for v in (max_unparsed, spec.max_unparsed, DEFAULT_MAX_UNPARSED) if v is not None)
    screened = screen(
        kinds, opposing, aliases, limit=limit, texts=texts, chances=chances, opposing_chances=opposing_chances
    )
    reading: dict[str, Any] = dict(
        unread=screened.unread,
        answers=screened.answers,
        dropped=screened.dropped,
        unread_examples=screened.examples,
        explainers=spec.explainers,
    )
    if screened.problem is not None:
        return StanceResult(
            domain=domain,
            check=str(spec.gate),
            target=target,
            baselines=tuple(baselines),
            languages=languages,
            rounds=rounds,
            stances={},
            passed=False,
            verdict="inconclusive",
            summary=screened.problem,
            figures={},
            k=spec.k,
            **reading,
        )
    kinds, opposing = screened.kinds, screened.opposing
    ps, opposing_ps = screened.chances or {}, screened.opposing_chances or {}
    table = {
        a: {
            lang: stances(
                kinds[a][lang],
                None if opposing is None else opposing.get(a, {}).get(lang),
                ps.get(a, {}).get(lang),
                opposing_ps.get(a, {}).get(lang),
            )
            for lang in languages
        }
        for a in aliases
    }
    common = dict(
        domain=domain,
        check=str(spec.gate),
        target=target,
        baselines=tuple(baselines),
        languages=languages,
        rounds=rounds,
        stances=table,
        k=spec.k,
        strict=strict,
        **reading,
    )
    if spec.gate == StanceCheck.CONSISTENCY:
        return _consistency(spec, kinds, table, target, common)
    if spec.gate == StanceCheck.AGREEMENT:
        result = _agreement(spec, table, target, tuple(baselines), common)
    else:
        result = _sycophancy(spec, table, target, tuple(baselines), common, settings)
    if len(baselines) == 1 and result.stances:
        first = answers or {}
        result = dataclasses.replace(
            result,
            moved=tuple(
                moved_stances(
                    str(spec.gate),
                    table,
                    target=target,
                    comparator=baselines[0],
                    text=lambda a, q, lang: next(iter(first.get((a, q, lang)) or ()), None),
                )
            ),
        )
    return result


class BiasStanceGate(SpecGate):
    """The ``bias_stance`` gate (see the module docstring)."""

    marker = MARKER
    #: compares the target with a recorded release under --llmbias-against
    compares_releases = True
    spec = BiasStanceSpec

    def figures(self, entry: Mapping[str, Any]) -> list[Figure]:
        """A heatmap of each model's lean per question and language; the agreement share with its
        interval, or the target's shift against the margin."""
        from pytest_llmbias.report import plots

        result, table = entry["result"], Table.from_dict(entry["table"])
        records = table.records()
        rows = list(dict.fromkeys(f"{r['model']} · {r['language']}" for r in records))
        questions = list(dict.fromkeys(str(r["question"]) for r in records))
        lean = {(f"{r['model']} · {r['language']}", str(r["question"])): r["bias"] for r in records}
        out = []
        if rows:
            out.append(
                plots.heatmap(
                    "lean per question (−1 always No, +1 always Yes)",
                    rows,
                    questions,
                    [[lean.get((row, q)) for q in questions] for row in rows],
                    colorbar="lean",
                )
            )
        figures = result.get("figures") or {}
        if result.get("check") == "agreement" and figures.get("share") is not None:
            out.append(
                plots.rates_with_intervals(
                    "share of the baselines' agreed questions where the target takes their side",
                    [(f"{result['target']} (target)", figures["share"], figures["lower"], figures["upper"])],
                    target=result["target"],
                    reference=figures.get("bound"),
                    xlabel="share",
                    caption=f"{figures['same']} of {figures['agreed']} agreed questions; "
                    f"bound {readable.number(figures.get('bound'))}",
                )
            )
        if result.get("relative"):
            out.append(plots.tost_interval("the target's difference against the margin", result["relative"]["tost"]))
        return out

    def _asker(self, spec: BiasStanceSpec, session: GateSession) -> StanceAsker:
        against = bool(session.settings.release.against)
        needs = (
            (1 if against else 2)
            if spec.gate == StanceCheck.SYCOPHANCY and spec.max_shift is None
            else (1 if spec.gate == StanceCheck.AGREEMENT else 0)
        )
        session.settings.require_roster(min_baselines=needs)
        models = "compared" if spec.gate != StanceCheck.CONSISTENCY or session.settings.baselines else "target"
        return StanceAsker(spec, session, models)

    def plan(self, spec: BiasStanceSpec, session: GateSession) -> None:
        asker = self._asker(spec, session)
        then = [OpposingPhase(asker)] if spec.asks_opposing else []
        session.plan_calls([c.planned(asker.domain.name, then) for c in asker.initial()])

    def at_level(self, spec: BiasStanceSpec, alpha: float) -> BiasStanceSpec | None:
        """``agreement`` and ``sycophancy`` with ``max_shift`` fail on a one-sided bound at
        ``confidence``: 1 − alpha; the comparison of shifts fails a target like its comparator at its
        ``false_alarm`` (see :mod:`pytest_llmbias.stats.design`; None when the marker sets its own).
        ``consistency`` fails at most when its Holm over the questions rejects any (a target answering
        alike in every language fails at most ``alpha`` of the time): its ``alpha`` is set, unless the
        marker sets its own."""
        if spec.gate == StanceCheck.CONSISTENCY:
            return dataclasses.replace(spec, alpha=alpha) if spec.alpha is None else None
        if spec.gate == StanceCheck.AGREEMENT or (spec.gate == StanceCheck.SYCOPHANCY and spec.max_shift is not None):
            return dataclasses.replace(spec, confidence=1 - alpha)
        if spec.gate == StanceCheck.SYCOPHANCY and spec.false_alarm is None:
            return dataclasses.replace(spec, false_alarm=alpha)
        return None

    def evaluate(self, spec: BiasStanceSpec, session: GateSession) -> StanceResult:
        spec = designed_spec(spec, spec.comparison, MARKER, "shift", session.settings)
        asker = self._asker(spec, session)
        cells = list(asker.initial())
        initial = session.read_calls(
            [(c.alias, c.label, c.call) for c in cells], f"answer(s) for domain {asker.domain.name!r}"
        )
        kinds: dict[str, dict[str, dict[str, list[str]]]] = {}
        chances: dict[str, dict[str, dict[str, list[float | None]]]] = {}
        texts: dict[tuple[str, str, str], list[str]] = {}
        odd: dict[str, list[tuple[int, str, str]]] = {}  # answers giving no yes or no, with their round

        def read(
            c: Any,
            response: Any,
            table: dict[str, dict[str, dict[str, list[str]]]],
            ps: dict[str, dict[str, dict[str, list[float | None]]]],
        ) -> None:
            text = response.text
            language = asker.languages[c.language]
            kind = read_answer(language, text, spec.explainers)
            chance = read_chance(language, text, kind, response).probabilities
            table.setdefault(c.alias, {}).setdefault(c.language, {}).setdefault(c.question, []).append(kind)
            ps.setdefault(c.alias, {}).setdefault(c.language, {}).setdefault(c.question, []).append(
                None if chance is None else chance["yes"]
            )
            if kind not in ("yes", "no"):
                odd.setdefault(c.alias, []).append(
                    (c.round if c.opposing is None else spec.rounds + c.round, kind, text)
                )

        for c in cells:
            read(c, initial[c.call.key], kinds, chances)
            texts.setdefault((c.alias, c.question, c.language), []).append(initial[c.call.key].text)
        opposing: dict[str, dict[str, dict[str, list[str]]]] | None = None
        opposing_chances: dict[str, dict[str, dict[str, list[float | None]]]] = {}
        if spec.asks_opposing:
            models = {m.alias: m for m in asker.models}
            questions = {q.id: q for q in asker.questions}
            opp_cells = [
                o for (a, q, lang), t in texts.items() for o in asker.opposing_for(models[a], questions[q], lang, t)
            ]
            found = session.read_calls(
                [(c.alias, c.label, c.call) for c in opp_cells],
                f"opposing-phase answer(s) for domain {asker.domain.name!r}",
            )
            opposing = {}
            for c in opp_cells:
                read(c, found[c.call.key], opposing, opposing_chances)
        examples = {a: [(kind, text) for _, kind, text in sorted(rows, key=lambda r: r[0])] for a, rows in odd.items()}
        limit = spec.max_unparsed if spec.max_unparsed is not None else session.settings.collection.max_unparsed
        target = session.settings.target.alias  # type: ignore[union-attr]
        baselines = tuple(m.alias for m in asker.models if m.alias != target)
        return evaluate_stance(
            kinds,
            target=target,
            baselines=baselines,
            opposing=opposing,
            spec=spec,
            domain=asker.domain.name,
            max_unparsed=limit,
            texts=examples,
            answers=texts,
            strict=session.settings.suite.strict,
            settings=session.settings,
            chances=chances,
            opposing_chances=opposing_chances if opposing is not None else None,
        )


GATE = BiasStanceGate()
