"""A thin, failure-explaining wrapper over ``diskcache.Cache``.

``Cache`` (not ``FanoutCache``, which drops writes silently on timeout) is safe across processes,
so pytest-xdist workers share one store. Eviction is off: a bias store must never forget a response
on its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import StoreError


def reset_hint(directory: Path) -> str:
    return (
        f"To reset it, delete the folder (rm -rf '{directory}'); committed JSONL snapshots are not "
        "affected. Or point --llmbias-store at another folder."
    )


def open_cache(directory: Path, *, timeout: float, label: str = "store") -> Any:
    """A ``diskcache.Cache`` at ``directory`` (created if missing), eviction off; a folder that
    cannot be opened is a :class:`StoreError` with the reset hint."""
    import diskcache

    try:
        directory.mkdir(parents=True, exist_ok=True)
        return diskcache.Cache(str(directory), timeout=timeout, eviction_policy="none", cull_limit=0)
    except Exception as exc:  # sqlite3.DatabaseError, OSError, ...
        raise StoreError(
            f"the {label} at {directory} cannot be opened ({type(exc).__name__}: {exc}). " + reset_hint(directory)
        ) from None


_DB = "cache.db"


class DiskCache:
    """JSON values under string keys in a ``diskcache.Cache`` at ``directory``, opened on first use.

    ``create=False`` (offline mode) opens an existing store only: where there is none, every
    ``get`` misses and nothing is created on disk. ``notices`` says when the store was found
    emptied or reset (its folder without a database, or a 0-byte database): diskcache would
    silently start afresh, and every response would be asked for again.
    """

    def __init__(self, directory: Path, *, timeout: float = 60.0, create: bool = True) -> None:
        self.directory = Path(directory)
        self._timeout = timeout
        self._create = create
        self._cache: Any = None
        self._absent = False
        self.notices: list[str] = []

    def _open(self) -> Any:
        if self._cache is None and not self._absent:
            db = self.directory / _DB
            if self.directory.is_dir() and (not db.exists() or (db.is_file() and db.stat().st_size == 0)):
                state = "is empty (0 bytes)" if db.exists() else "is missing"
                self.notices.append(
                    f"the store at {self.directory} was emptied or reset (its {_DB} {state}): "
                    "no stored response can be served, and every call is made again"
                    + ("" if self._create else " (offline: every call is a miss)")
                )
            if not self._create and not db.is_file():
                self._absent = True
                return None
            self._cache = open_cache(self.directory, timeout=self._timeout)
        return self._cache

    def get(self, key: str) -> Any | None:
        cache = self._open()
        if cache is None:
            return None
        try:
            raw = cache.get(key)
        except Exception as exc:
            raise StoreError(
                f"the store at {self.directory} cannot be read ({type(exc).__name__}: {exc}). "
                + reset_hint(self.directory)
            ) from None
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"the store at {self.directory} holds an unreadable entry {key!r} ({exc}). "
                + reset_hint(self.directory)
            ) from None

    def set(self, key: str, value: Any) -> None:
        if not self._create:
            raise StoreError(f"the store at {self.directory} was opened read-only (offline mode)")
        cache = self._open()
        try:
            cache.set(key, json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        except Exception as exc:
            raise StoreError(
                f"the store at {self.directory} cannot be written ({type(exc).__name__}: {exc}). "
                + reset_hint(self.directory)
            ) from None

    def release_thread(self) -> None:
        """Close the calling thread's connection. diskcache opens one per thread and ``close``
        closes the caller's only; another thread's stays open (and its database locked against
        a reset) until the garbage collector finds it, which a process that runs pytest twice may
        not do in time. A thread that used the cache calls this before it ends."""
        if self._cache is not None:
            self._cache.close()

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
