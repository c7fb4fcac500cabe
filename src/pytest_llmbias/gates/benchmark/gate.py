"""``@pytest.mark.bias_benchmark``: the public bias benchmarks teams already run, as gates.

``bias_benchmark("bbq")`` asks the items of BBQ (the Bias Benchmark for QA, Parrish et al. 2022)
as three-way multiple choices; ``bias_benchmark("discrim_eval")`` asks discrim-eval's decisions
about people (Tamkin et al. 2023) for yes or no. Where the data are is the settings file's
``domains: {bbq: ..., discrim_eval: ...}`` (:mod:`pytest_llmbias.config.benchmark_sources`); the items
are loaded, checked and subset by :mod:`pytest_llmbias.domains.benchmarks`.

Each model's answers are read (strictly, else tolerantly; an unreadable answer is counted and shown,
never guessed), reported with the reference harness's figures (lm-evaluation-harness's or HELM's for
BBQ, :func:`pytest_llmbias.stats.bbq.evaluate_bbq`; :func:`pytest_llmbias.stats.discrim.evaluate_discrim`),
and turned into one score per unit (:mod:`pytest_llmbias.gates.benchmark.scores`). Then:

- relative (default): the target's per-unit scores against its baselines' (or a recorded
  release's), paired by unit, through the comparison engine. ``alternative="no-worse"``: H0:
  μT − μB ≥ δ; H1: μT − μB < δ, δ the metric's default margin (:data:`DEFAULT_MARGINS`, the run's
  ``margins:``) or ``margin=``. Designed like every comparison (:mod:`pytest_llmbias.stats.design`):
  the TOST at ``alpha`` (default 1 − ``suite.power``) passes; a target shown off its comparator at
  the gate's false-alarm share fails; otherwise *underpowered*. discrim-eval: a two-sided test per
  group, the share split among the groups;
- absolute (``max_bias=``): H0: the target's mean score ≥ max_bias; H1: below it (one-sided t test);
  the gate fails unless the target is shown below the bound.

A model whose share of unread answers exceeds ``max_unparsed`` makes the verdict *inconclusive*.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmbias import markers
from pytest_llmbias.engine.base import SpecGate
from pytest_llmbias.engine.protocol import GateSession
from pytest_llmbias.errors import ConfigError, StatisticsError
from pytest_llmbias.gates.benchmark.reading import _prompter, _reader
from pytest_llmbias.gates.benchmark.result import MARKER, TITLES, BenchmarkResult
from pytest_llmbias.gates.benchmark.scores import METRICS, condition_of
from pytest_llmbias.gates.benchmark.spec import BiasBenchmarkSpec
from pytest_llmbias.gates.benchmark.verdict import decide

if TYPE_CHECKING:
    from pytest_llmbias.domains.benchmarks import BenchmarkItems
    from pytest_llmbias.report.plots import Figure


def evaluate_benchmark(
    dataset: str,
    items: Sequence[Mapping[str, Any]],
    answers: Mapping[str, Mapping[str, Sequence[Any]]],
    *,
    target: str,
    baselines: Sequence[str] = (),
    spec: BiasBenchmarkSpec | None = None,
    max_unparsed: float | None = None,
    texts: Mapping[str, Sequence[str]] | None = None,
    seed: int = 0,
    settings: Any = None,
    **arguments: Any,
) -> BenchmarkResult:
    """The ``bias_benchmark`` verdict on read answers (the marker calls this too).

    ``items``: the records as published (BBQ's or discrim-eval's); ``answers[alias][key]``: each
    sample's reading of the item named ``key`` (:func:`pytest_llmbias.domains.benchmarks.item_key`):
    BBQ the chosen option (0-2), discrim-eval True for yes and False for no; None where the answer
    could not be read. ``arguments`` are the marker's (``metric``, ``max_bias``, ``alternative``,
    ``test``, ``alpha``, ``margin``, ``min_margin``, ``convention``) or its parsed ``spec``.
    ``texts[alias]``: answers that could not be read, quoted in the report. With ``looks`` > 1 the
    items are cut into that many batches in the order ``seed`` gives, and the verdict is taken look
    by look (:mod:`pytest_llmbias.gates.benchmark.looks`). See the module docstring for the
    hypotheses. ``settings``: the run's, whose ``suite.power``, ``suite.strict`` and ``margins:``
    the comparison follows (None: the defaults). The comparison fails a target when it is shown off
    its comparator at the gate's ``false_alarm`` share, passes when the TOST shows it within the
    margin, and is otherwise *underpowered* (a pass, which ``suite.strict`` fails). Raises
    :class:`StatisticsError` when the data give no verdict.
    """
    if spec is None:
        spec = BiasBenchmarkSpec.parse((dataset,), arguments, marker="evaluate_benchmark")
    elif arguments:
        raise ConfigError("evaluate_benchmark: give the options or a parsed spec, not both")
    spec = markers.with_design(spec, 1, "obrien-fleming")
    assert spec.looks is not None  # filled in by the run's design (markers.with_design)
    metric = spec.metric or METRICS[dataset][0]
    aliases = (target, *baselines)
    for alias in aliases:
        if alias not in answers:
            raise StatisticsError(f"evaluate_benchmark: no answers of {alias!r}")
    condition = condition_of(metric)
    asked = [i for i in items if condition is None or i["context_condition"] == condition]
    if spec.looks > 1:
        from pytest_llmbias.gates.benchmark.looks import batches, run_looks

        result, done = run_looks(
            spec,
            dataset,
            batches(dataset, asked, spec.looks, seed),
            answers,
            aliases,
            target=target,
            baselines=baselines,
            max_unparsed=max_unparsed,
            texts=texts,
            settings=settings,
        )
        if result is None:
            raise StatisticsError(
                f"evaluate_benchmark: look {done + 1} of {spec.looks} needs the answers to batch {done + 1}"
            )
        return result

    return decide(
        dataset,
        asked,
        answers,
        spec,
        target=target,
        baselines=baselines,
        max_unparsed=max_unparsed,
        texts=texts,
        settings=settings,
    )


class BiasBenchmarkGate(SpecGate):
    """The ``bias_benchmark`` gate (see the module docstring)."""

    marker = MARKER
    #: compares the target with a recorded release under --llmbias-against
    compares_releases = True
    spec = BiasBenchmarkSpec
    #: it takes its looks over the dataset's items itself (:mod:`pytest_llmbias.gates.benchmark.looks`)
    takes_looks = True

    def _items(self, spec: BiasBenchmarkSpec, session: GateSession) -> tuple[BenchmarkItems, list[Mapping[str, Any]]]:
        from pytest_llmbias.domains.benchmarks import load_benchmark

        source = session.settings.domains.benchmark(spec.domain)
        if source is None:
            where = f" in {session.settings.source}" if session.settings.source else ""
            raise ConfigError(
                f"@pytest.mark.{MARKER}({spec.domain!r}): no {TITLES[spec.domain]} data configured{where}: add "
                f"'domains: {{{spec.domain}: {{path: <your copy>}}}}' (or hf: <dataset name>) to llmbias.yaml; the "
                "data "
                "are not shipped with the plugin"
            )
        loaded = load_benchmark(source)
        condition = condition_of(spec.metric or METRICS[spec.domain][0])
        items = [i for i in loaded.select(spec.categories) if condition is None or i["context_condition"] == condition]
        if not items:
            raise ConfigError(
                f"@pytest.mark.{MARKER}({spec.domain!r}): no item of the loaded subset is "
                f"{condition}: raise the subset's limit"
            )
        if session.settings.release.against:
            items = self._recorded(spec, session, items)
        return loaded, items

    @staticmethod
    def _recorded(
        spec: BiasBenchmarkSpec, session: GateSession, items: list[Mapping[str, Any]]
    ) -> list[Mapping[str, Any]]:
        """The items the recorded release was asked, unchanged since (a comparison is paired);
        ConfigError when it was asked none of them."""
        from pytest_llmbias.domains.benchmarks import item_hash, item_key
        from pytest_llmbias.releases.release import Release

        release = Release.load(session.settings.release.against, session.settings.release.dir)  # type: ignore[arg-type]
        recorded = (release.manifest.get("domains") or {}).get(spec.domain) or {}
        kept = [i for i in items if recorded.get(item_key(spec.domain, i)) == item_hash(i)]
        if not kept:
            raise ConfigError(
                f"@pytest.mark.{MARKER}({spec.domain!r}): release {release.name!r} was asked none of "
                f"these {TITLES[spec.domain]} items (record it with the same data, categories, limit and "
                "seed)"
            )
        return kept

    def _calls(
        self, spec: BiasBenchmarkSpec, session: GateSession
    ) -> tuple[BenchmarkItems, list[Mapping[str, Any]], list[tuple[str, str, Any]]]:
        from pytest_llmbias.planning.request import select_models
        from pytest_llmbias.scoring.option_logprobs import choice_call

        loaded, items = self._items(spec, session)
        prompt = _prompter(spec.domain)
        samples = spec.samples or session.settings.generation.samples
        calls = []
        for model in select_models(session.settings, "compared" if spec.max_bias is None else "target"):
            for item in items:
                text = prompt(item)
                for r in range(samples):
                    calls.append(
                        (model.alias, loaded.key(item), choice_call(model, text, session.settings.generation, sample=r))
                    )
        return loaded, items, calls

    def plan(self, spec: BiasBenchmarkSpec, session: GateSession) -> None:
        from pytest_llmbias.planning.collector import PlannedCall

        session.settings.require_roster(min_baselines=0 if spec.max_bias is not None else 1)
        loaded, items, calls = self._calls(spec, session)
        if spec.looks == 1:
            session.plan_calls([PlannedCall(alias, call, spec.domain, label) for alias, label, call in calls])
            return
        from pytest_llmbias.gates.benchmark.looks import NextBatch

        parts = self._parts(spec, session, loaded, items, calls)
        planned = [[(a, label, PlannedCall(a, call, spec.domain, label)) for a, label, call in part] for part in parts]
        by_key = {loaded.key(i): i for i in items}
        read = _reader(spec.domain)
        follow = NextBatch(
            lambda answers: self._look(spec, session, loaded, items, answers),
            planned,
            lambda label, response: read(response, by_key[label]),
        )
        session.plan_calls([dataclasses.replace(p, then=(follow,)) for _, _, p in planned[0]])

    def _parts(
        self,
        spec: BiasBenchmarkSpec,
        session: GateSession,
        loaded: BenchmarkItems,
        items: list[Mapping[str, Any]],
        calls: list[tuple[str, str, Any]],
    ) -> list[list[tuple[str, str, Any]]]:
        """The calls of each batch (see :func:`~pytest_llmbias.gates.benchmark.looks.batches`)."""
        from pytest_llmbias.gates.benchmark.looks import batches

        assert spec.looks is not None  # filled in by the run's design (markers.with_design)

        parts = batches(spec.domain, items, spec.looks, loaded.source.seed)
        batch_of = {loaded.key(i): k for k, part in enumerate(parts) for i in part}
        out: list[list[tuple[str, str, Any]]] = [[] for _ in parts]
        for alias, label, call in calls:
            out[batch_of[label]].append((alias, label, call))
        return out

    def _look(
        self,
        spec: BiasBenchmarkSpec,
        session: GateSession,
        loaded: BenchmarkItems,
        items: list[Mapping[str, Any]],
        answers: Mapping[str, Mapping[str, Sequence[Any]]],
        texts: Mapping[str, Sequence[str]] | None = None,
    ) -> tuple[BenchmarkResult | None, int]:
        """The looks the answers so far allow (see :func:`~pytest_llmbias.gates.benchmark.looks.run_looks`)."""
        from pytest_llmbias.gates.benchmark.looks import batches, run_looks

        assert spec.looks is not None  # filled in by the run's design (markers.with_design)
        roles = self._roles(spec, session)
        return run_looks(
            spec,
            spec.domain,
            batches(spec.domain, items, spec.looks, loaded.source.seed),
            answers,
            (roles["target"], *roles["baselines"]),
            texts=texts,
            settings=session.settings,
            **roles,
        )

    @staticmethod
    def _roles(spec: BiasBenchmarkSpec, session: GateSession) -> dict[str, Any]:
        """``evaluate_benchmark``'s ``target``, ``baselines`` (the comparators; none under
        ``max_bias``) and ``max_unparsed`` (the marker's, else the run's)."""
        settings = session.settings
        return {
            "target": settings.target.alias,  # type: ignore[union-attr]
            "baselines": () if spec.max_bias is not None else tuple(m.alias for m in settings.comparators),
            "max_unparsed": spec.max_unparsed if spec.max_unparsed is not None else settings.collection.max_unparsed,
        }

    def evaluate(self, spec: BiasBenchmarkSpec, session: GateSession) -> BenchmarkResult:
        session.settings.require_roster(min_baselines=0 if spec.max_bias is not None else 1)
        assert spec.looks is not None  # filled in by the run's design (markers.with_design)
        loaded, items, calls = self._calls(spec, session)
        by_key = {loaded.key(i): i for i in items}
        reader = _reader(spec.domain)
        answers: dict[str, dict[str, list[Any]]] = {}
        texts: dict[str, list[str]] = {}
        # one batch at a time: a batch the looks did not need was never asked
        parts = [calls] if spec.looks == 1 else self._parts(spec, session, loaded, items, calls)
        for part in parts:
            found = session.read_calls(part, f"answer(s) to {TITLES[spec.domain]} items")
            for alias, label, call in part:
                reading = reader(found[call.key], by_key[label])
                answers.setdefault(alias, {}).setdefault(label, []).append(reading)
                if reading is None:
                    texts.setdefault(alias, []).append(found[call.key].text)
            if spec.looks > 1:
                result, _ = self._look(spec, session, loaded, items, answers, texts)
                if result is not None:
                    break
        if spec.looks == 1:
            result = evaluate_benchmark(
                spec.domain,
                items,
                answers,
                spec=spec,
                texts=texts,
                settings=session.settings,
                **self._roles(spec, session),
            )
        assert result is not None  # the last look decides: every batch is read by then
        if loaded.notices:
            result = dataclasses.replace(result, warnings=(*result.warnings, *loaded.notices))
        return result

    def figures(self, entry: Mapping[str, Any]) -> list[Figure]:
        """Per category, the target's difference from its baselines (or its value) with its
        interval; the comparison's interval against the margin."""
        from pytest_llmbias.report import plots

        result = entry["result"]
        per = result.get("per_category") or {}
        rows = [
            (c, v.get("difference", v.get("value")), v.get("low"), v.get("high"))
            for c, v in per.items()
            if v.get("low") is not None
        ]
        out = []
        if rows:
            compared = any("difference" in v for v in per.values())
            out.append(
                plots.rates_with_intervals(
                    f"{result['metric']} per category" + (" (target - baselines)" if compared else ""),
                    rows,
                    target=None,
                    reference=0.0 if compared else (result.get("bound") or {}).get("bound"),
                    xlabel=result["metric"],
                    caption=f"{int(round((1 - 2 * result.get('alpha', 0.05)) * 100))}% t intervals"
                    " over the category's units",
                )
            )
        if result.get("relative"):
            out.append(plots.tost_interval("the target's difference against the margin", result["relative"]["tost"]))
        return out

    def at_level(self, spec: BiasBenchmarkSpec, alpha: float) -> BiasBenchmarkSpec | None:
        """The comparison fails a target like its comparator at most ``alpha`` of the time (see
        :mod:`pytest_llmbias.stats.design`); None for the absolute bound (``max_bias=``: it passes only
        on evidence) and for a marker that sets its own ``false_alarm=``."""
        if spec.max_bias is not None or spec.false_alarm is not None:
            return None
        return dataclasses.replace(spec, false_alarm=alpha)


GATE = BiasBenchmarkGate()
