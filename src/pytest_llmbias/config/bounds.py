"""The range each numeric setting may take, checked when the setting is read: a value a provider
would refuse (a temperature of -1), one with no documented meaning (a timeout of NaN or infinity),
or one that would make the plan itself unbuildable (a billion samples) is a :class:`ConfigError`
naming the key, where it came from and the range, before any call is planned.

docs/configuration.md lists these ranges; a test keeps the two in step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.errors import ConfigError


@dataclass(frozen=True)
class Bound:
    """A closed or half-open range of finite numbers, and why it is the range."""

    low: float
    high: float
    why: str
    low_open: bool = False
    integer: bool = False

    def admits(self, value: float) -> bool:
        """Whether ``value`` is finite and lies in the range."""
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    def describe(self) -> str:
        """The range as the error and the docs say it: ``an integer from 1 to 1,000``, ``a number in (0, 1]``."""
        low, high = _figure(self.low), _figure(self.high)
        if self.integer:
            return f"an integer from {low} to {high}"
        return f"a number in {'(' if self.low_open else '['}{low}, {high}]"


def _figure(x: float) -> str:
    """``x`` as the docs write it: ``86,400``, ``0.5``."""
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:g}"


#: the most calls one request (a marker's domain, models, questions and samples) may plan; a plan
#: that would hold more is refused before it is built (``collection.max_calls`` raises it)
MAX_CALLS_DEFAULT = 200_000

#: settings key -> its range; a key's kind (an integer, a number) is checked first
BOUNDS: dict[str, Bound] = {
    "generation.temperature": Bound(0, 2, "the range providers accept"),
    "generation.max_tokens": Bound(1, 1_000_000, "no model writes a longer answer", integer=True),
    "generation.samples": Bound(1, 1_000, "answers per question; more is a plan no gate needs", integer=True),
    "collection.max_samples": Bound(1, 1_000, "as generation.samples", integer=True),
    "collection.concurrency": Bound(
        1, 4_096, "calls in flight; beyond a few thousand a client only waits", integer=True
    ),
    "collection.retries": Bound(0, 100, "further tries of a failed call", integer=True),
    "collection.timeout": Bound(0, 86_400, "seconds a call, at most a day", low_open=True),
    "collection.lock_timeout": Bound(0, 86_400, "seconds without a sign of life, at most a day", low_open=True),
    "collection.batch_wait": Bound(0, 7 * 86_400, "seconds, at most a week", low_open=True),
    "collection.max_cost": Bound(0, 1e9, "a budget in USD; leave it unset for none", low_open=True),
    "collection.max_calls": Bound(1, 100_000_000, "calls one request may plan", integer=True),
}

#: a model entry's ``params`` that every chat provider reads the same way -> their range
PARAM_BOUNDS: dict[str, Bound] = {
    "temperature": BOUNDS["generation.temperature"],
    "top_p": Bound(0, 1, "a share of the probability mass", low_open=True),
    "max_tokens": BOUNDS["generation.max_tokens"],
}


def check_bound(key: str, value: Any, at: str, bound: Bound | None = None) -> None:
    """Raise :class:`ConfigError` (``<at>: '<key>' must be <range> (<why>), got <value>``) unless
    ``value`` lies in the range of ``key`` (:data:`BOUNDS`, or ``bound``); a key with no range passes."""
    bound = bound or BOUNDS.get(key)
    if bound is None:
        return
    number = isinstance(value, int if bound.integer else (int, float)) and not isinstance(value, bool)
    if not number or not bound.admits(value):
        raise ConfigError(f"{at}: '{key}' must be {bound.describe()} ({bound.why}), got {value!r}")


def check_params(params: Mapping[str, Any], key: str, at: str) -> None:
    """The entries of a model's ``params`` (under ``key``) that :data:`PARAM_BOUNDS` knows, each
    in its range; ConfigError naming ``<key>.params.<name>``."""
    for name, bound in PARAM_BOUNDS.items():
        if name in params and params[name] is not None:
            check_bound(f"{key}.params.{name}", params[name], at, bound)
