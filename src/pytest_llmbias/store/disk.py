"""A thin, failure-explaining wrapper over ``diskcache.Cache``.

``Cache`` (not ``FanoutCache``, which drops writes silently on timeout) is safe across processes,
so pytest-xdist workers share one store. Eviction is off: a bias store must never forget a response
on its own. A collection's answers go through the store's journal (:mod:`pytest_llmbias.store.journal`):
on disk as each arrives, in the database a batch at a time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import StoreError
from pytest_llmbias.store import journal


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
#: diskcache's mode of a value stored as it is (``diskcache.core.MODE_RAW``): a string is read back as it is
_MODE_RAW = 1
#: keys read by one query of :meth:`DiskCache.get_many` (well under SQLite's limit on parameters)
_BATCH = 500
#: answers kept in the journal are written to the database once this many wait ...
WRITE_BATCH = 256
#: ... or once the first of them has waited this many seconds (told at the next answer; a
#: collection writes what is left when it ends)
WRITE_WINDOW_S = 0.25


#: a stored value as compact JSON text, non-ASCII kept: what ``json.dumps`` with these options
#: writes, from one encoder instead of one built for every value
encode_value = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


_COLUMNS = "store_time, expire_time, access_time, access_count, tag, size, mode, filename, value"


def _write_many(cache: Any, texts: dict[str, str]) -> None:
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
        self._journal = journal.Journal(self.directory) if journal.available() else None
        self._pending: dict[str, str] = {}  # in the journal, not yet in the database
        self._since = 0.0

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
            self.recover()
        return self._cache

    def recover(self) -> int:
        """Write to the database the answers in the journals of processes that died before they
        did (see :mod:`pytest_llmbias.store.journal`); an answer the database holds already is
        kept. Returns how many were recovered. Read-only (offline), a store that cannot be written
        keeps its journals for the next writer."""
        cache = self._open()
        if cache is None:
            return 0

        def write(entries: Sequence[tuple[str, str]]) -> None:
            with cache.transact():
                for key, text in entries:
                    cache.add(key, text)

        try:
            return journal.replay(self.directory, write)
        except Exception as exc:
            if not self._create:
                return 0
            raise StoreError(
                f"the store at {self.directory} cannot take in the answers of an interrupted run "
                f"({type(exc).__name__}: {exc}). " + reset_hint(self.directory)
            ) from None

    def get(self, key: str) -> Any | None:
        raw = self.get_raw(key)
        return None if raw is None else self.decode(key, raw)

    def get_raw(self, key: str) -> str | None:
        """The JSON text stored under ``key`` (what :meth:`get` decodes), or None."""
        kept = self._pending.get(key)
        if kept is not None:
            return kept
        cache = self._open()
        if cache is None:
            return None
        try:
            raw = cache.get(key)
        except Exception as exc:
            raise self._unreadable(exc) from None
        return raw

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The values of those ``keys`` that are stored, by key: what :meth:`get` gives each, read
        in a few queries (one per 500 keys) instead of one per key."""
        return {key: self.decode(key, raw) for key, raw in self.get_raw_many(keys).items()}

    def get_raw_many(self, keys: Sequence[str]) -> dict[str, str]:
        """The JSON texts of those ``keys`` that are stored (what :meth:`get_many` decodes)."""
        cache = self._open()
        if cache is None or not keys:
            return {}
        pending = self._pending  # the same dictionary throughout, whatever another thread flushes
        try:
            found = select_many(cache, keys)
        except Exception as exc:
            raise self._unreadable(exc) from None
        if pending:
            found.update((k, pending[k]) for k in keys if k in pending)
        return found

    def _unreadable(self, exc: Exception) -> StoreError:
        return StoreError(
            f"the store at {self.directory} cannot be read ({type(exc).__name__}: {exc}). " + reset_hint(self.directory)
        )

    def decode(self, key: str, raw: Any) -> Any:
        """The value of ``key`` stored as ``raw``; an unreadable one is a :class:`StoreError`
        with the reset hint."""
        try:
            return json.loads(raw)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"the store at {self.directory} holds an unreadable entry {key!r} ({exc}). "
                + reset_hint(self.directory)
            ) from None

    def _writable(self) -> Any:
        """The cache, opened; a :class:`StoreError` when the store was opened read-only."""
        if not self._create:
            raise StoreError(f"the store at {self.directory} was opened read-only (offline mode)")
        return self._open()

    def set(self, key: str, value: Any) -> None:
        self.set_text(key, encode_value(value))

    def set_text(self, key: str, text: str) -> None:
        """:meth:`set` of a value already written as JSON (``text``)."""
        cache = self._writable()
        self._pending.pop(key, None)
        try:
            cache.set(key, text)
        except Exception as exc:
            raise self._unwritable(exc) from None

    def _unwritable(self, exc: Exception) -> StoreError:
        return StoreError(
            f"the store at {self.directory} cannot be written ({type(exc).__name__}: {exc}). "
            + reset_hint(self.directory)
        )

    def set_later(self, key: str, value: Any) -> None:
        """Write ``value`` under ``key`` to this process's journal now, and to the database with
        the next batch (:data:`WRITE_BATCH` answers, or :data:`WRITE_WINDOW_S` seconds, or
        :meth:`flush`). Read back at once by this process; by others once written in a batch.
        Without a journal (see :func:`journal.available`), to the database at once."""
        self.set_text_later(key, encode_value(value))

    def set_text_later(self, key: str, text: str) -> None:
        """:meth:`set_later` of a value already written as JSON (``text``)."""
        if self._journal is None:
            self.set_text(key, text)
            return
        self._writable()
        try:
            self._journal.append(key, text)
        except OSError as exc:
            raise self._unwritable(exc) from None
        if not self._pending:
            self._since = time.monotonic()
        self._pending[key] = text
        if len(self._pending) >= WRITE_BATCH or time.monotonic() - self._since >= WRITE_WINDOW_S:
            self.flush()

    def flush(self) -> None:
        """Write the answers kept in the journal to the database, in one transaction, and empty
        the journal. On failure they stay in the journal (a later writer recovers them)."""
        if not self._pending:
            return
        cache = self._open()
        pending = self._pending
        try:
            _write_many(cache, pending)
        except Exception as exc:
            raise self._unwritable(exc) from None
        self._pending = {}
        assert self._journal is not None
        self._journal.clear()

    def release_thread(self) -> None:
        """Close the calling thread's connection. diskcache opens one per thread and ``close``
        closes the caller's only; another thread's stays open (and its database locked against
        a reset) until the garbage collector finds it, which a process that runs pytest twice may
        not do in time. A thread that used the cache calls this before it ends."""
        if self._cache is not None:
            self._cache.close()

    def close(self) -> None:
        """Write what the journal keeps, delete the journal, close the database. Where the write
        fails the journal is kept for the next writer, and the error raised."""
        try:
            self.flush()
        except StoreError:
            if self._journal is not None:
                self._journal.close(keep=True)
            self._pending = {}
            raise
        finally:
            if self._cache is not None:
                self._cache.close()
                self._cache = None
        if self._journal is not None:
            self._journal.close()


def select_many(cache: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The raw stored values of those ``keys`` that ``cache`` (a ``diskcache.Cache``) holds: what
    ``Cache.get`` gives each, read a few hundred string keys a query instead of one query a key;
    key by key where a read updates the cache (statistics or eviction on) or the diskcache lacks
    the internals read here."""
    internals = hasattr(cache, "_disk") and hasattr(cache, "_sql")
    if getattr(cache, "statistics", True) or cache.eviction_policy != "none" or not internals:
        return {k: v for k in keys if (v := cache.get(k)) is not None}
    # string keys are stored raw, and with eviction and statistics off a read updates nothing
    out: dict[str, Any] = {}
    for start in range(0, len(keys), _BATCH):
        chunk = [k for k in keys[start : start + _BATCH] if type(k) is str]
        marks = ",".join("?" * len(chunk))
        query = (
            f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({marks})"
            " AND (expire_time IS NULL OR expire_time > ?)"
        )
        for key, mode, filename, value in cache._sql(query, (*chunk, time.time())).fetchall():
            if mode == _MODE_RAW and filename is None and type(value) is str:  # what fetch() gives it
                out[key] = value
                continue
            try:
                out[key] = cache._disk.fetch(mode, filename, value, False)
            except OSError:  # deleted since the query: a miss, as Cache.get has it
                continue
    return out
