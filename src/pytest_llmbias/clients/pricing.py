"""What calls cost: litellm's offline price map (``LITELLM_LOCAL_MODEL_COST_MAP``), at the standard
price and at the batch price (``input_cost_per_token_batches``), a token estimate for calls not yet
made, and the budget that stops new calls once it is spent (or, in batch mode, once what the
submitted batches may cost would pass it)."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pytest_llmbias.config.app_targets import is_app_model
from pytest_llmbias.errors import ProviderError
from pytest_llmbias.store.calls import ModelCall


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The cost in USD of that usage; None for a model litellm's price map does not know; 0 for
    an application (a Python target or an HTTP app: what it spends is its own). A model whose
    name no entry of the map holds is told unknown without importing litellm (seconds of a run's
    end, for a local server's model or one behind an application)."""
    if is_app_model(model):
        return 0.0
    if not _may_be_priced(model):
        return None
    from pytest_llmbias.clients.litellm_import import import_litellm

    try:
        prompt_cost, completion_cost = import_litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # litellm raises for a model absent from its map
        return None
    return float(prompt_cost) + float(completion_cost)


def batch_price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The cost in USD of that usage at the provider's batch price (litellm's
    ``input_cost_per_token_batches`` and ``output_cost_per_token_batches``); None where the price
    map has no batch price for the model, even if it has a standard one (a batch price is never
    guessed from the standard price); 0 for an application."""
    if is_app_model(model):
        return 0.0
    rates = _batch_rates(model)
    if rates is None:
        return None
    return prompt_tokens * rates[0] + completion_tokens * rates[1]


@functools.cache
def _batch_rates(model: str) -> tuple[float, float] | None:
    """(input, output) batch price per token of ``model``; None where the map gives no pair."""
    if not _may_be_priced(model):
        return None
    from pytest_llmbias.clients.litellm_import import import_litellm

    try:
        info = import_litellm().get_model_info(model)
    except Exception:  # litellm raises for a model absent from its map
        return None
    rates = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
    if not all(isinstance(r, int | float) for r in rates):
        return None
    return float(rates[0]), float(rates[1])


@functools.cache
def _map_keys() -> tuple[str, ...] | None:
    """The model names of the price map litellm reads offline (the file it ships), lower-cased,
    read without importing litellm; None where that is not the map it would read (litellm
    imported already, perhaps with models registered at run time, or told to fetch the map)."""
    if "litellm" in sys.modules or os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").lower() != "true":
        return None
    spec = importlib.util.find_spec("litellm")
    folders = spec.submodule_search_locations if spec is not None else None
    if not folders:
        return None
    try:
        with open(Path(next(iter(folders))) / "model_prices_and_context_window_backup.json", encoding="utf-8") as f:
            return tuple(str(k).lower() for k in json.load(f))
    except (OSError, ValueError):
        return None


@functools.cache
def _may_be_priced(model: str) -> bool:
    """Whether litellm's price map may price ``model``: true unless no entry's name holds the
    model's own name (after its provider's prefix), nor is it a fine-tune (priced as its base)."""
    keys = _map_keys()
    if keys is None or "ft:" in model:
        return True
    bare = model.rsplit("/", 1)[-1].lower()
    return any(bare in k for k in keys)


def estimate_tokens(call: ModelCall, default_max_tokens: int) -> tuple[int, int]:
    """(prompt, completion) tokens of a call not yet made: about 4 characters a token plus 4 a
    message for the prompt, and the call's ``max_tokens`` for the answer (an upper bound: no
    tokenizer is downloaded for an estimate)."""
    prompt = sum(math.ceil(len(content) / 4) + 4 for _, content in call.messages)
    return prompt, answer_tokens(call, default_max_tokens)


def answer_tokens(call: ModelCall, default_max_tokens: int) -> int:
    """The most tokens the answer to ``call`` may take: its ``max_tokens``, else the default."""
    return int(call.params.get("max_tokens") or default_max_tokens)


def stand_in_text(tokens: int) -> str:
    """A text that :func:`estimate_tokens` counts as ``tokens`` tokens: in the sketch of a
    follow-up call, the stand-in of an answer not yet made (at most that long)."""
    return "x" * (4 * max(0, int(tokens)))


@dataclass
class Budget:
    """A cap on what a session spends, in USD (None: no cap). ``spend`` adds a response's cost;
    ``check`` refuses a new call once the cap is reached. In batch mode a batch counts when it is
    submitted: :meth:`reserve` holds what its lines may cost (refusing a batch that would pass the
    cap), and :meth:`settle` turns a line's hold into what its answer cost."""

    limit: float | None
    spent: float = 0.0
    unpriced: set[str] = field(default_factory=set)
    #: what the submitted batches' lines not yet answered may cost
    reserved: float = 0.0

    def check(self, alias: str) -> None:
        if self.limit is not None and self.spent + self.reserved >= self.limit:
            raise ProviderError(
                f"model {alias!r}: the budget of ${self.limit:g} (collection.max_cost) is spent "
                f"(${self.spent:.4f}"
                + (f", ${self.reserved:.4f} more held by batches" if self.reserved else "")
                + "): no new call starts",
                retryable=False,
            )

    def cost(
        self, model: str, prompt_tokens: int | None, completion_tokens: int | None, *, batch: bool = False
    ) -> float | None:
        """What that usage costs: at the batch price where ``batch`` and the map has one, else at
        the standard price (what a cap must count where no batch price is known: the most it may
        be); None, the model counted unpriced, where the map prices it neither way."""
        p, c = int(prompt_tokens or 0), int(completion_tokens or 0)
        cost = batch_price(model, p, c) if batch else None
        if cost is None:
            cost = price(model, p, c)
        if cost is None:
            self.unpriced.add(model)
        return cost

    def spend(
        self, model: str, prompt_tokens: int | None, completion_tokens: int | None, *, batch: bool = False
    ) -> None:
        """Add that usage's cost (at the batch price where ``batch``: see :meth:`cost`)."""
        if self.limit is None:
            return
        self.spent += self.cost(model, prompt_tokens, completion_tokens, batch=batch) or 0.0

    def reserve(self, alias: str, amount: float) -> None:
        """Hold ``amount`` USD for a batch about to be submitted; a ProviderError (not retryable),
        nothing held, where what is spent and held already plus ``amount`` would pass the cap."""
        if self.limit is None:
            return
        if self.spent + self.reserved + amount > self.limit:
            raise ProviderError(
                f"model {alias!r}: a batch whose lines may cost ${amount:.4f} would pass the budget of "
                f"${self.limit:g} (collection.max_cost: ${self.spent:.4f} spent, ${self.reserved:.4f} held by "
                "batches submitted): it is not submitted",
                retryable=False,
            )
        self.reserved += amount

    def release(self, amount: float) -> None:
        """Drop a hold of ``amount`` USD (a line that failed, or goes out again in another batch)."""
        if self.limit is not None:
            self.reserved = max(0.0, self.reserved - amount)

    def settle(self, held: float, model: str, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """A batch line's answer arrived: its hold of ``held`` USD becomes its cost at the batch price."""
        self.release(held)
        self.spend(model, prompt_tokens, completion_tokens, batch=True)
