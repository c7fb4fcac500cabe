"""The rows of a ``diskcache.Cache`` read and written a batch at a time, in the SQL diskcache
itself runs: what ``Cache.get`` and ``Cache.set`` do key by key, in a few statements for a few
hundred keys (a collection's batch of answers, a warm run's reads)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

#: diskcache's mode of a value stored as it is (``diskcache.core.MODE_RAW``): a string is read back as it is
_MODE_RAW = 1
#: keys read by one query of :meth:`DiskCache.get_many` (well under SQLite's limit on parameters)
_BATCH = 500
_COLUMNS = "store_time, expire_time, access_time, access_count, tag, size, mode, filename, value"


def write_many(cache: Any, texts: dict[str, str]) -> None:
    """Write ``texts`` (key -> JSON text) in one transaction: what ``Cache.set`` writes of each,
    with one statement for the new keys and one for those stored already instead of a few per
    key (a collection's batch of answers). The files of overwritten large values are removed
    after the commit, as ``Cache.set`` removes them."""
    disk, con = getattr(cache, "_disk", None), getattr(cache, "_con", None)
    if disk is None or con is None or cache.eviction_policy != "none":  # without those internals: key by key
        with cache.transact():
            for key, text in texts.items():
                cache.set(key, text)
        return
    now = time.time()
    rows = {}
    for key, text in texts.items():
        db_key, raw = disk.put(key)
        # (raw, size, mode, filename, value); raw as the int SQLite keeps of it: sqlite3 binds a
        # bool or None only after looking for an adapter, at the cost of two raised errors
        rows[db_key] = (int(raw), *disk.store(text, False, key=key))
    keys = list(rows)
    old_files = []
    with cache.transact():
        stored: dict[Any, tuple[int, str | None]] = {}
        for start in range(0, len(keys), _BATCH):
            chunk = keys[start : start + _BATCH]
            query = f"SELECT key, rowid, filename FROM Cache WHERE raw = 1 AND key IN ({','.join('?' * len(chunk))})"
            stored.update((k, (rowid, name)) for k, rowid, name in con.execute(query, chunk).fetchall())
        old_files = [name for _, name in stored.values() if name is not None]
        new = [(k, r) for k, r in rows.items() if k not in stored]
        con.executemany(  # those kept in the database, not a file (all but a value over 32 KiB)
            f"INSERT INTO Cache(key, raw, {_COLUMNS}) VALUES (?, ?, ?, NULL, ?, 0, NULL, ?, ?, NULL, ?)",
            [(k, r[0], now, now, r[1], r[2], r[4]) for k, r in new if r[3] is None],
        )
        con.executemany(
            f"INSERT INTO Cache(key, raw, {_COLUMNS}) VALUES (?, ?, ?, NULL, ?, 0, NULL, ?, ?, ?, ?)",
            [(k, r[0], now, now, *r[1:]) for k, r in new if r[3] is not None],
        )
        con.executemany(
            "UPDATE Cache SET store_time = ?, expire_time = NULL, access_time = ?, access_count = 0, tag = NULL,"
            " size = ?, mode = ?, filename = ?, value = ? WHERE rowid = ?",
            [(now, now, *rows[k][1:], stored[k][0]) for k in stored],
        )
    for name in old_files:
        disk.remove(name)


def _undecodable(exc: Exception) -> bool:
    """Whether SQLite could not give a row's text as UTF-8 (the row's loss alone)."""
    return isinstance(exc, sqlite3.OperationalError) and "decode" in str(exc)


def select_one(cache: Any, key: str, unreadable: dict[str, str] | None = None) -> Any:
    """``cache.get(key)``; a row whose text is not UTF-8 is None, noted in ``unreadable``."""
    try:
        return cache.get(key)
    except sqlite3.OperationalError as exc:
        if not _undecodable(exc) or unreadable is None:
            raise
        unreadable[key] = f"its text is not UTF-8 ({str(exc)[:60]})"
        return None


def select_many(cache: Any, keys: Sequence[str], unreadable: dict[str, str] | None = None) -> dict[str, Any]:
    """The raw stored values of those ``keys`` that ``cache`` (a ``diskcache.Cache``) holds: what
    ``Cache.get`` gives each, read a few hundred string keys a query instead of one query a key;
    key by key where a read updates the cache (statistics or eviction on) or the diskcache lacks
    the internals read here. With ``unreadable`` (key -> why), a row whose text SQLite cannot give
    as UTF-8 is left out and noted there instead of failing the read of its batch."""
    internals = hasattr(cache, "_disk") and hasattr(cache, "_sql")
    if getattr(cache, "statistics", True) or cache.eviction_policy != "none" or not internals:
        return {k: v for k in keys if (v := select_one(cache, k, unreadable)) is not None}
    # string keys are stored raw, and with eviction and statistics off a read updates nothing
    out: dict[str, Any] = {}
    for start in range(0, len(keys), _BATCH):
        chunk = [k for k in keys[start : start + _BATCH] if type(k) is str]
        try:
            rows = _select(cache, chunk)
        except sqlite3.OperationalError as exc:
            if not _undecodable(exc) or unreadable is None:
                raise
            # one row's text is not UTF-8: the batch's rows one by one, that one left out
            out.update((k, v) for k in chunk if (v := select_one(cache, k, unreadable)) is not None)
            continue
        for key, mode, filename, value in rows:
            if mode == _MODE_RAW and filename is None and type(value) is str:  # what fetch() gives it
                out[key] = value
                continue
            try:
                out[key] = cache._disk.fetch(mode, filename, value, False)
            except OSError:  # deleted since the query: a miss, as Cache.get has it
                continue
    return out


def _select(cache: Any, chunk: list[str]) -> list[tuple[Any, ...]]:
    marks = ",".join("?" * len(chunk))
    query = (
        f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({marks})"
        " AND (expire_time IS NULL OR expire_time > ?)"
    )
    return list(cache._sql(query, (*chunk, time.time())).fetchall())
