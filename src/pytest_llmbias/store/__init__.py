"""Where responses live: a diskcache store on disk, with JSONL snapshots replayed beneath it."""

from __future__ import annotations

from pytest_llmbias.store.blobs import BlobCache
from pytest_llmbias.store.disk import DiskCache
from pytest_llmbias.store.response_store import ResponseStore
from pytest_llmbias.store.snapshot import read_snapshot, write_snapshot

__all__ = ["BlobCache", "DiskCache", "ResponseStore", "read_snapshot", "write_snapshot"]
