"""Run a batch of planned calls: store first, then concurrent, bounded, retried model calls.

Every response is written to the store the moment it arrives, so an interrupted batch resumes
with only the missing calls. Failed calls are reported, never stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmbias.calls import ModelCall
from pytest_llmbias.errors import ConfigError, ProviderError
from pytest_llmbias.models.client import ModelClient
from pytest_llmbias.store.responses import ResponseStore


@dataclass(frozen=True)
class PlannedCall:
    """A call a test needs: the model's alias, the call, and reader-facing labels."""

    alias: str
    call: ModelCall
    domain: str | None = None
    question: str | None = None


@dataclass
class Progress:
    """Live counts during a batch (passed to the progress callback)."""

    total: int
    done: int = 0
    from_store: int = 0
    fetched: int = 0
    errors: int = 0
    missing: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @property
    def calls_per_s(self) -> float:
        return self.fetched / self.elapsed if self.elapsed > 0 else 0.0


@dataclass(frozen=True)
class CollectionReport:
    """What a batch did. ``errors`` and ``missing`` hold the keys that have no response."""

    total: int
    from_store: int
    fetched: int
    errors: Mapping[str, str]
    missing: tuple[str, ...]
    elapsed_s: float

    @property
    def calls_per_s(self) -> float:
        return self.fetched / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "from_store": self.from_store,
            "fetched": self.fetched,
            "errors": dict(self.errors),
            "missing": list(self.missing),
            "elapsed_s": self.elapsed_s,
            "calls_per_s": self.calls_per_s,
        }


def deduplicate(planned: Sequence[PlannedCall]) -> dict[str, PlannedCall]:
    """One planned call per key, the first one kept."""
    unique: dict[str, PlannedCall] = {}
    for item in planned:
        unique.setdefault(item.call.key, item)
    return unique


async def collect(
    planned: Sequence[PlannedCall],
    *,
    store: ResponseStore,
    clients: Mapping[str, ModelClient],
    concurrency: int,
    offline: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
) -> CollectionReport:
    """Make sure every planned call has a response in ``store``.

    Store hits are served first; in ``offline`` mode misses are only counted. The rest run at most
    ``concurrency`` at a time. ``on_progress`` is called after each call completes.
    """
    unique = deduplicate(planned)
    progress = Progress(total=len(unique))
    todo: list[PlannedCall] = []
    missing: list[str] = []
    for key, item in unique.items():
        store.label(key, alias=item.alias, domain=item.domain, question=item.question)
        if store.get(key) is not None:
            progress.from_store += 1
            progress.done += 1
        elif offline:
            missing.append(key)
            progress.missing += 1
            progress.done += 1
        else:
            todo.append(item)
    if on_progress:
        on_progress(progress)

    errors: dict[str, str] = {}
    semaphore = asyncio.Semaphore(concurrency)

    async def one(item: PlannedCall) -> None:
        async with semaphore:
            try:
                response = await clients[item.alias].complete(item.call)
            except (ProviderError, ConfigError) as exc:  # ConfigError: e.g. the API key variable is unset
                errors[item.call.key] = str(exc)
                progress.errors += 1
            else:
                store.put(response)
                progress.fetched += 1
        progress.done += 1
        if on_progress:
            on_progress(progress)

    tasks = [asyncio.ensure_future(one(item)) for item in todo]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    return CollectionReport(
        total=progress.total,
        from_store=progress.from_store,
        fetched=progress.fetched,
        errors=errors,
        missing=tuple(missing),
        elapsed_s=progress.elapsed,
    )
