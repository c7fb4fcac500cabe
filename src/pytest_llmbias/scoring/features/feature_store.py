"""Stored feature values: 8-byte doubles in a ``diskcache`` folder ``<store dir>/features``."""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import StoreError
from pytest_llmbias.store.blobs import BlobCache
from pytest_llmbias.store.disk import reset_hint

__all__ = ["FEATURES_FOLDER", "FeatureStore"]

FEATURES_FOLDER = "features"
"""The sub-folder of the store directory that holds the feature values."""

_DOUBLE = struct.Struct("<d")


class FeatureStore:
    """Feature values on disk: 8-byte little-endian doubles in a :class:`BlobCache`.

    Keyed by ``"feature:" + sha256(identity NUL text NUL reference-or-empty)``. ``FeatureStore(None)``
    stores nothing (every lookup misses). Counters: :attr:`hits` (values served) and
    :attr:`written` (values stored). A malformed entry is a :class:`StoreError` with the reset hint.
    """

    def __init__(self, cache: BlobCache | None = None) -> None:
        self.cache = cache
        self.hits = 0
        self.written = 0

    @classmethod
    def for_store(cls, store_directory: Path | str, **kwargs: Any) -> FeatureStore:
        """The store in sub-folder ``features`` of a response store folder."""
        return cls(BlobCache.for_store(store_directory, FEATURES_FOLDER, label="feature store", **kwargs))

    def __repr__(self) -> str:
        where = "no store" if self.cache is None else str(self.cache.directory)
        return f"FeatureStore({where})"

    @staticmethod
    def key(identity: str, text: str, reference: str | None = None) -> str:
        material = f"{identity}\0{text}\0{reference or ''}".encode("utf-8", "surrogatepass")
        return "feature:" + hashlib.sha256(material).hexdigest()

    def get_many(self, identity: str, items: Iterable[tuple[str, str | None]]) -> dict[tuple[str, str | None], float]:
        """The stored values of those (text, reference) pairs that are present."""
        if self.cache is None:
            return {}
        keys = {item: self.key(identity, *item) for item in items}
        found = self.cache.get_many(keys.values())
        values: dict[tuple[str, str | None], float] = {}
        for item, key in keys.items():
            blob = found.get(key)
            if blob is None:
                continue
            value = _DOUBLE.unpack(blob)[0] if len(blob) == _DOUBLE.size else None
            if value is None or not math.isfinite(value):
                what = f"{len(blob)} bytes" if value is None else f"value {value!r}"
                raise StoreError(
                    f"the {self.cache.label} at {self.cache.directory} holds a malformed value for feature "
                    f"{identity!r} (entry {key!r}: {what}, expected one finite 8-byte float). "
                    + reset_hint(self.cache.directory)
                )
            values[item] = value
        self.hits += len(values)
        return values

    def set_many(self, identity: str, values: Mapping[tuple[str, str | None], float]) -> None:
        """Store every value, in one transaction (non-finite values are refused)."""
        if self.cache is None or not values:
            return
        blobs = {}
        for item, value in values.items():
            if not math.isfinite(value):
                raise ValueError(f"refusing to store a non-finite feature value {value!r}")
            blobs[self.key(identity, *item)] = _DOUBLE.pack(float(value))
        self.cache.set_many(blobs)
        self.written += len(blobs)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
