"""What batch mode costs: litellm's batch price where its map has one (never guessed from the
standard price), the budget's holds for submitted batches and their settling, a batch refused at
submission by the budget it would pass, and the plan's rounds at both prices."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from pytest_llmbias.clients import batch_costs, batching
from pytest_llmbias.clients.pricing import Budget, batch_price, estimate_tokens, price
from pytest_llmbias.errors import ProviderError
from pytest_llmbias.planning.estimate import price_batches
from pytest_llmbias.report.terminal import budget_error, plan_table
from pytest_llmbias.store.calls import ModelCall

MINI = "openai/gpt-4o-mini"  # batch prices in litellm's map: half the standard ones
OLD = "openai/gpt-3.5-turbo"  # a standard price, no batch price


def test_the_batch_price_is_litellm_s_where_its_map_has_one_and_none_where_it_has_not() -> None:
    assert batch_price(MINI, 1000, 1000) == pytest.approx(1000 * 7.5e-8 + 1000 * 3e-7)
    assert batch_price(MINI, 1000, 1000) == pytest.approx(price(MINI, 1000, 1000) / 2)  # type: ignore[operator]
    assert price(OLD, 1000, 1000) is not None and batch_price(OLD, 1000, 1000) is None  # never guessed
    assert batch_price("openai/acme-chat-2", 1000, 1000) is None  # no price at all
    assert batch_price("python:app", 10**6, 10**6) == 0.0  # an application's spending is its own


def test_a_budget_spends_at_the_batch_price_and_at_the_standard_one_where_the_map_has_no_batch_price() -> None:
    budget = Budget(1.0)
    budget.spend(MINI, 1000, 1000, batch=True)
    assert budget.spent == pytest.approx(batch_price(MINI, 1000, 1000))
    budget.spend(OLD, 1000, 1000, batch=True)  # the most it may cost
    assert budget.spent == pytest.approx(batch_price(MINI, 1000, 1000) + price(OLD, 1000, 1000))  # type: ignore[operator]
    budget.spend("openai/acme-chat-2", 10, 10, batch=True)
    assert budget.unpriced == {"openai/acme-chat-2"}


def test_a_hold_counts_against_the_budget_until_its_line_settles_at_what_its_answer_cost() -> None:
    budget = Budget(0.01)
    budget.reserve("tgt", 0.006)
    budget.check("tgt")  # spent 0, held 0.006: a call may still start
    with pytest.raises(ProviderError, match="would pass the budget") as refused:
        budget.reserve("tgt", 0.005)
    assert not refused.value.retryable and budget.reserved == pytest.approx(0.006)  # nothing more held
    budget.settle(0.006, MINI, 1000, 100)
    assert budget.reserved == 0.0 and budget.spent == pytest.approx(batch_price(MINI, 1000, 100))
    full = Budget(0.01)
    full.reserve("tgt", 0.01)  # held to the cap: no new call starts
    with pytest.raises(ProviderError, match="held by batches"):
        full.check("tgt")
    full.release(0.01)
    assert full.reserved == 0.0
    full.check("tgt")
    unlimited = Budget(None)
    unlimited.reserve("tgt", 10**6)
    assert unlimited.reserved == 0.0


def _call(text: str, max_tokens: int = 100) -> ModelCall:
    return ModelCall(MINI, "http://127.0.0.1:9/v1", (("user", text),), {"max_tokens": max_tokens})


class _Journal:
    def by_key(self) -> dict:
        return {}


def _runner(monkeypatch: pytest.MonkeyPatch, budget: Budget) -> tuple[batching.BatchRunner, SimpleNamespace, list]:
    monkeypatch.setattr(batching, "request_parts", lambda client, call: ("http://x/v1", {}, {"model": "gpt-4o-mini"}))
    runner = batching.BatchRunner(_Journal())  # type: ignore[arg-type]
    client = SimpleNamespace(budget=budget, spec=SimpleNamespace(alias="tgt"), policy=None)
    sent: list = []

    async def send(group, lines, data):  # the submission: what is held then, and each line answered
        sent.append((len(lines), budget.reserved))
        for line in lines.values():
            batch_costs.settle(line, 10, 5)
            line.future.set_result("answer")

    monkeypatch.setattr(runner, "_send", send)
    return runner, client, sent


def test_a_batch_is_held_at_submission_and_settled_by_its_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    budget = Budget(1.0)
    runner, client, sent = _runner(monkeypatch, budget)
    calls = [_call(f"question {i} " * 20) for i in range(3)]

    async def main():
        return await asyncio.gather(*(runner.ask(client, c) for c in calls))  # type: ignore[arg-type]

    assert asyncio.run(main()) == ["answer"] * 3
    held = sum(batch_price(MINI, *estimate_tokens(c, 512)) for c in calls)  # type: ignore[misc]
    assert sent == [(3, pytest.approx(held))]  # the plan's estimate of each line, held when submitted
    assert budget.reserved == 0.0 and budget.spent == pytest.approx(3 * batch_price(MINI, 10, 5))  # type: ignore[operator]


def test_a_batch_that_would_pass_the_budget_is_not_submitted(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [_call(f"question {i} " * 20, max_tokens=1000) for i in range(3)]
    one = batch_price(MINI, *estimate_tokens(calls[0], 512))  # type: ignore[misc]
    budget = Budget(2.5 * one)  # room for two lines' holds, not three
    runner, client, sent = _runner(monkeypatch, budget)

    async def main():
        return await asyncio.gather(*(runner.ask(client, c) for c in calls), return_exceptions=True)  # type: ignore[arg-type]

    out = asyncio.run(main())
    assert sent == [] and budget.reserved == 0.0 and budget.spent == 0.0
    assert all(isinstance(e, ProviderError) and "is not submitted" in str(e) for e in out)


def _entry(model: str, calls: int, rounds: dict, probes: tuple[int, int] = (0, 0)) -> dict:
    tokens = [
        sum(r[k] for r in rounds.values()) + p
        for k, p in zip(("prompt_tokens", "completion_tokens"), probes, strict=True)
    ]
    return {
        "model": model,
        "calls": calls,
        "follow_ups": 0,
        "optional": 0,
        "stored": 0,
        "to_fetch": calls,
        "prompt_tokens": tokens[0],
        "completion_tokens": tokens[1],
        "rounds": rounds,
        "cost_usd": price(model, *tokens),
    }


def test_the_plan_prices_each_round_at_batch_and_at_standard_prices() -> None:
    r = {"calls": 10, "prompt_tokens": 1000, "completion_tokens": 1000}
    estimate = {
        "tgt": _entry(MINI, 13, {1: r}, probes=(300, 300)),  # 3 probes: ordinary calls, standard prices
        "judge": _entry(OLD, 10, {2: r}),
    }
    rounds = price_batches(estimate)
    assert [(x["round"], x["calls"]) for x in rounds] == [(1, 10), (2, 10)]
    assert rounds[0]["batch_cost_usd"] == pytest.approx(batch_price(MINI, 1000, 1000))
    assert rounds[1]["batch_cost_usd"] == pytest.approx(price(OLD, 1000, 1000)) and rounds[1]["no_batch_price"] == {OLD}
    assert estimate["tgt"]["batch_cost_usd"] == pytest.approx(batch_price(MINI, 1000, 1000) + price(MINI, 300, 300))  # type: ignore[operator]
    assert estimate["judge"]["batch_priced"] is False
    lines = plan_table(estimate, rounds=rounds, batch=True)
    text = "\n".join(lines)
    assert "at batch prices" in lines[1] and "(no batch price)" in text
    assert "no batch price in litellm's map for openai/gpt-3.5-turbo, counted at standard prices" in text
    assert "batch rounds" in text and any(line.split()[:2] == ["1", "10"] for line in lines)
    ordinary = plan_table(estimate, rounds=rounds)
    assert any(line.startswith("  at batch prices: $") and "(--llmbias-batch)" in line for line in ordinary)
    assert "batch rounds" not in "\n".join(ordinary)
    # batch mode's budget counts the batch cost
    cheap = sum(e["batch_cost_usd"] for e in estimate.values())
    standard = sum(e["cost_usd"] for e in estimate.values())
    between = (cheap + standard) / 2
    assert budget_error(estimate, between, batch=True) is None
    assert "exceeds it" in (budget_error(estimate, between) or "")


def test_a_model_called_one_by_one_costs_its_standard_price_in_batch_mode() -> None:
    r = {"calls": 10, "prompt_tokens": 1000, "completion_tokens": 1000}
    estimate = {"tgt": _entry(MINI, 10, {1: r})}
    rounds = price_batches(estimate, lambda alias: False)
    assert rounds[0]["batch_cost_usd"] == pytest.approx(price(MINI, 1000, 1000))
    assert "(called one by one)" in "\n".join(plan_table(estimate, rounds=rounds, batch=True, one_by_one={"tgt"}))


def test_the_plan_counts_what_batch_mode_sends_by_batch() -> None:
    from pytest_llmbias.config.settings import ModelSpec

    def entry(model: str, **extra: object) -> ModelSpec:
        return ModelSpec(model=model, alias="m", **extra)  # type: ignore[arg-type]

    assert batch_costs.sent_by_batch(entry(MINI))  # OpenAI itself, on the direct transport
    assert batch_costs.sent_by_batch(entry("anthropic/claude-3-5-haiku-20241022"))  # Message Batches
    assert not batch_costs.sent_by_batch(entry("bedrock/anthropic.claude-v2"))  # litellm's, one by one
    assert not batch_costs.sent_by_batch(entry(MINI, transport="litellm"))
