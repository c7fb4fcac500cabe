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
        ) from exc


class DiskCache:
    """JSON values under string keys in a ``diskcache.Cache`` at ``directory``, opened on first use."""

    def __init__(self, directory: Path, *, timeout: float = 60.0) -> None:
        self.directory = Path(directory)
        self._timeout = timeout
        self._cache: Any = None

    def _open(self) -> Any:
        if self._cache is None:
            self._cache = open_cache(self.directory, timeout=self._timeout)
        return self._cache

    def get(self, key: str) -> Any | None:
        cache = self._open()
        try:
            raw = cache.get(key)
        except Exception as exc:
            raise StoreError(
                f"the store at {self.directory} cannot be read ({type(exc).__name__}: {exc}). "
                + reset_hint(self.directory)
            ) from exc
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"the store at {self.directory} holds an unreadable entry {key!r} ({exc}). "
                + reset_hint(self.directory)
            ) from exc

    def set(self, key: str, value: Any) -> None:
        cache = self._open()
        try:
            cache.set(key, json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        except Exception as exc:
            raise StoreError(
                f"the store at {self.directory} cannot be written ({type(exc).__name__}: {exc}). "
                + reset_hint(self.directory)
            ) from exc

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
