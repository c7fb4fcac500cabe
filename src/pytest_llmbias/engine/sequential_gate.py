"""Every gate with ``looks=K`` (or the run's ``collection.looks``): its calls planned one batch at
a time, the next batch asked only while the verdict is open (see
:mod:`pytest_llmbias.engine.sequential_design` for the design and its rules).

:class:`SequentialGate` wraps a gate. With one look it hands everything to the gate. With several
it plans the first batch's calls through a :class:`BatchView` (the session as the gate sees it with
its domain cut to one batch's units), tells the later batches' calls to ``--llmbias-plan`` as
optional (the plan's maximum), and registers a round with the session: after each collection the
session asks every open gate whether its looks so far decide, and the gates that need their next
batch plan it; the session collects again until no gate asks for more (see
:meth:`pytest_llmbias.session.BiasSession.ensure_collected`). Gates on one domain share its batch
order, so a batch two gates need is asked once, and a gate that stopped early asks nothing more
whatever its neighbours still need. Its evaluation takes the looks again on the stored answers:
a re-run reaches the same look and verdict with no call.

A gate that takes its looks itself (``bias_benchmark``, over its dataset's items) sets
``takes_looks = True`` and gets only the run's defaults filled in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmbias import markers
from pytest_llmbias.planning.request import plan_calls, read_responses

if TYPE_CHECKING:
    from pytest_llmbias.domains import Domain
    from pytest_llmbias.planning.collector import ExpectedCall, FollowUp, PlannedCall
    from pytest_llmbias.planning.request import ResponseRequest
    from pytest_llmbias.planning.response_set import ResponseSet
    from pytest_llmbias.store.calls import Response


def gate_units(marker: str, spec: Any, domain: Domain) -> tuple[str, ...]:
    """The units (questions, counterfactual templates, topics) a gate's spec asks of ``domain``,
    in domain order: what its looks cut into batches and what the plan sizes."""
    if marker == "bias_impact_ratio":
        return tuple(dict.fromkeys(q.unit for q in domain.counterfactual_prompts(spec.categories)))
    if getattr(spec, "topics", None):
        return tuple(u for u in domain.units() if u in spec.topics)
    return domain.units(getattr(spec, "categories", None))


class BatchView:
    """``session`` (any :class:`~pytest_llmbias.engine.protocol.GateSession`) with the domain named
    ``domain`` cut to ``units`` (see :meth:`~pytest_llmbias.domains.domain.Domain.restricted`;
    ``first``: the gate's first batch); planned calls go to ``capture`` when one is given, else to
    the session."""

    def __init__(
        self,
        session: Any,
        domain: str,
        units: Iterable[str],
        first: Iterable[str] = (),
        capture: list[PlannedCall] | None = None,
    ) -> None:
        self._session = session
        self._domain = domain
        self._units = tuple(units)
        self._first = tuple(first)
        self._capture = capture

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def domain(self, name: str) -> Domain:
        whole = self._session.domain(name)
        return whole.restricted(self._units, self._first) if name == self._domain else whole

    def plan(self, request: ResponseRequest, then: Sequence[FollowUp] = ()) -> None:
        self.plan_calls(plan_calls(request, self.settings, self.domain(request.domain), then))

    def plan_calls(self, calls: Sequence[PlannedCall]) -> None:
        if self._capture is not None:
            self._capture.extend(calls)
        else:
            self._session.plan_calls(calls)

    def responses(self, request: ResponseRequest) -> ResponseSet:
        return read_responses(request, self.settings, self.domain(request.domain), self.store.get, self.errors)


class LaterLooks:
    """The follow-up on a batch's first call that tells ``--llmbias-plan`` the later batches'
    calls (optional: asked only while the verdict is open). It makes no call itself: the session's
    rounds ask the next batch."""

    def __init__(self, calls: Sequence[PlannedCall]) -> None:
        self.calls = tuple(calls)

    def __call__(self, planned: PlannedCall, response: Response) -> list[PlannedCall]:
        return []

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> list[ExpectedCall]:
        from pytest_llmbias.planning.collector import ExpectedCall

        return [ExpectedCall(c, "later looks' calls", optional=True) for c in self.calls]


class SequentialGate:
    """A gate taking its verdict in looks (see the module docstring); every other attribute is the
    wrapped gate's."""

    def __init__(self, gate: Any) -> None:
        self.gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gate, name)

    def design(self, spec: Any, session: Any) -> Any:
        """``spec`` with the run's ``collection.looks`` and ``collection.spending`` where its marker set none."""
        if not hasattr(spec, "looks"):  # a gate of a project's own, with no design of looks
            return spec
        c = session.settings.collection
        if c.looks > markers.MAX_LOOKS:
            from pytest_llmbias.errors import ConfigError

            raise ConfigError(f"collection.looks must be a whole number from 1 to {markers.MAX_LOOKS}, got {c.looks}")
        return markers.with_design(spec, c.looks, c.spending)

    def parts(self, spec: Any, session: Any) -> list[tuple[str, ...]]:
        """The units of ``spec``'s domain cut into its looks' batches (see
        :func:`~pytest_llmbias.engine.sequential_design.batches`)."""
        from pytest_llmbias.engine.sequential_design import batches
        from pytest_llmbias.errors import ConfigError

        domain = session.domain(spec.domain)
        units = gate_units(self.gate.marker, spec, domain)
        if len(units) < spec.looks:
            raise ConfigError(
                f"@pytest.mark.{self.gate.marker}: looks={spec.looks} needs at least as many items as "
                f"looks; domain {spec.domain!r} gives {len(units)}"
            )
        seed = f"{domain.name}\0{session.settings.generation.seed}"
        return batches(units, spec.looks, seed)

    def plan(self, spec: Any, session: Any) -> None:
        given, spec = spec, self.design(spec, session)
        if self._fixed(spec):
            from pytest_llmbias.engine import extension

            counts = extension.looks(self.gate, spec, session)
            if counts is None:
                return self.gate.plan(spec, session)
            captured = extension.Capture(session)
            self.gate.plan(extension.at_look(spec, counts[0], counts, session.settings.suite.power), captured)
            calls = captured.captured
            more = extension.later_samples(self.gate, spec, session, counts, planned={c.call.key for c in calls})
            if calls and more:  # --llmbias-plan counts the later samples as optional, as later looks
                calls[0] = dataclasses.replace(calls[0], then=(*calls[0].then, LaterLooks(more)))
            session.plan_calls(calls)
            rounds = getattr(session, "add_round", None)
            if rounds is not None:  # the session asks another sample only while the verdict is undecided
                rounds(extension.MoreSamples(self.gate, spec, session, counts, given=given))
            return None
        parts = self.parts(spec, session)
        first: list[PlannedCall] = []
        later: list[PlannedCall] = []
        self.gate.plan(spec, BatchView(session, spec.domain, parts[0], parts[0], capture=first))
        for part in parts[1:]:
            self.gate.plan(spec, BatchView(session, spec.domain, part, parts[0], capture=later))
        if first:
            first[0] = dataclasses.replace(first[0], then=(*first[0].then, LaterLooks(later)))
        session.plan_calls(first)
        rounds = getattr(session, "add_round", None)
        if rounds is not None:  # the session asks the next batch only while the verdict is open
            rounds(_NextBatch(self, spec, session, parts))
        return None

    def _fixed(self, spec: Any) -> bool:
        """Whether the gate takes ``spec``'s verdict itself: one look, or a gate that takes its
        looks itself; else checks that the gate can take the looks (ConfigError)."""
        if getattr(spec, "looks", 1) == 1 or getattr(self.gate, "takes_looks", False):
            return True
        if self.gate.marker == "bias_impact_ratio" and str(spec.fail_on) != "significant":
            from pytest_llmbias.errors import ConfigError

            raise ConfigError(
                f"@pytest.mark.{self.gate.marker}: looks={spec.looks} needs fail_on='significant' (a test "
                f"whose error the looks can spend); fail_on={str(spec.fail_on)!r} has none"
            )
        return False

    def evaluate(self, spec: Any, session: Any) -> Any:
        spec = self.design(spec, session)
        if self._fixed(spec):
            from pytest_llmbias.engine import extension

            counts = extension.looks(self.gate, spec, session)
            if counts is None:
                return self.gate.evaluate(spec, session)
            return extension.evaluate(self.gate, spec, session, counts)[0]
        result, _, missing = self.looks(spec, session, self.parts(spec, session))
        if result is None:
            assert missing is not None
            raise missing
        return result

    def looks(self, spec: Any, session: Any, parts: Sequence[Sequence[str]]) -> tuple[Any, int, Exception | None]:
        """The looks the stored answers allow (see :func:`~pytest_llmbias.engine.sequential_design.run_looks`)."""
        from pytest_llmbias.engine.sequential_design import run_looks

        leveled = self.gate.at_level(spec, 0.5)
        by_confidence = leveled is not None and getattr(leveled, "confidence", None) != getattr(
            spec, "confidence", None
        )
        if hasattr(spec, "false_alarm") and not by_confidence:
            # A comparison spends its TOST's alpha on passing; the difference it may fail on is
            # checked at each look at its false-alarm level shared among the looks (Bonferroni).
            from pytest_llmbias.stats.design import DEFAULT_LEVEL, pass_alpha

            alpha = spec.alpha if spec.alpha is not None else pass_alpha(session.settings.suite.power)
            level = (spec.false_alarm if spec.false_alarm is not None else DEFAULT_LEVEL) / len(parts)

            def evaluate_at(units: tuple[str, ...], nominal: float, first: Any) -> Any:
                at = dataclasses.replace(spec, alpha=nominal, false_alarm=level)
                return self.gate.evaluate(at, BatchView(session, spec.domain, units, parts[0]))

            return run_looks(evaluate_at, parts, alpha=alpha, spending=str(spec.spending))
        alpha = 1 - spec.confidence if by_confidence else spec.alpha

        def evaluate(units: tuple[str, ...], nominal: float, first: Any) -> Any:
            at = self.gate.at_level(spec, nominal) or dataclasses.replace(spec, alpha=nominal)
            return self.gate.evaluate(at, BatchView(session, spec.domain, units, parts[0]))

        return run_looks(evaluate, parts, alpha=alpha, spending=str(spec.spending))


class _NextBatch:
    """A gate's round: after each collection, plan its next batch if its looks so far need it."""

    def __init__(self, gate: SequentialGate, spec: Any, session: Any, parts: Sequence[Sequence[str]]) -> None:
        self.gate, self.spec, self.session, self.parts = gate, spec, session, parts
        self.asked = {1}

    def __call__(self) -> None:
        from pytest_llmbias.errors import LLMBiasError

        try:
            result, look, _ = self.gate.looks(self.spec, self.session, self.parts)
        except (LLMBiasError, ValueError):
            return  # no verdict at the last look: the gate's evaluation reports why
        if result is None and look not in self.asked:
            self.asked.add(look)
            self.gate.gate.plan(
                self.spec, BatchView(self.session, self.spec.domain, self.parts[look - 1], self.parts[0])
            )
