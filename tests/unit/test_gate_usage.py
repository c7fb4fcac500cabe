"""Each gate's usage: the calls its plan asked for (its follow-ups' too), fetched, from the store or
failed, and their cost. A call two gates asked for counts in both; a judge's rating counts in the
gate that planned the rating."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from pytest_llmbias.planning.collector import ExpectedCall, PlannedCall
from pytest_llmbias.planning.gate_usage import GatePlans, gate_usage
from pytest_llmbias.store.calls import ModelCall, Response


def call(model: str, prompt: str) -> ModelCall:
    return ModelCall(model=model, api_base=None, messages=(("user", prompt),), params={})


class Rate:
    """A judge's follow-up: one rating of each answer."""

    def rating(self, item: PlannedCall) -> PlannedCall:
        return PlannedCall("judge", call("openai/judge", f"rate: {item.call.key}"))

    def __call__(self, item: PlannedCall, response: Response) -> Iterable[PlannedCall]:
        return [self.rating(item)]

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> Iterable[ExpectedCall]:
        return [ExpectedCall(self.rating(planned), "judge ratings")]


class Session:
    """The part of a session that planning touches: the plan, and its rounds."""

    def __init__(self) -> None:
        self.planned: list[PlannedCall] = []
        self.rounds: list[Callable[[], None]] = []

    def plan_calls(self, calls: Iterable[PlannedCall]) -> None:
        self.planned.extend(calls)

    def add_round(self, advance: Callable[[], None]) -> None:
        self.rounds.append(advance)


@pytest.fixture
def prices(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dollar a million tokens for the target, two for the judge; any other model unpriced."""
    rates = {"openai/tgt": 1e-6, "openai/judge": 2e-6}

    def price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        return None if model not in rates else rates[model] * (prompt_tokens + completion_tokens)

    monkeypatch.setattr("pytest_llmbias.clients.pricing.price", price)


def answered(planned: PlannedCall, tokens: int, source: str = "network") -> Response:
    return Response(planned.call, "an answer", prompt_tokens=tokens, completion_tokens=tokens, source=source)


def test_a_shared_call_counts_in_both_gates_and_a_rating_in_the_gate_that_planned_it(prices) -> None:
    session, plans = Session(), GatePlans()
    shared = PlannedCall("tgt", call("openai/tgt", "shared question"))
    judged = PlannedCall("tgt", shared.call, then=(Rate(),))  # the same call, with a judge's rating
    own = PlannedCall("tgt", call("openai/tgt", "a question of gate b's own"))
    plans.record("a", session, lambda: session.plan_calls([judged]))
    plans.record("b", session, lambda: session.plan_calls([shared, own, shared]))  # asked twice, counted once
    rating = Rate().rating(judged)
    used = {
        shared.call.key: answered(shared, 100),  # fetched this run
        own.call.key: answered(own, 50, source="store"),
        rating.call.key: answered(rating, 10),
    }
    a, b = (gate_usage(plans.planned(g), used, {}) for g in ("a", "b"))
    # gate a: the shared answer and its own rating; gate b: the shared answer and its own, no rating
    assert a == {"calls": 2, "fetched": 2, "from_store": 0, "failed": 0, "tokens": 220, "cost_usd": 0.00024}
    assert b == {"calls": 2, "fetched": 1, "from_store": 1, "failed": 0, "tokens": 200, "cost_usd": 0.0002}


def test_a_failed_call_an_unpriced_model_and_an_offline_miss(prices) -> None:
    failed = PlannedCall("tgt", call("openai/tgt", "refused"), then=(Rate(),))
    unpriced = PlannedCall("other", call("openai/other", "a question"))
    missed = PlannedCall("tgt", call("openai/tgt", "never asked"))
    used = {unpriced.call.key: answered(unpriced, 5)}
    usage = gate_usage([failed, unpriced, missed], used, {failed.call.key: "503 Service Unavailable"})
    # the failed call's rating was never asked: not counted, though its follow-up tells it
    assert usage == {"calls": 3, "fetched": 1, "from_store": 0, "failed": 1, "tokens": 10, "cost_usd": None}
    assert gate_usage([], {}, {}) == {
        "calls": 0,
        "fetched": 0,
        "from_store": 0,
        "failed": 0,
        "tokens": 0,
        "cost_usd": 0.0,
    }


def test_a_round_registered_while_a_gate_plans_plans_for_that_gate() -> None:
    session, plans = Session(), GatePlans()
    first = PlannedCall("tgt", call("openai/tgt", "batch 1"))
    later = PlannedCall("tgt", call("openai/tgt", "batch 2"))

    def plan() -> str:
        session.plan_calls([first])
        session.add_round(lambda: session.plan_calls([later]))  # the next look's batch, asked after collection
        return "spec"

    assert plans.record("a", session, plan) == "spec"
    plans.record("b", session, lambda: session.plan_calls([]))
    assert "add_round" not in vars(session)  # the session's own method again
    for advance in session.rounds:  # the session's collection
        advance()
    assert plans.planned("a") == [first, later] and plans.planned("b") == []
