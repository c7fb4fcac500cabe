"""A thin, failure-explaining wrapper over ``diskcache.Cache``.

``Cache`` (not ``FanoutCache``, which drops writes silently on timeout) is safe across processes,
so pytest-xdist workers share one store. Eviction is off: a bias store must never forget a response
on its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
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
#: keys read by one query of :meth:`DiskCache.get_many` (well under SQLite's limit on parameters)
_BATCH = 500


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
        return self._decode(key, raw)

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The values of those ``keys`` that are stored, by key: what :meth:`get` gives each, read
        in a few queries (one per 500 keys) instead of one per key."""
        cache = self._open()
        if cache is None or not keys:
            return {}
        try:
            return self._select_many(cache, keys)
        except (AttributeError, TypeError):  # diskcache without the internals read here: key by key
            return {k: v for k in keys if (v := self.get(k)) is not None}

    def _select_many(self, cache: Any, keys: Sequence[str]) -> dict[str, Any]:
        # diskcache's own read (Cache.get) without its per-key query: string keys are stored raw,
        # eviction and statistics are off, so a read updates nothing
        if cache.statistics or cache.eviction_policy != "none":
            raise TypeError("reads update the cache")
        out: dict[str, Any] = {}
        for start in range(0, len(keys), _BATCH):
            chunk = [k for k in keys[start : start + _BATCH] if type(k) is str]
            marks = ",".join("?" * len(chunk))
            query = (
                f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({marks})"
                " AND (expire_time IS NULL OR expire_time > ?)"
            )
            try:
                rows = cache._sql(query, (*chunk, time.time())).fetchall()
            except Exception as exc:
                raise StoreError(
                    f"the store at {self.directory} cannot be read ({type(exc).__name__}: {exc}). "
                    + reset_hint(self.directory)
                ) from None
            for key, mode, filename, value in rows:
                try:
                    raw = cache._disk.fetch(mode, filename, value, False)
                except OSError:  # deleted since the query: a miss, as Cache.get has it
                    continue
                out[key] = self._decode(key, raw)
        return out

    def _decode(self, key: str, raw: Any) -> Any:
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
