"""More samples for a comparison that cannot decide yet (``collection.max_samples``).

A comparison is *underpowered* when its answers show neither a pass (within the margin at
1 − ``suite.power``) nor a regression (off the comparator at its false-alarm level): see
:mod:`pytest_llmbias.stats.design`. Where the run allows more samples of each item than the gate
asks (``collection.max_samples`` above its ``samples``), such a gate asks one more sample of every
item of every model it compares (independent draws: sample i is asked with ``seed + i``) and decides
again, look after look, until it is decisive or has ``max_samples``; a gate decisive at its first
look asks nothing more. The session runs these rounds after each collection, as it does the looks
over items (:meth:`pytest_llmbias.session.BiasSession.add_round`); the evaluation takes the same
looks on the stored answers, so a warm re-run reaches the same verdict with no call.

Both error rates hold over the looks by Bonferroni's inequality: with L = ``max_samples`` −
``samples`` + 1 possible looks, each look fails a good target at its false-alarm level / L and
passes a target at the margin at its TOST alpha (1 − power) / L, so over all the looks a good
target fails at most the level and one at the margin passes at most 1 − power, however the looks
depend on each other. It costs a gate that decides at its first look some power; the plan shows
the sizing each gate needs (:mod:`pytest_llmbias.engine.sizing`).

The gates that average their items over samples take part: ``bias_equivalent`` and ``bias_index``
with one look over items (a gate with ``looks`` > 1 spends its error over its batches instead).
A recorded release is never asked again, so a run that records one (``--llmbias-record-release``)
asks and records ``max_samples`` of every item of these gates after its first look, decided or
not: a later comparison with it can then take every look. Against a record with fewer samples, L
counts only the looks it holds (the most samples of one of the domain's items that it holds, read
once per record): against a record of one sample per item the gate takes one look at its full
level, against one of 3 at most 3 looks. A run that compares with a release while recording one
keeps L at ``max_samples``, so that its own record holds every sample.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_llmbias.errors import LLMBiasError, MissingResponsesError

#: the gates that ask more samples of an underpowered comparison
EXTENDS = ("bias_equivalent", "bias_index")


def looks(gate: Any, spec: Any, session: Any) -> range | None:
    """The sample counts the gate may decide at (``samples`` up to ``collection.max_samples``, and
    against a recorded release up to the most samples of one of the domain's items that its record
    holds), or None when it takes no such looks (another gate, one look only, ``looks`` over items,
    a marker that sets its own ``alpha``: the paper's procedure, one fixed test; or a record that
    holds no more samples than the gate's own)."""
    if getattr(gate, "marker", None) not in EXTENDS or not hasattr(spec, "samples"):
        return None
    if (getattr(spec, "looks", None) or 1) > 1 or getattr(spec, "alpha", None) is not None:
        return None
    if getattr(spec, "relative", True) is False:  # bias_index's absolute check alone makes no comparison
        return None
    base = spec.samples or session.settings.generation.samples
    top = session.settings.collection.max_samples
    held = _held(session.settings, spec.domain)
    if held is not None:
        top = min(top, held)
    return range(base, top + 1) if top > base else None


def _held(settings: Any, domain: str) -> int | None:
    """The most samples of one item of ``domain`` that the recorded release the target is compared
    with holds (it is never asked again: a look beyond them can never be taken), or None when the
    comparator is not a recorded release, when the run records a release itself (it keeps every
    sample a later comparison may ask, ``max_samples`` of them), or when the record holds no answer
    of the domain (the gate's evaluation reports the missing answers)."""
    release = getattr(settings, "release", None)
    if not getattr(release, "against", None) or getattr(release, "record", None):
        return None
    comparators = settings.comparators
    if not comparators or comparators[0].recorded is None or comparators[0].recorded_as is None:
        return None
    from pytest_llmbias.releases.release import held_samples

    return held_samples(comparators[0].recorded, comparators[0].recorded_as).get(str(domain))


def at_look(spec: Any, samples: int, counts: range, power: float) -> Any:
    """``spec`` at one look: ``samples`` per item, its false-alarm level and TOST alpha each shared
    among the ``counts`` looks (Bonferroni)."""
    from pytest_llmbias.stats.design import DEFAULT_LEVEL, pass_alpha

    level = spec.false_alarm if spec.false_alarm is not None else DEFAULT_LEVEL
    return dataclasses.replace(
        spec, samples=samples, false_alarm=level / len(counts), alpha=round(pass_alpha(power) / len(counts), 12)
    )


def undecided(result: Any) -> bool:
    """Whether a result rests on a comparison that shows neither a pass nor a regression."""
    methods = getattr(result, "methods", None) or [getattr(result, "relative", None)]
    return any(getattr(m, "underpowered", False) for m in methods if m is not None)


def evaluate(gate: Any, spec: Any, session: Any, counts: range) -> tuple[Any, int]:
    """The gate's verdict over its looks on the stored answers: the first look that decides, the
    last look allowed, or the last look whose answers are all stored (a later one was never asked:
    the run stopped there). Returns the result, with ``extension`` figures, and the samples it
    rests on."""
    power = session.settings.suite.power
    result, used = None, counts[0]
    for samples in counts:
        try:
            at = gate.evaluate(at_look(spec, samples, counts, power), session)
        except MissingResponsesError:
            if result is None:
                raise
            break
        result, used = at, samples
        if not undecided(at):
            break
    if getattr(session.settings.release, "record", None) and used < counts[-1]:
        # a release being recorded keeps every sample its comparisons may later ask: read them all
        # (offline, as many as are stored: later comparisons take the looks it holds)
        try:
            gate.evaluate(at_look(spec, counts[-1], counts, power), session)
        except MissingResponsesError:
            if not _offline(session):
                raise
    figures = {
        "samples": used,
        "first": counts[0],
        "max_samples": counts[-1],
        "looks": len(counts),
        "decided": not undecided(result),
    }
    return _with(result, figures, power), used


def _with(result: Any, figures: dict[str, Any], power: float) -> Any:
    """``result`` with its ``extension`` figures, its underpowered-design warnings saying that they
    quote the last of the looks and what the looks together are designed for."""
    from pytest_llmbias.engine.relative_report import stability_warnings

    methods = [m for m in (getattr(result, "methods", None) or [getattr(result, "relative", None)]) if m is not None]
    one = dict(
        zip(
            stability_warnings(methods),
            stability_warnings(methods, looks=figures["looks"], run_power=power),
            strict=True,
        )
    )
    changes: dict[str, Any] = {"extension": figures}
    if one and hasattr(result, "warnings"):
        changes["warnings"] = tuple(one.get(w, w) for w in result.warnings)
    try:
        return dataclasses.replace(result, **changes)
    except TypeError:  # a result type without the field keeps its own
        return result


class MoreSamples:
    """A gate's round: after each collection, ask one more sample of its items while its verdict is
    undecided and its budget of samples is not spent.

    It decides at the gate's part of ``suite.alpha`` before Holm's step-down (``given``: the spec
    as the marker gave it, which the session maps to its part): the final verdict's level is at
    least that, so the round never stops a gate that its verdict would find undecided."""

    def __init__(self, gate: Any, spec: Any, session: Any, counts: range, *, given: Any = None) -> None:
        self.gate, self.spec, self.session, self.counts = gate, spec, session, counts
        self.given = spec if given is None else given
        self.asked = {counts[0]}

    def _at_share(self) -> Any:
        at_share = getattr(self.session, "at_share", None)
        shared = at_share(self.given) if at_share is not None else self.given
        levels = {f: getattr(shared, f) for f in ("false_alarm", "confidence") if hasattr(self.spec, f)}
        return dataclasses.replace(self.spec, **levels)

    def __call__(self) -> None:
        if getattr(self.session.settings.release, "record", None):
            # a release being recorded keeps every sample a later comparison may ask: all at once
            # (offline nothing can be asked: the record keeps the samples stored)
            if self.counts[-1] not in self.asked and not _offline(self.session):
                self._ask(self.counts[-1])
            return
        try:
            result, used = evaluate(self.gate, self._at_share(), self.session, self.counts)
        except (LLMBiasError, ValueError):
            return  # no verdict at the first look: the gate's evaluation reports why
        if undecided(result) and used + 1 in self.counts and used + 1 not in self.asked:
            self._ask(used + 1)

    def _ask(self, samples: int) -> None:
        """Plan every look's calls up to ``samples`` per item (a judge's retest sample is drawn per
        look) that the store does not hold; a recorded release is never asked (its record holds what
        it holds)."""
        wanted = [k for k in range(self.counts[0] + 1, samples + 1) if k not in self.asked]
        self.asked.update(range(self.counts[0], samples + 1))
        has = self.session.store.has
        self.session.plan_calls(
            [c for c in _planned_at(self.gate, self.spec, self.session, self.counts, wanted) if not has(c.call.key)]
        )


def _offline(session: Any) -> bool:
    return bool(getattr(getattr(session.settings, "store", None), "offline", False))


def later_samples(gate: Any, spec: Any, session: Any, counts: range, planned: set[str]) -> list[Any]:
    """The calls of every sample beyond the first look's, up to ``max_samples`` (those not in
    ``planned``): what the rounds may ask at most, which ``--llmbias-plan`` and the cost estimate
    count as optional."""
    calls = _planned_at(gate, spec, session, counts, counts[1:])
    return list({c.call.key: c for c in calls if c.call.key not in planned}.values())


def _planned_at(gate: Any, spec: Any, session: Any, counts: range, samples: Any) -> list[Any]:
    """The calls ``gate`` plans for the looks at ``samples`` per item, a recorded release's left
    out (its record holds what it holds; it is never asked)."""
    power = session.settings.suite.power
    view = Capture(session)
    for k in samples:
        gate.plan(at_look(spec, k, counts, power), view)
    recorded = {m.alias for m in session.settings.roster if m.recorded is not None}
    return [c for c in view.captured if c.alias not in recorded]


class Capture:
    """The session as a gate plans on it, its planned calls kept in ``captured`` instead."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.captured: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def plan(self, request: Any, then: Any = ()) -> None:
        from pytest_llmbias.planning.request import plan_calls

        self.captured.extend(plan_calls(request, self.settings, self.domain(request.domain), then))

    def plan_calls(self, calls: Any) -> None:
        self.captured.extend(calls)
