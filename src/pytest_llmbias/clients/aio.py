"""One event loop in a background thread for the whole session.

All model calls run on it, so litellm's async HTTP clients live on a single loop for the session
(they must not outlive the loop they were made on), and synchronous test code can wait on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A daemon thread running an asyncio loop, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="llmbias-loop", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result. Ctrl-C cancels it."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure())
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the session loop from another running loop (an async test)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._ensure()))

    def close(self, last: Sequence[Callable[[], None]] = ()) -> None:
        """Cancel what still runs, call each of ``last`` on the loop's thread (a store closes its
        connection there: see ``DiskCache.release_thread``), and stop the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()
            for release in last:
                with contextlib.suppress(Exception):  # closing must not raise over the run's result
                    release()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        except Exception:
            pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        loop.close()
