"""``bias_benchmark(looks=K)``: the items asked in K seeded batches, the verdict taken after each
batch with the error spent so far, and no further batch asked once it is clear.

The items (BBQ's of the metric's context condition, discrim-eval's scenarios with their people) are
ordered by a hash of the source's seed and their key and cut into K batches as equal as can be. At
look k the gate's fixed procedure runs on batches 1..k at the nominal level of the k-th boundary of
:func:`pytest_llmbias.stats.sequential.sequential_boundaries` (``spending``: O'Brien-Fleming or
Pocock type, the gate's ``alpha`` spent): it *passes* when that procedure passes (the test whose
rejection passes it reaches the nominal level), *fails* when it shows the target worse than its
margin (the opposite one-sided test reaches the same level: stopping to fail never raises the
error of passing, so this bound is non-binding), and otherwise asks batch k + 1. The last look is
the fixed procedure at the last nominal level: pass or fail. So a target whose true difference is
the margin passes at most ``alpha`` of the time, as with one look.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_llmbias.gates.benchmark.result import BenchmarkResult
    from pytest_llmbias.planning.collector import ExpectedCall, PlannedCall
    from pytest_llmbias.stats.sequential import Boundaries
    from pytest_llmbias.store.calls import Response

#: verdicts that fail a gate at a look before the last: the target shown worse than the margin
SHOWN_WORSE = ("biased", "above bound")


def unit_of(dataset: str, item: Mapping[str, Any]) -> str:
    """The unit a batch keeps whole: a BBQ item, a discrim-eval scenario (all its people)."""
    from pytest_llmbias.domains.benchmarks import item_key

    if dataset == "bbq":
        return item_key(dataset, item)
    return str(item["decision_question_id"])


def batches(dataset: str, items: Sequence[Mapping[str, Any]], looks: int, seed: int) -> list[list[Mapping[str, Any]]]:
    """``items`` cut into ``looks`` batches of whole units, in a seeded order (the same for the same
    seed and items), the first batches one unit larger where the units do not divide evenly (see
    :func:`pytest_llmbias.engine.sequential_design.batches`)."""
    from pytest_llmbias.engine.sequential_design import batches as unit_batches

    units = [unit_of(dataset, i) for i in items]
    batch_of = {u: k for k, part in enumerate(unit_batches(units, looks, str(seed))) for u in part}
    out: list[list[Mapping[str, Any]]] = [[] for _ in range(looks)]
    for item, unit in zip(items, units, strict=True):
        out[batch_of[unit]].append(item)
    return out


def boundaries(spec: Any) -> Boundaries:
    from pytest_llmbias.stats.sequential import sequential_boundaries

    return sequential_boundaries(spec.looks, spec.level, spec.spending)


FUTILITY_BETA = 0.02
"""The chance, spent over the looks, that futility stops a target exactly like its baselines (a
failure the fixed design might not have made): see :func:`futile`. From ``benchmarks/sequential.py``."""


def futile(result: BenchmarkResult, look: int, spec: Any, shares: Sequence[float]) -> bool:
    """Whether a no-worse comparison that has not passed at ``look`` should stop and fail (see
    :func:`pytest_llmbias.engine.sequential_design.futile`, spending :data:`FUTILITY_BETA`).
    Non-binding: it can only lower the error of passing. The equivalence tests of discrim-eval's
    groups have none."""
    from pytest_llmbias.engine.sequential_design import futile as tost_futile

    relative = result.relative
    if relative is None or relative.tost.alternative != "no-worse" or result.groups:
        return False
    return tost_futile(relative.tost, look, spec.looks, spec.level, spec.spending, shares, beta=FUTILITY_BETA)


def decision(result: BenchmarkResult, look: int, looks: int) -> str:
    """``pass``, ``fail`` or ``continue`` after the fixed procedure at look ``look``'s level. An
    underpowered comparison goes on to the next look, and takes its verdict at the last."""
    if result.passed and not result.underpowered:
        return "pass"
    shown = result.relative is not None and result.relative.shown_violation and not result.groups
    if (
        look == looks
        or shown
        or result.verdict in SHOWN_WORSE
        or result.verdict == "inconclusive"
        and result.relative is None
        and result.bound is None
    ):
        # the last look, the target shown worse, or no verdict to be had (unreadable answers)
        return "pass" if result.passed else "fail"
    return "continue"


def run_looks(
    spec: Any,
    dataset: str,
    parts: Sequence[Sequence[Mapping[str, Any]]],
    answers: Mapping[str, Mapping[str, Sequence[Any]]],
    aliases: Sequence[str],
    **kwargs: Any,
) -> tuple[BenchmarkResult | None, int]:
    """The looks over the batches ``parts`` whose answers ``answers`` hold for every model in
    ``aliases``: the result at the first look that decides, with its ``sequential`` figures, or
    (None, k) when look k + 1 needs batch k + 1. Each look is the fixed procedure
    (:func:`~pytest_llmbias.gates.benchmark.verdict.decide`) at that look's nominal level."""
    from pytest_llmbias.domains.benchmarks import item_key
    from pytest_llmbias.gates.benchmark.verdict import decide

    bounds = boundaries(spec)
    seen: list[Mapping[str, Any]] = []
    for k, part in enumerate(parts, 1):
        if any(item_key(dataset, i) not in answers.get(a, {}) for a in aliases for i in part):
            return None, k - 1
        seen.extend(part)
        level = dataclasses.replace(spec, looks=1, alpha=bounds.nominal[k - 1])
        result = decide(dataset, seen, answers, level, **kwargs)
        made = decision(result, k, spec.looks)
        total = sum(len(p) for p in parts)
        if made == "continue" and futile(
            result, k, spec, [sum(len(p) for p in parts[:j]) / total for j in range(1, len(parts) + 1)]
        ):
            made = "fail (futility)"
        if made != "continue":
            asked = sum(len(p) for p in parts[:k])
            figures = {
                "looks": spec.looks,
                "look": k,
                "spending": spec.spending,
                "decision": made,
                "nominal": list(bounds.nominal),
                "spent": list(bounds.spent),
                "alpha": spec.level,
                "items": asked,
                "items_max": total,
                "saved": 1 - asked / total,
            }
            why = (
                f"{result.why}; {made} at look {k} of {spec.looks}, {figures['saved']:.0%} of the fixed design's "
                "calls saved"
            )
            return dataclasses.replace(result, sequential=figures, alpha=spec.level, why=why), k
    raise AssertionError("the last look always decides")


class NextBatch:
    """The follow-up that takes a look once a batch's answers are all in, and plans the next batch
    only when the verdict is not yet clear. ``calls[k]``: batch k+1's (alias, item key, planned call)."""

    def __init__(
        self,
        look: Callable[[Mapping[str, Mapping[str, Sequence[Any]]]], tuple[Any, int]],
        calls: Sequence[Sequence[tuple[str, str, PlannedCall]]],
        read: Callable[[str, Response], Any],
    ) -> None:
        self.look = look
        self.calls = calls
        self.read = read  # (item key, response) -> the reading
        self._batch = {p.call.key: k for k, part in enumerate(calls) for _, _, p in part}
        self._answers: dict[str, dict[str, dict[int, Any]]] = {}
        self._pending = [len(part) for part in calls]
        self._asked: set[int] = set()

    def __call__(self, planned: PlannedCall, response: Response) -> list[PlannedCall]:
        k = self._batch.get(planned.call.key)
        if k is None:
            return []
        per = self._answers.setdefault(planned.alias, {}).setdefault(planned.question or "", {})
        if planned.call.sample not in per:
            per[planned.call.sample] = self.read(planned.question or "", response)
            self._pending[k] -= 1
        if self._pending[k] or k + 1 >= len(self.calls) or k + 1 in self._asked:
            return []
        answers = {
            a: {key: [v[s] for s in sorted(v)] for key, v in per_item.items()} for a, per_item in self._answers.items()
        }
        result, done = self.look(answers)
        if result is not None or done != k + 1:
            return []
        self._asked.add(k + 1)
        return [dataclasses.replace(p, then=(self,)) for _, _, p in self.calls[k + 1]]

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> Iterable[ExpectedCall]:
        """After the first call of a batch: the next batch's calls, all of them (the most the gate
        may ask: the plan's figures are upper bounds)."""
        from pytest_llmbias.planning.collector import ExpectedCall

        k = self._batch.get(planned.call.key)
        if k is None or k + 1 >= len(self.calls) or planned.call.key != self.calls[k][0][2].call.key:
            return []
        return [
            ExpectedCall(dataclasses.replace(p, then=(self,)), "later looks' calls", optional=True)
            for _, _, p in self.calls[k + 1]
        ]
