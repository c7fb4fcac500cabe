"""What calls cost: litellm's offline price map (``LITELLM_LOCAL_MODEL_COST_MAP``), a token
estimate for calls not yet made, and the budget that stops new calls once it is spent."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pytest_llmbias.config.app_targets import is_app_model
from pytest_llmbias.errors import ProviderError
from pytest_llmbias.store.calls import ModelCall


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The cost in USD of that usage; None for a model litellm's price map does not know; 0 for
    an application (a Python target or an HTTP app: what it spends is its own)."""
    if is_app_model(model):
        return 0.0
    from pytest_llmbias.clients.litellm_import import import_litellm

    try:
        prompt_cost, completion_cost = import_litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # litellm raises for a model absent from its map
        return None
    return float(prompt_cost) + float(completion_cost)


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
