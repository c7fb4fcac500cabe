"""What batch mode spends (see :mod:`pytest_llmbias.clients.batching`): ``collection.max_cost``
counts a batch when it is submitted. Each line of a batch about to be submitted holds what it may
cost at the batch price (the plan's estimate: its prompt at about 4 characters a token, its
``max_tokens`` for the answer); a batch whose holds would pass the budget is not submitted, and
its lines fail as an ordinary call fails once the budget is spent. A line's hold becomes what its
answer cost when the answer arrives; a line that fails, or goes out again in a later batch, drops
its hold. A batch the run stopped waiting for keeps its holds: it is still running, and paid."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_llmbias.choices import Transport
from pytest_llmbias.clients.openai_transport import resolve_transport
from pytest_llmbias.clients.pricing import estimate_tokens
from pytest_llmbias.config.settings import GenerationSettings
from pytest_llmbias.errors import ProviderError


def sent_by_batch(spec: Any) -> bool:
    """Whether batch mode sends ``spec``'s calls (a model entry) by batch: a model reached by the
    direct transport, or an ``anthropic/`` model, not an application or a recorded release (the
    others are called one by one; see :func:`~pytest_llmbias.clients.batching.batchable`, which
    asks the same of a client)."""
    if getattr(spec, "is_app", False) or getattr(spec, "recorded", None) is not None:
        return False
    if str(spec.model).startswith("anthropic/"):
        return True
    return resolve_transport(spec.model, spec.api_base, spec.transport) is Transport.OPENAI


def hold(lines: Sequence[Any]) -> ProviderError | None:
    """Hold what ``lines`` (the runner's lines of one batch, each with ``client``, ``call`` and
    ``held``) may cost against their budget; the error that refuses the batch, nothing held, where
    it would pass the budget."""
    budget = lines[0].client.budget if lines else None
    if budget is None or budget.limit is None:
        return None
    default = GenerationSettings().max_tokens
    amounts = []
    for line in lines:
        prompt, completion = estimate_tokens(line.call, default)
        amounts.append(budget.cost(line.call.model, prompt, completion, batch=True) or 0.0)
    try:
        budget.reserve(lines[0].client.spec.alias, sum(amounts))
    except ProviderError as exc:
        return exc
    for line, amount in zip(lines, amounts, strict=True):
        line.held = amount
    return None


def settle(line: Any, prompt_tokens: int | None, completion_tokens: int | None) -> None:
    """``line``'s answer arrived: its hold becomes what the answer cost at the batch price."""
    budget = line.client.budget
    if budget is not None:
        budget.settle(line.held, line.call.model, prompt_tokens, completion_tokens)
    line.held = 0.0


def release(line: Any) -> None:
    """``line`` failed, or goes out again in a later batch: its hold is dropped."""
    if line.held and line.client.budget is not None:
        line.client.budget.release(line.held)
    line.held = 0.0
