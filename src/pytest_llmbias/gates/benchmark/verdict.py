"""``bias_benchmark``'s verdict at one look: each model's readings checked (too many unread answers
make it inconclusive), turned into per-unit scores (:mod:`.scores`) with the reference harness's
figures (:mod:`.reading`), then the target tested against the absolute bound or, paired by unit,
against its comparators through the comparison engine (discrim-eval one group at a time,
:mod:`.groups`). :mod:`.gate` calls it once, :mod:`.looks` once a look; neither is called back.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmbias.config.settings import DEFAULT_MAX_UNPARSED
from pytest_llmbias.engine.relative import compare
from pytest_llmbias.engine.relative_report import stability_warnings
from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.gates.benchmark.groups import discrim_verdict
from pytest_llmbias.gates.benchmark.reading import _harness, read_by
from pytest_llmbias.gates.benchmark.result import TITLES, BenchmarkResult
from pytest_llmbias.gates.benchmark.scores import (
    METRICS,
    absolute_bound,
    bbq_unit_scores,
    category_intervals,
    unit_categories,
)
from pytest_llmbias.gates.benchmark.spec import BiasBenchmarkSpec, _designed
from pytest_llmbias.report import readable

#: answers that could not be read, quoted in a report
UNREAD_SHOWN = 3


def decide(
    dataset: str,
    asked: Sequence[Mapping[str, Any]],
    answers: Mapping[str, Mapping[str, Sequence[Any]]],
    spec: BiasBenchmarkSpec,
    *,
    target: str,
    baselines: Sequence[str] = (),
    max_unparsed: float | None = None,
    texts: Mapping[str, Sequence[str]] | None = None,
    settings: Any = None,
) -> BenchmarkResult:
    """The verdict on the items ``asked`` (all of one look's items so far) at ``spec``'s level, as
    :func:`~pytest_llmbias.gates.benchmark.gate.evaluate_benchmark` states it for one look. Raises
    :class:`StatisticsError` when the data give no verdict."""
    from pytest_llmbias.domains.benchmarks import item_category, item_key

    metric = spec.metric or METRICS[dataset][0]
    aliases = (target, *baselines)
    # the domain's own functions, bound to the dataset: the parts call down into domains/, not back here
    key = functools.partial(item_key, dataset)
    category = functools.partial(item_category, dataset)
    unread: dict[str, tuple[int, int]] = {}
    for alias in aliases:
        readings = [r for i in asked for r in answers[alias].get(key(i), ())]
        unread[alias] = (sum(r is None for r in readings), len(readings))
    limit = next(v for v in (max_unparsed, spec.max_unparsed, DEFAULT_MAX_UNPARSED) if v is not None)
    common: dict[str, Any] = dict(
        domain=dataset,
        dataset=dataset,
        metric=metric,
        target=target,
        baselines=tuple(baselines),
        convention=spec.convention,
        alpha=spec.level,
        unread=unread,
        read_by={a: read_by({key(i): answers[a].get(key(i), ()) for i in asked}) for a in aliases},
        samples=max((len(v) for v in answers[target].values()), default=1),
        unread_examples=tuple(
            f"{target}: {' '.join(t.split())[:160]!r}" for t in (texts or {}).get(target, ())[:UNREAD_SHOWN]
        ),
    )
    over = [a for a, (n, total) in unread.items() if total and n / total > limit]
    if over or any(total == 0 for _, total in unread.values()):
        who = ", ".join(f"{a} {unread[a][0]} of {unread[a][1]}" for a in over) or "some model answered nothing"
        return BenchmarkResult(
            verdict="inconclusive",
            why=(
                f"too many answers could not be read ({who}; max_unparsed {limit:.0%}): the metric would rest on the "
                "answers that happened to be readable. Raise max_tokens, change the model's prompt format, or raise "
                "max_unparsed"
            ),
            **common,
        )
    harness = {a: _harness(dataset, asked, answers[a], key, spec.convention) for a in aliases}
    options = _designed(spec, metric, settings)
    common["strict"] = options.strict
    if dataset == "discrim_eval":
        return discrim_verdict(spec, asked, answers, category, common | {"harness": harness}, options)
    per_model = {a: bbq_unit_scores(asked, answers[a], metric, key) for a in aliases}
    every = unit_categories(dataset, asked, key, category)
    kept = {u: c for u, c in every.items() if all(u in per_model[a] for a in aliases)}
    if len(kept) < 2:
        raise StatisticsError(
            f"{TITLES[dataset]}: {len(kept)} unit(s) with a readable answer of every model; a verdict needs at least 2"
        )
    scores = {a: {u: per_model[a][u] for u in kept} for a in aliases}
    common.update(scores=scores, categories=kept, harness=harness, dropped=len(every) - len(kept))
    shown = "error" if metric.startswith("accuracy") else metric
    if spec.max_bias is not None:
        bound = absolute_bound([scores[target][u] for u in kept], spec.max_bias, spec.level)
        per_category = category_intervals(scores, kept, target=target, comparators=(), alpha=spec.level)
        n = readable.number
        why = (
            f"the target's mean {shown} {n(bound['mean'])} against max_bias {spec.max_bias:g}: "
            f"{(1 - 2 * spec.level):.0%} CI [{n(bound['low'], brief=True)}, {n(bound['high'], brief=True)}]"
        )
        return BenchmarkResult(verdict=bound["verdict"], why=why, bound=bound, per_category=per_category, **common)
    if not baselines:
        raise StatisticsError(
            f"bias_benchmark compares the target's {metric} with its baselines' (or a recorded "
            "release's): configure one, or give max_bias="
        )
    per_category = category_intervals(scores, kept, target=target, comparators=baselines, alpha=spec.level)
    try:
        relative = compare(metric, scores, target=target, baselines=baselines, categories=kept, options=options)
    except StatisticsError as exc:
        # every unit's difference equal (no spread): the comparison is exact
        diffs = {scores[target][u] - sum(scores[b][u] for b in baselines) / len(baselines) for u in kept}
        diff = next(iter(diffs))
        if len(diffs) != 1:
            raise
        passed = diff < options.margin_for(metric)  # type: ignore[operator]
        return BenchmarkResult(
            verdict="no-worse" if passed else "biased",
            per_category=per_category,
            why=(
                f"the scores leave no spread to test ({exc}); every unit differs by {readable.signed(diff)}, "
                f"{'below' if passed else 'not below'} the margin"
            ),
            **common,
        )
    t = relative.tost
    what = "error" if metric.startswith("accuracy") else metric
    n = readable.number
    why = (
        f"mean {what}: target {n(t.mean_target)}, baselines {n(t.mean_baseline)}; difference "
        f"{readable.signed(t.diff)} against the margin {n(t.margin)} ({len(kept)} units, paired)"
    )
    return BenchmarkResult(
        verdict=relative.verdict,
        why=why,
        relative=relative,
        per_category=per_category,
        warnings=tuple(stability_warnings([relative])),
        **common,
    )
