"""What the two scripted batch APIs of ``openai_server.py`` share: OpenAI's Batch API (``batch_api.py``)
and Anthropic's Message Batches API (``anthropic_batches.py``) each keep their batches, the clock
task of each, the counters and the test controls common to both through :class:`ScriptedBatches`."""

from __future__ import annotations

import asyncio
import collections
import math
import threading
from collections.abc import Coroutine
from typing import Any, Protocol

from aiohttp import web


class _Batch(Protocol):
    id: str

    def object(self) -> dict: ...


class ScriptedBatches:
    """Batches by id, their clock tasks, ``drop_creates`` and the counters, under one lock.

    ``counters()`` names each event in :attr:`COUNTED` (counted by :meth:`_count`, with the lock
    held), then ``lines_executed`` and ``executed_by_custom_id`` (the lines run per ``custom_id``:
    more than one for an id means it was paid for more than once)."""

    COUNTED: tuple[str, ...] = ()
    chunk: int | None = None  # lines run a step (None: a tenth of the batch, at least one)

    def __init__(self) -> None:
        self.drop_creates = 0  # creates whose answer is cut off after the batch is made
        self.absent = False  # True: the batch API answers 404, as an endpoint with none does
        self.hold_creates = 0.0  # seconds a create's answer waits after its batch is made
        self._lock = threading.Lock()
        self._batches: dict[str, Any] = {}
        self._tasks: set[asyncio.Task] = set()
        self._clear_counters()

    # ------------------------------------------------------------------ test controls

    def counters(self) -> dict:
        """The events of :attr:`COUNTED` by name, the lines run in all and per ``custom_id``."""
        with self._lock:
            return self._counters()

    def reset_counters(self) -> None:
        """Forget the counters (batches and controls are kept)."""
        with self._lock:
            self._clear_counters()

    def reset(self) -> None:
        """Forget every batch (a running one stops) and control, and the counters."""
        with self._lock:
            self._forget()
            self._batches.clear()
            self.drop_creates = 0
            self._clear_counters()

    def batch(self, batch_id: str) -> dict | None:
        """The batch object a poll of ``batch_id`` would answer now (None: there is none)."""
        with self._lock:
            found = self._batches.get(batch_id)
            return found.object() if found else None

    def vanish(self, batch_id: str) -> None:
        """The batch is gone: 404 on every request about it from now on; it runs no more lines."""
        with self._lock:
            self._batches.pop(batch_id, None)

    # ------------------------------------------------------------------ for the APIs

    def _counters(self) -> dict:  # lock held
        counts = {name: self._counts[name] for name in self.COUNTED}
        return {**counts, "lines_executed": sum(self._executed.values()), "executed_by_custom_id": dict(self._executed)}

    def _clear_counters(self) -> None:  # lock held
        self._counts: collections.Counter[str] = collections.Counter()
        self._executed: collections.Counter[str] = collections.Counter()

    def _count(self, name: str) -> None:  # lock held
        self._counts[name] += 1

    def _chunk_size(self, lines: int) -> int:
        """The lines of a batch of ``lines`` that one step runs: ``chunk``, else a tenth, at least one."""
        return self.chunk or max(1, math.ceil(lines / 10))

    def _gone(self, batch: _Batch) -> bool:  # lock held
        """Whether ``batch`` has vanished, or the API been reset, since it was made: its clock stops."""
        return self._batches.get(batch.id) is not batch

    def _forget(self) -> None:  # lock held
        """What ``reset`` forgets beside the batches, the drops and the counters."""

    def _created(self, batch: _Batch) -> tuple[dict, bool]:  # lock held
        """Keeps and counts a new batch: its object now, and whether its create is to be cut off."""
        self._batches[batch.id] = batch
        self._count("batches_created")
        drop = self.drop_creates > 0
        self.drop_creates -= drop
        return batch.object(), drop

    async def _launch(
        self, request: web.Request, clock: Coroutine[Any, Any, None], answer: dict, drop: bool
    ) -> web.StreamResponse:
        """Starts a new batch's ``clock`` and answers its create with ``answer`` (after
        ``hold_creates`` seconds: a run killed meanwhile never journals the batch's id), or cuts the
        line (``drop``): the batch exists, but its creator never hears of it."""
        task = asyncio.get_running_loop().create_task(clock)
        self._tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._tasks.discard)
        if drop:
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        if self.hold_creates:
            await asyncio.sleep(self.hold_creates)
        return web.json_response(answer)
