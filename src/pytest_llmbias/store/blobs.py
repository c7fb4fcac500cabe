"""Bytes values under string keys in a diskcache folder: the store of embeddings and feature values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import StoreError
from pytest_llmbias.store.disk import open_cache, reset_hint, select_many


class BlobCache:
    """Bytes values under string keys in a ``diskcache.Cache`` at ``directory``, opened on first use.

    The binary counterpart of :class:`pytest_llmbias.store.disk.DiskCache` (which stores JSON): a
    384-d float32 vector is 1,536 raw bytes, read back about 15x faster than as JSON. Same settings
    (no eviction, safe across processes) and same errors: :class:`StoreError` with the ``rm -rf``
    reset hint when the folder cannot be opened, read or written, or holds a value that is not bytes.
    ``label`` names the cache in those errors ("embedding cache", "feature store").
    """

    def __init__(self, directory: Path | str, *, timeout: float = 60.0, label: str = "embedding cache") -> None:
        self.directory = Path(directory)
        self.label = label
        self._timeout = timeout
        self._cache: Any = None

    @classmethod
    def for_store(cls, store_directory: Path | str, folder: str = "embeddings", **kwargs: Any) -> BlobCache:
        """The cache in sub-folder ``folder`` of a response store folder (default: the embeddings)."""
        return cls(Path(store_directory) / folder, **kwargs)

    def _fail(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(
            f"the {self.label} at {self.directory} {what} ({type(exc).__name__}: {exc}). " + reset_hint(self.directory)
        )

    def _open(self) -> Any:
        if self._cache is None:
            self._cache = open_cache(self.directory, timeout=self._timeout, label=self.label)
        return self._cache

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The stored values of those ``keys`` that are present."""
        cache = self._open()
        try:
            found = select_many(cache, list(keys))
        except Exception as exc:
            raise self._fail("cannot be read", exc) from None
        for key, value in found.items():
            if not isinstance(value, bytes):
                raise StoreError(
                    f"the {self.label} at {self.directory} holds an unreadable entry {key!r} "
                    f"({type(value).__name__}, not bytes). " + reset_hint(self.directory)
                )
        return found

    def get(self, key: str) -> bytes | None:
        """The value stored under ``key``, or None."""
        return self.get_many([key]).get(key)

    def set_many(self, items: Mapping[str, bytes]) -> None:
        """Store every item, in one transaction."""
        if not items:
            return
        cache = self._open()
        try:
            with cache.transact():
                for key, value in items.items():
                    cache.set(key, bytes(value))
        except Exception as exc:
            raise self._fail("cannot be written", exc) from None

    def set(self, key: str, value: bytes) -> None:
        self.set_many({key: value})

    def release_thread(self) -> None:
        """Close the calling thread's connection (see ``DiskCache.release_thread``): the embedding
        prefetcher's thread calls it before it ends."""
        if self._cache is not None:
            self._cache.close()

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
