"""What calls cost: litellm's offline price map (``LITELLM_LOCAL_MODEL_COST_MAP``), a token
estimate for calls not yet made, and the budget that stops new calls once it is spent."""

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
    ``check`` refuses a new call once the cap is reached."""

    limit: float | None
    spent: float = 0.0
    unpriced: set[str] = field(default_factory=set)

    def check(self, alias: str) -> None:
        if self.limit is not None and self.spent >= self.limit:
            raise ProviderError(
                f"model {alias!r}: the budget of ${self.limit:g} (collection.max_cost) is spent "
                f"(${self.spent:.4f}): no new call starts",
                retryable=False,
            )

    def spend(self, model: str, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        if self.limit is None:
            return
        cost = price(model, int(prompt_tokens or 0), int(completion_tokens or 0))
        if cost is None:
            self.unpriced.add(model)
        else:
            self.spent += cost
