"""Which calls each gate's plan asked for, and what they cost: the ``usage`` of a gate's entry in the
run's reports (calls, fetched, from the store, failed, tokens, cost in USD).

:class:`GatePlans` notes the calls a gate plans while its marker is planned, and those it plans in
the session's later rounds (a group-sequential gate's next batch). After the collection,
:meth:`GatePlans.usage` counts them with the calls their follow-ups made (a judge's ratings, the
re-ask of an unreadable rating): each told again by the follow-up
(:meth:`~pytest_llmbias.planning.collector.FollowUp.expect`), now exactly, from the answers the
session used; a follow-up call counts only once it was asked.

Attribution: a call belongs to every gate whose plan asked for it (two gates sharing an answer both
count it, so the gates' figures may add up to more than the run's); a follow-up's calls belong to
the gate that planned the follow-up. Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from pytest_llmbias.planning.collector import PlannedCall, deduplicate
from pytest_llmbias.store.calls import Response

T = TypeVar("T")


class GatePlans:
    """Per owner (a marker on its test: the plugin's (test id, marker name)), the calls it planned
    with the session."""

    def __init__(self) -> None:
        self._planned: dict[Hashable, list[PlannedCall]] = {}

    def planned(self, owner: Hashable) -> list[PlannedCall]:
        """The calls ``owner`` planned so far, in order (none for an owner never seen)."""
        return list(self._planned.get(owner, ()))

    def record(self, owner: Hashable, session: Any, plan: Callable[[], T]) -> T:
        """Run ``plan()`` (which plans through ``session``, a
        :class:`~pytest_llmbias.session.BiasSession`, or through a view that hands its calls to it)
        and note the calls it added to the session's plan as ``owner``'s; a round it registers
        (:meth:`~pytest_llmbias.session.BiasSession.add_round`) has the calls it plans later noted
        as ``owner``'s too. Returns what ``plan()`` returned."""
        add_round = session.add_round

        def owned_round(advance: Callable[[], None]) -> None:
            add_round(lambda: self._note(owner, session, advance))

        session.add_round = owned_round  # shadows the method while this gate plans
        try:
            return self._note(owner, session, plan)
        finally:
            del session.add_round

    def _note(self, owner: Hashable, session: Any, plan: Callable[[], T]) -> T:
        before = len(session.planned)
        try:
            return plan()
        finally:
            self._planned.setdefault(owner, []).extend(session.planned[before:])

    def usage(self, owner: Hashable, session: Any) -> dict[str, Any]:
        """``owner``'s usage, read from ``session`` once its calls are collected (see :func:`gate_usage`)."""
        planned = self._planned.get(owner, ())
        return gate_usage(planned, session.store.used if planned else {}, session.errors)


def gate_usage(
    planned: Sequence[PlannedCall], used: Mapping[str, Response], errors: Mapping[str, str]
) -> dict[str, Any]:
    """The usage of one gate's ``planned`` calls and of the calls their follow-ups asked, each
    counted once: ``{"calls", "fetched", "from_store", "failed", "tokens", "cost_usd"}``. ``used``:
    the answers the session used, by key (fetched: those it asked over the network); ``errors``: the
    calls that failed, by key. A planned call neither answered nor failed (an offline miss) counts
    in ``calls`` alone; a follow-up's call counts once it was asked (answered or failed).
    ``tokens`` and ``cost_usd`` are those of the calls fetched; the cost (litellm's price map, as
    the run's) is None when a fetched call's model is not in it."""
    from pytest_llmbias.clients.pricing import price

    unique = deduplicate(list(planned))
    keys = list(unique)
    seen = set(keys)

    def visit(item: PlannedCall) -> None:
        if item.call.key not in used:  # unanswered: its follow-ups never ran
            return
        for then in item.then:
            for told in then.expect(item, used.get):
                # a call asked: answered, or failed (an optional one, if asked, was planned in a later round)
                if told.optional or not told.exact or told.key in seen:
                    continue
                if told.key in used or told.key in errors:
                    seen.add(told.key)
                    keys.append(told.key)
                    visit(told.planned)

    for item in unique.values():
        visit(item)
    fetched = from_store = failed = 0
    tokens: dict[str, list[int]] = {}  # model -> [prompt, completion] of the calls fetched
    for key in keys:
        response = used.get(key)
        if response is None:
            failed += key in errors
        elif response.source == "network":
            fetched += 1
            spent = tokens.setdefault(response.call.model, [0, 0])
            spent[0] += int(response.prompt_tokens or 0)
            spent[1] += int(response.completion_tokens or 0)
        else:
            from_store += 1
    costs = [price(model, p, c) for model, (p, c) in tokens.items()]
    return {
        "calls": len(keys),
        "fetched": fetched,
        "from_store": from_store,
        "failed": failed,
        "tokens": sum(p + c for p, c in tokens.values()),
        "cost_usd": None if None in costs else round(float(sum(c for c in costs if c is not None)), 6),
    }
