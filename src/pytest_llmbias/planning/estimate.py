"""What a plan needs before any call: calls, stored, to fetch, tokens and cost per model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_llmbias.clients.pricing import estimate_tokens, price
from pytest_llmbias.planning.collector import PlannedCall, deduplicate, expected_follow_ups
from pytest_llmbias.store.calls import Response


def estimate_plan(
    planned: Sequence[PlannedCall], has: Callable[[str], bool], get: Callable[[str], Response | None], max_tokens: int
) -> dict[str, dict[str, Any]]:
    """Per alias, what ``planned`` needs before any call: ``model``, ``calls`` planned, of which
    ``follow_ups`` (judge ratings, opposing phases, preference trials: the calls the plan's
    follow-ups will make, see :func:`~pytest_llmbias.planning.collector.expected_follow_ups`) and
    ``optional`` (the later looks' calls of group-sequential gates, asked only while a verdict is
    open: ``calls`` is the most the run may make), ``stored`` (already in the store or a snapshot:
    ``has``), ``to_fetch``, estimated ``prompt_tokens`` and ``completion_tokens`` of those (see
    :func:`~pytest_llmbias.clients.pricing.estimate_tokens`, ``max_tokens`` where a call sets
    none) and their ``cost_usd`` (None when litellm's price map does not know the model). A
    follow-up call whose prompt depends on an answer not yet stored counts as to fetch, its tokens
    estimated with that answer at its ``max_tokens``."""
    out: dict[str, dict[str, Any]] = {}
    unique = deduplicate(list(planned))

    def count(call: PlannedCall, stored: bool, follow_up: bool, optional: bool) -> None:
        entry = out.setdefault(
            call.alias,
            {
                "model": call.call.model,
                "calls": 0,
                "follow_ups": 0,
                "optional": 0,
                "stored": 0,
                "to_fetch": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
            },
        )
        entry["calls"] += 1
        entry["follow_ups"] += follow_up
        entry["optional"] += optional
        if stored:
            entry["stored"] += 1
            return
        entry["to_fetch"] += 1
        prompt, completion = estimate_tokens(call.call, max_tokens)
        entry["prompt_tokens"] += prompt
        entry["completion_tokens"] += completion

    for key, call in unique.items():
        count(call, has(key), False, False)
    for expected in expected_follow_ups(unique.values(), get):
        count(
            expected.planned,
            expected.exact and has(expected.key),
            expected.what != "later looks' calls",
            expected.optional,
        )
    for entry in out.values():
        entry["cost_usd"] = (
            price(entry["model"], entry["prompt_tokens"], entry["completion_tokens"]) if entry["to_fetch"] else 0.0
        )
    return out
