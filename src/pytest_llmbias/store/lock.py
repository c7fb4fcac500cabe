"""The lock that lets one process at a time collect into a store (pytest-xdist workers, or two runs
sharing a store): the others wait, then read from the store what the first one fetched.

A ``filelock.FileLock`` (``fcntl`` on POSIX, ``msvcrt`` on Windows), held for the length of a
collection. The operating system releases it when its holder dies. A holder that is alive but
stuck (a blocked event loop, a stopped process) is noticed through a heartbeat: while it collects,
the holder touches ``collect.lock.alive`` every :data:`BEAT_S` seconds from its event loop; a waiter
that sees no beat for ``stale_after`` seconds gives up with a :class:`StoreError` that names the
lock file and says what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from pytest_llmbias.errors import StoreError

#: how often the holder touches its heartbeat file, in seconds
BEAT_S = 2.0
#: how often a waiter looks at the heartbeat, in seconds
POLL_S = 1.0

T = TypeVar("T")


class CollectionLock:
    """``with CollectionLock(store_dir, stale_after=60) as lock:`` holds ``<store_dir>/collect.lock``;
    inside, ``await lock.beating(coro)`` runs ``coro`` while the heartbeat is kept.

    A waiter gives up when the holder has shown no heartbeat for ``stale_after`` seconds (counted
    from when the waiter started waiting at the earliest, so a heartbeat file left by an earlier run
    never counts against a new holder).
    """

    def __init__(self, directory: Path, *, stale_after: float, clock: Callable[[], float] = time.time) -> None:
        self.directory = Path(directory)
        self.path = self.directory / "collect.lock"
        self.heartbeat = self.directory / "collect.lock.alive"
        self.stale_after = float(stale_after)
        self._clock = clock
        self._lock: Any = None  # a filelock.SoftFileLock while held (filelock is imported when taken)

    def __enter__(self) -> CollectionLock:
        from filelock import FileLock, Timeout

        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"the store folder {self.directory} cannot be created ({type(exc).__name__}: {exc}); "
                "point --llmbias-store (store.dir) at a folder"
            ) from None
        lock = FileLock(str(self.path))
        waiting_since = self._clock()
        while True:
            try:
                lock.acquire(timeout=POLL_S)
                break
            except Timeout:
                silent = self._clock() - max(self._last_beat(), waiting_since)
                if silent > self.stale_after:
                    raise StoreError(self._stale_message(silent)) from None
            except OSError as exc:  # a folder, or a file this process may not open, where the lock file goes
                raise StoreError(
                    f"the collection lock {self.path} cannot be taken ({type(exc).__name__}: {exc}); "
                    "it must be a file this run may write: remove what is there (it holds no answer) "
                    "and run again"
                ) from None
        self._lock = lock
        self.beat()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _last_beat(self) -> float:
        try:
            return self.heartbeat.stat().st_mtime
        except OSError:
            return 0.0

    def beat(self) -> None:
        """Touch the heartbeat file (its modification time is the beat)."""
        with contextlib.suppress(OSError):
            self.heartbeat.touch()
            now = self._clock()
            os.utime(self.heartbeat, (now, now))

    async def beating(self, work: Awaitable[T]) -> T:
        """Await ``work`` while beating every :data:`BEAT_S` seconds from this event loop: a loop
        that is blocked beats no more, and the waiters notice."""

        async def heart() -> None:
            while True:
                self.beat()
                await asyncio.sleep(BEAT_S)

        task = asyncio.ensure_future(heart())
        try:
            return await work
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _stale_message(self, silent: float) -> str:
        return (
            f"waited for the collection lock {self.path}, whose holder has shown no sign of life "
            f"for {silent:.0f}s (collection.lock_timeout is {self.stale_after:g}s): another pytest "
            "run or pytest-xdist worker is collecting into this store and seems stuck. Stop that "
            "process (its lock is released when it exits) and run again, or raise "
            "collection.lock_timeout in llmbias.yaml if its collections are just slow."
        )
