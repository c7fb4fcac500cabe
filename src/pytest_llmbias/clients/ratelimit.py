"""A client-side requests-per-minute cap: call starts are spaced at least 60/rpm seconds apart."""

from __future__ import annotations

import asyncio
import time


class RateLimiter:
    """Spaces the start of calls to one model; ``rpm=0`` means no cap. Use from one event loop."""

    def __init__(self, rpm: int) -> None:
        self.interval = 60.0 / rpm if rpm > 0 else 0.0
        self._next = 0.0
        self._lock: asyncio.Lock | None = None

    async def acquire(self) -> None:
        if self.interval == 0.0:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = time.monotonic()
            wait = self._next - now
            self._next = max(now, self._next) + self.interval
        if wait > 0:
            await asyncio.sleep(wait)
