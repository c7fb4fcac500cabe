"""What a plan needs before any call: calls, stored, to fetch, tokens and cost per model, and, as
batch mode would send them, its rounds and their cost at batch prices."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_llmbias.clients.pricing import batch_price, estimate_tokens, price
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
    estimated with that answer at its ``max_tokens``.

    ``rounds``: the calls to fetch by the round batch mode sends them in (round -> ``calls``,
    ``prompt_tokens``, ``completion_tokens``): round 1 the planned calls not stored, and the
    follow-ups of stored ones that need no other answer; a follow-up of a call to fetch (or one
    sketched, its answers not yet stored) the round after its call's."""
    out: dict[str, dict[str, Any]] = {}
    unique = deduplicate(list(planned))

    ready: dict[str, int] = {}  # key -> the round after which its answer is known (0: stored)

    def count(call: PlannedCall, stored: bool, follow_up: bool, optional: bool, round_: int = 1) -> None:
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
                "rounds": {},
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
        r = entry["rounds"].setdefault(round_, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        r["calls"] += 1
        r["prompt_tokens"] += prompt
        r["completion_tokens"] += completion

    for key, call in unique.items():
        ready[key] = 0 if has(key) else 1
        count(call, not ready[key], False, False)
    parents: dict[str, str] = {}
    for expected in expected_follow_ups(unique, get, parents):
        after = ready.get(parents.get(expected.key, ""), 1)
        round_ = after + 1 if expected.exact else max(after, 1) + 1
        stored = expected.exact and has(expected.key)
        ready[expected.key] = 0 if stored else round_
        count(expected.planned, stored, expected.what != "later looks' calls", expected.optional, round_)
    for entry in out.values():
        entry["cost_usd"] = (
            price(entry["model"], entry["prompt_tokens"], entry["completion_tokens"]) if entry["to_fetch"] else 0.0
        )
    return out


def price_batches(
    estimate: Mapping[str, dict[str, Any]], by_batch: Callable[[str], bool] = lambda alias: True
) -> list[dict[str, Any]]:
    """``estimate`` (:func:`estimate_plan`'s, the probes counted) priced as batch mode would make
    its calls: each alias's entry gets ``batch_cost_usd`` (its rounds' calls at the batch price,
    its fingerprint probes, always ordinary calls, at the standard price; the standard price
    throughout for an alias ``by_batch`` says is called one by one; None where either price is
    unknown) and ``batch_priced`` (False where litellm's map has no batch price for the model: its
    batch cost is then its standard cost, never a guess). Returns the rounds in order, each with
    ``round``, ``calls``, ``cost_usd`` and ``batch_cost_usd`` (None where a model's price is not
    known) and ``no_batch_price`` (the models counted at the standard price for want of one)."""
    rounds: dict[int, dict[str, Any]] = {}
    for alias, e in estimate.items():
        model, batched = e["model"], by_batch(alias)
        e["batch_priced"] = True
        total: float | None = 0.0
        in_rounds = [0, 0]
        for n, r in sorted(e.get("rounds", {}).items()):
            in_rounds[0] += r["prompt_tokens"]
            in_rounds[1] += r["completion_tokens"]
            standard = price(model, r["prompt_tokens"], r["completion_tokens"])
            cheap = batch_price(model, r["prompt_tokens"], r["completion_tokens"]) if batched else standard
            if cheap is None and standard is not None:
                e["batch_priced"], cheap = False, standard
            row = rounds.setdefault(
                n, {"round": n, "calls": 0, "cost_usd": 0.0, "batch_cost_usd": 0.0, "no_batch_price": set()}
            )
            row["calls"] += r["calls"]
            if not e["batch_priced"]:
                row["no_batch_price"].add(model)
            for name, cost in (("cost_usd", standard), ("batch_cost_usd", cheap)):
                row[name] = None if cost is None or row[name] is None else row[name] + cost
            total = None if cheap is None or total is None else total + cheap
        rest = (e["prompt_tokens"] - in_rounds[0], e["completion_tokens"] - in_rounds[1])  # the probes
        if any(rest) and total is not None:
            probes = price(model, *rest)
            total = None if probes is None else total + probes
        e["batch_cost_usd"] = total if e["to_fetch"] else 0.0
    return [rounds[n] for n in sorted(rounds)]
