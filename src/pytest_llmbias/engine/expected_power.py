"""A gate's expected power before the target is asked, from the baselines' stored answers.

``--llmbias-plan`` calls nothing, yet a gate whose baseline answers (and the follow-ups it needs on
them, such as judge ratings) are already stored can be evaluated as it stands: with each baseline
in turn playing the target and the others as its baselines (leave-one-out stand-ins), through the
gate's own :meth:`~pytest_llmbias.engine.protocol.Gate.plan` and
:meth:`~pytest_llmbias.engine.protocol.Gate.evaluate` on a :class:`StandInView` of the session, which
swaps the roster and reads the store only. Each stand-in's result reports the gate's power at
these sample sizes in its ``reliability()`` (the probability that the gate fails a target off by
the amount it is built to detect); the estimate is their median. A power alone can mislead: an
equivalence test on few questions fails a biased target surely, and a good one nearly as often.
So beside it come how many stand-ins passed, a direct look at the false-alarm rate (each
stand-in is a model the user already trusts), and the median false-alarm rate the gate itself
estimates where it reports one.

A stand-in has one baseline fewer than the real run, so its power is somewhat conservative; its
margin comes from the remaining baselines, as the real run's will.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_llmbias.errors import ConfigError, LLMBiasError
from pytest_llmbias.planning.collector import FollowUp, PlannedCall, deduplicate, expected_follow_ups
from pytest_llmbias.planning.request import ResponseRequest, plan_calls, read_calls, read_responses
from pytest_llmbias.releases.view import SessionView
from pytest_llmbias.stats.multiple import fmt_rate

if TYPE_CHECKING:
    from pytest_llmbias.config.settings import Settings
    from pytest_llmbias.domains.domain import Domain
    from pytest_llmbias.engine.protocol import Gate
    from pytest_llmbias.planning.response_set import ResponseSet
    from pytest_llmbias.session import BiasSession
    from pytest_llmbias.store.calls import ModelCall, Response


@dataclass(frozen=True)
class ExpectedPower:
    """One check of one gate test: the median ``power`` over the stand-ins that report one (each
    in ``powers``), the median ``false_alarm`` rate the gate estimates (None where it reports
    none), how many stand-ins were evaluated (``stand_ins``) and how many ``passed``; or, with
    ``stand_ins`` 0, why none could be (``note``). ``note`` also says when the check reports no
    power, or when some stand-ins could not be evaluated."""

    gate: str
    check: str = ""
    power: float | None = None
    powers: tuple[float, ...] = ()
    false_alarm: float | None = None
    stand_ins: int = 0
    passed: int = 0
    note: str | None = None
    #: the median SD of one item's difference from its comparator (None where none is reported)
    item_sd: float | None = None
    #: the median of the units (items x samples) the stand-ins' designs need; 0 where they are sized
    units_needed: float | None = None

    @property
    def label(self) -> str:
        return f"{self.gate} ({self.check})" if self.check else self.gate

    def to_dict(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "check": self.check,
            "power": self.power,
            "powers": list(self.powers),
            "false_alarm": self.false_alarm,
            "stand_ins": self.stand_ins,
            "passed": self.passed,
            "note": self.note,
            "item_sd": self.item_sd,
            "units_needed": self.units_needed,
        }


class StandInView(SessionView):
    """The session as a gate sees it, with ``settings`` (another roster) and reading the store
    only: planning records the calls in ``planned`` instead of adding them to the session's plan,
    and reading never collects, so nothing here calls a model."""

    def __init__(self, session: BiasSession, settings: Settings) -> None:
        super().__init__(session, settings)
        self.errors: Mapping[str, str] = {}
        self.planned: list[PlannedCall] = []

    def domain(self, name: str) -> Domain:
        return self._session.domain(name)

    def plan(self, request: ResponseRequest, then: Sequence[FollowUp] = ()) -> None:
        self.planned.extend(plan_calls(request, self.settings, self.domain(request.domain), then))

    def plan_calls(self, calls: Sequence[PlannedCall]) -> None:
        self.planned.extend(calls)

    def responses(self, request: ResponseRequest) -> ResponseSet:
        return read_responses(request, self.settings, self.domain(request.domain), self.store.get, self.errors)

    def read_calls(self, calls: Sequence[tuple[str, str, ModelCall]], what: str) -> dict[str, Response]:
        return read_calls(calls, what, self.store.get, self.errors, offline=True)


def stand_in_settings(settings: Settings) -> list[Settings]:
    """One roster per baseline: that baseline as the target, the others as its baselines, store
    offline (nothing may be fetched), no judge retest (a stand-in's retest sample would be other
    answers than the run's, never stored; the power does not depend on it)."""
    offline = dataclasses.replace(settings.store, offline=True)
    judging = dataclasses.replace(settings.judging, retest=0)
    return [
        dataclasses.replace(
            settings,
            target=b,
            baselines=tuple(o for o in settings.baselines if o.alias != b.alias),
            store=offline,
            judging=judging,
        )
        for b in settings.baselines
    ]


def reported_checks(reliability: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The checks of a result's ``reliability()`` that report a ``power``, by name: the mapping
    itself (check "") and each nested mapping with one (check: its key, e.g. ``"judge"``,
    ``"relative"``)."""
    out: dict[str, Mapping[str, Any]] = {}
    if "power" in reliability:
        out[""] = reliability
    for key, value in reliability.items():
        if isinstance(value, Mapping) and "power" in value:
            out[str(key)] = value
    return out


def _median(values: Sequence[Any]) -> tuple[float | None, tuple[float, ...]]:
    """The median of the finite numbers among ``values`` (None when there are none), and those numbers."""
    finite = tuple(float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v))
    return (statistics.median(finite) if finite else None), finite


def _short(exc: BaseException, width: int = 120) -> str:
    """The first line of an error's message, cut to ``width`` characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= width else text[: width - 3] + "..."


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def expected_power(gate: Gate[Any, Any], spec: Any, session: BiasSession) -> list[ExpectedPower]:
    """The gate's expected power on the stored baseline answers (see the module docstring): one
    entry per check the gate reports a power for (one entry when it reports none), or one entry
    whose ``note`` says in a short phrase why it cannot be computed. Reads the store only."""
    name = gate.marker
    baselines = session.settings.baselines
    if len(baselines) < 2:
        return [ExpectedPower(name, note=f"needs 2 baselines ({len(baselines)} configured)")]
    views = [StandInView(session, s) for s in stand_in_settings(session.settings)]
    try:
        for view in views:
            gate.plan(spec, view)
    except ConfigError:
        # The real roster plans, one baseline fewer does not: the gate needs every baseline.
        return [
            ExpectedPower(
                name, note=f"needs {len(baselines) + 1} baselines for stand-in targets ({len(baselines)} configured)"
            )
        ]
    unique = deduplicate([c for view in views for c in view.planned])
    store = session.store
    judges = {j.alias for j in session.settings.panel}
    for what, calls in (
        ("baseline answers", [k for k, c in unique.items() if c.alias not in judges]),
        ("judge ratings of the anchors", [k for k, c in unique.items() if c.alias in judges]),
    ):
        stored = sum(1 for key in calls if store.has(key))
        if stored < len(calls):
            return [ExpectedPower(name, note=f"{what} not all stored ({stored} of {len(calls)})")]
    follow_ups: dict[str, list[int]] = {}
    for expected in expected_follow_ups(unique.values(), store.get):
        if expected.optional:  # asked only while a look leaves the verdict open: evaluate reads what it needs
            continue
        counts = follow_ups.setdefault(expected.what, [0, 0])
        counts[0] += expected.exact and store.has(expected.key)
        counts[1] += 1
    for what, (done, total) in follow_ups.items():
        if done < total:
            return [ExpectedPower(name, note=f"{what} not all stored ({done} of {total})")]
    results, errors = [], []
    for view in views:
        try:
            results.append(gate.evaluate(spec, view))
        except (LLMBiasError, ValueError) as exc:
            errors.append(exc)
    if not results:
        return [ExpectedPower(name, note=f"no stand-in could be evaluated: {_short(errors[0])}")]
    # the note's further words: the stand-ins that failed to evaluate, and where sequential ones stopped
    extra = (
        (f"{len(errors)} {_plural(len(errors), 'stand-in', 'stand-ins')} could not be evaluated: {_short(errors[0])}")
        if errors
        else None
    )
    passed = sum(1 for r in results if r.passed)
    looks = [q for q in (getattr(r, "sequential", None) for r in results) if q]
    if looks:  # a group-sequential gate: where targets like the baselines stopped
        stopped = f"stand-ins stop at look {', '.join(str(q['look']) for q in looks)} of {looks[0]['looks']}"
        if "units_first" in looks[0]:  # the first look's share of the most the gate may ask
            stopped += f"; the first asks {looks[0]['units_first']} of {looks[0]['units_max']} units"
        like, _ = _median([q.get("expected", {}).get("like") for q in looks])
        margin, _ = _median([q.get("expected", {}).get("at_margin") for q in looks])
        if like is not None and margin is not None:
            stopped += f"; expected calls {fmt_rate(like)} like the baselines, {fmt_rate(margin)} at the margin"
        extra = f"{stopped}; {extra}" if extra else stopped
    reports = [reported_checks(r.reliability()) for r in results]
    checks = list(dict.fromkeys(c for report in reports for c in report))
    if not checks:
        note = "the gate reports no power" + (f"; {extra}" if extra else "")
        return [ExpectedPower(name, stand_ins=len(results), passed=passed, note=note)]
    out = []
    for check in checks:
        power, powers = _median([report[check].get("power") for report in reports if check in report])
        false_alarm, _ = _median([report[check].get("false_alarm") for report in reports if check in report])
        item_sd, _ = _median([report[check].get("item_sd") for report in reports if check in report])
        needed, _ = _median(
            [
                report[check].get("units_needed") or 0
                for report in reports
                if check in report and "sized" in report[check]
            ]
        )
        why = None if powers else "no stand-in reports a power (no variance)"
        span, _ = _median([report[check].get("span_of_means") for report in reports if check in report])
        margin, _ = _median([report[check].get("margin") for report in reports if check in report])
        if span is not None and margin is not None and span > margin:
            disagree = (
                f"the baselines' means span {span:.3g}, more than the margin {margin:.3g}: their mean is a loose "
                "reference; consider recording a release (--llmbias-record-release) and comparing with it"
            )
            why = f"{why}; {disagree}" if why else disagree
        if extra:
            why = f"{why}; {extra}" if why else extra
        out.append(ExpectedPower(name, check, power, powers, false_alarm, len(results), passed, why, item_sd, needed))
    return out
