"""A thin, failure-explaining wrapper over ``diskcache.Cache``.

``Cache`` (not ``FanoutCache``, which drops writes silently on timeout) is safe across processes,
so pytest-xdist workers share one store. Eviction is off: a bias store must never forget a response
on its own. A collection's answers go through the store's journal (:mod:`pytest_llmbias.store.journal`):
on disk as each arrives, in the database a batch at a time.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pytest_llmbias.errors import StoreError
from pytest_llmbias.store import journal, repair
from pytest_llmbias.store.row_batches import select_many, select_one, write_many

T = TypeVar("T")


def reset_hint(directory: Path) -> str:
    """The advice of an error about a store of values computed from the answers (embeddings,
    feature values): deleting it loses no answer."""
    return (
        f"To reset it, delete the folder (rm -rf '{directory}'); committed JSONL snapshots are not "
        "affected. Or point --llmbias-store at another folder."
    )


def repair_hint(directory: Path) -> str:
    """The advice of an error about the answers' store at ``directory`` (a store's
    ``responses/``): check it and repair it, which keeps every answer that can be read."""
    store = directory.parent if directory.name == "responses" else directory
    return (
        f"`llmbias store check --store '{store}'` says what is damaged; `llmbias store repair --store "
        f"'{store}'` heals it, keeping every answer that can still be read (committed JSONL snapshots "
        "are not affected)."
    )


def open_cache(directory: Path, *, timeout: float, label: str = "store") -> Any:
    """A ``diskcache.Cache`` at ``directory`` (created if missing), eviction off; a folder that
    cannot be opened is a :class:`StoreError` with the reset hint."""
    try:
        return connect(directory, timeout=timeout)
    except Exception as exc:  # sqlite3.DatabaseError, OSError, ...
        raise StoreError(
            f"the {label} at {directory} cannot be opened ({type(exc).__name__}: {exc}). " + reset_hint(directory)
        ) from None


def connect(directory: Path, *, timeout: float) -> Any:
    """``diskcache.Cache`` at ``directory`` (created if missing), eviction off; raises what it raises."""
    import diskcache

    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{directory} is a file, not a folder")
    directory.mkdir(parents=True, exist_ok=True)
    return diskcache.Cache(str(directory), timeout=timeout, eviction_policy="none", cull_limit=0)


_DB = "cache.db"
#: answers kept in the journal are written to the database once this many wait ...
WRITE_BATCH = 256
#: ... or once the first of them has waited this many seconds (told at the next answer; a
#: collection writes what is left when it ends)
WRITE_WINDOW_S = 0.25


#: a stored value as compact JSON text, non-ASCII kept: what ``json.dumps`` with these options
#: writes, from one encoder instead of one built for every value
encode_value = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class DiskCache:
    """JSON values under string keys in a ``diskcache.Cache`` at ``directory``, opened on first use.

    ``create=False`` (offline mode) opens an existing store only: where there is none, every
    ``get`` misses and nothing is created on disk. ``notices`` says when the store was found
    emptied or reset (its folder without a database, or a 0-byte database; with ``watched``, the
    folder itself gone once made; its table of values dropped): diskcache would silently start
    afresh, and every response would be asked for again.

    Damage heals (see :mod:`pytest_llmbias.store.repair`): a database that cannot be opened, or
    whose pages are found broken while read or written, is moved aside and rebuilt from what can
    be read of it and from the journals (``repairs`` lists each, for the warning); a row that
    cannot be read as text is a miss, kept in ``unreadable`` (key -> why). Offline, nothing is
    moved: a damaged database serves nothing, and says so.
    """

    def __init__(self, directory: Path, *, timeout: float = 60.0, create: bool = True, watched: bool = False) -> None:
        self.directory = Path(directory)
        self._timeout = timeout
        self._create = create
        self._watched = watched
        self._cache: Any = None
        self._absent = False
        self._inode: int | None = None  # of the database opened: another process may rebuild it
        self.notices: list[str] = []
        self.repairs: list[repair.Repair] = []
        self.unreadable: dict[str, str] = {}
        self._journal = journal.Journal(self.directory) if journal.available() else None
        self._pending: dict[str, str] = {}  # in the journal, not yet in the database
        self._since = 0.0

    @property
    def marker(self) -> Path:
        """The file beside a watched folder that says it was made (so its loss can be told)."""
        return self.directory.with_name(self.directory.name + ".made")

    def _open(self) -> Any:
        if self._cache is None and not self._absent:
            db = self.directory / _DB
            if self.directory.exists() and not self.directory.is_dir():
                raise StoreError(
                    f"{self.directory} is a file, where the store keeps its answers' folder: move it out of the "
                    f"way (mv '{self.directory}' '{self.directory}.moved') and run again"
                )
            found = repair.inspect(db, timeout=self._timeout)
            self._tell_emptied(db, found)
            if not self._create and (not db.is_file() or found.damage is not None):
                if found.damage is not None:
                    self.notices.append(
                        f"the store's database {db} cannot be read ({found.damage}): offline, nothing is "
                        "served from it and nothing is changed. " + repair_hint(self.directory)
                    )
                self._absent = True
                return None
            if found.damage is not None:
                self._heal(found.damage, _inode(db))
            else:
                try:
                    self._connect()
                except StoreError:
                    raise
                except Exception as exc:
                    if not repair.is_damage(exc):
                        raise self._failed("opened", exc) from None
                    self._heal(f"{type(exc).__name__}: {exc}", _inode(db))
            if self._watched and self._create and not self.marker.exists():
                with contextlib.suppress(OSError):
                    self.marker.write_text(
                        "the store's answers are in the folder beside this file; this file lets a run tell "
                        "when that folder has been deleted\n",
                        encoding="utf-8",
                    )
            self.recover()
        return self._cache

    def _tell_emptied(self, db: Path, found: repair.Inspection) -> None:
        """Say so where the store was found emptied (see the class's promise)."""
        offline = "" if self._create else " (offline: every call is a miss)"
        state = None
        if not self.directory.exists():
            if self._watched and self.marker.is_file():
                state = f"its folder {self.directory.name}/ is missing"
        elif not db.exists() or (db.is_file() and db.stat().st_size == 0):
            state = f"its {_DB} {'is empty (0 bytes)' if db.exists() else 'is missing'}"
        elif found.tables is not None and "Cache" not in found.tables:
            state = f"its {_DB} has no Cache table (dropped)"
        if state is not None:
            self.notices.append(
                f"the store at {self.directory} was emptied or reset ({state}): no stored response can be "
                "served, and every call is made again" + offline
            )

    def _connect(self) -> Any:
        """Open the database (raising what diskcache raises), noting which file it is."""
        self._cache = connect(self.directory, timeout=self._timeout)
        self._inode = _inode(self.directory / _DB)
        return self._cache

    def _failed(self, doing: str, exc: Exception) -> StoreError:
        return StoreError(
            f"the store at {self.directory} cannot be {doing} ({type(exc).__name__}: {exc}). "
            + repair_hint(self.directory)
        )

    def _heal(self, why: str, found: int | None) -> None:
        """Move the damaged database aside and rebuild it (see :mod:`pytest_llmbias.store.repair`),
        unless another process did so since it was found damaged (``found``: the inode then)."""
        db = self.directory / _DB
        lock_path = self.directory / repair.REPAIR_LOCK
        self.directory.mkdir(parents=True, exist_ok=True)
        bad = repair.not_a_file(lock_path, "repair lock")
        if bad is not None:
            raise bad
        from filelock import FileLock

        if self._cache is not None:
            self._cache.close()
            self._cache = None
        with FileLock(str(lock_path), timeout=self._timeout):
            if _inode(db) != found:  # rebuilt by another process meanwhile
                self._connect()
                return
            aside = repair.move_aside(db)
            try:
                cache = self._connect()
            except Exception as exc:
                raise self._failed("rebuilt", exc) from None
            kept = repair.salvage(aside, self.directory)
            with cache.transact():
                for key, text in kept.rows:
                    cache.add(key, text)
            from_journals = self.recover()
        self.repairs.append(repair.Repair(db, why, aside, len(kept.rows), kept.unreadable, from_journals))

    def _guarded(self, doing: str, action: Callable[[Any], T]) -> T:
        """``action(cache)``; where SQLite finds the database damaged, heal it and try once more."""
        cache = self._open()
        try:
            return action(cache)
        except Exception as exc:
            if not repair.is_damage(exc):
                raise self._failed(doing, exc) from None
            if not self._create:
                raise self._failed(doing, exc) from None
            self._heal(f"{type(exc).__name__}: {exc}", self._inode)
        try:
            return action(self._cache)
        except Exception as exc:
            raise self._failed(doing, exc) from None

    def repair(self) -> repair.Repair | None:
        """Open the store, healing it where it is damaged; read every row (a row that cannot be read
        as text noted in :attr:`unreadable`), and have SQLite check every page: where a page is
        broken, heal that too. Returns the repair made (None: none was needed)."""
        before = len(self.repairs)
        if self._open() is None:
            return None

        def check(cache: Any) -> None:
            select_many(cache, [k for k in cache.iterkeys() if type(k) is str], self.unreadable)
            (verdict,) = cache._sql("PRAGMA integrity_check(1)").fetchone()
            if verdict != "ok":
                raise sqlite3.DatabaseError(f"SQLite's check of its pages: {verdict}")

        self._guarded("read", check)
        return self.repairs[before] if len(self.repairs) > before else None

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

        for path in repair.journal_files(self.directory):
            bad = repair.not_a_file(path, "journal of a run")
            if bad is not None:
                raise bad
        try:
            return journal.replay(self.directory, write)
        except Exception as exc:
            if not self._create:
                return 0
            raise StoreError(
                f"the store at {self.directory} cannot take in the answers of an interrupted run "
                f"({type(exc).__name__}: {exc}); they stay in its journals. " + repair_hint(self.directory)
            ) from None

    def get(self, key: str) -> Any | None:
        raw = self.get_raw(key)
        return None if raw is None else self.decode(key, raw)

    def get_raw(self, key: str) -> str | None:
        """The JSON text stored under ``key`` (what :meth:`get` decodes), or None: a row that cannot
        be read as text is None too, and noted in :attr:`unreadable`."""
        kept = self._pending.get(key)
        if kept is not None:
            return kept
        if self._open() is None:
            return None
        found = self._guarded("read", lambda c: select_one(c, key, self.unreadable))
        return found

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The values of those ``keys`` that are stored, by key: what :meth:`get` gives each, read
        in a few queries (one per 500 keys) instead of one per key."""
        return {key: self.decode(key, raw) for key, raw in self.get_raw_many(keys).items()}

    def get_raw_many(self, keys: Sequence[str]) -> dict[str, str]:
        """The JSON texts of those ``keys`` that are stored (what :meth:`get_many` decodes); a row
        that cannot be read as text is left out, and noted in :attr:`unreadable`."""
        if not keys or self._open() is None:
            return {}
        pending = self._pending  # the same dictionary throughout, whatever another thread flushes
        found = self._guarded("read", lambda c: select_many(c, keys, self.unreadable))
        if pending:
            found.update((k, pending[k]) for k in keys if k in pending)
        return found

    def decode(self, key: str, raw: Any) -> Any:
        """The value of ``key`` stored as ``raw``; an unreadable one is a :class:`StoreError`
        with the repair hint."""
        try:
            return json.loads(raw)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"the store at {self.directory} holds an unreadable entry {key!r} ({exc}). "
                + repair_hint(self.directory)
            ) from None

    def keys(self, prefix: str = "") -> list[str]:
        """Every stored key that starts with ``prefix`` (this process's journal included)."""
        if self._open() is None:
            return [k for k in self._pending if k.startswith(prefix)]
        found = self._guarded(
            "listed", lambda c: [k for k in c.iterkeys() if isinstance(k, str) and k.startswith(prefix)]
        )
        return sorted({*found, *(k for k in self._pending if k.startswith(prefix))})

    def delete(self, key: str) -> None:
        """Forget ``key`` (nothing when it is not stored)."""
        self._writable()
        self._pending.pop(key, None)
        self._guarded("written", lambda c: c.delete(key))

    def _writable(self) -> Any:
        """The cache, opened; a :class:`StoreError` when the store was opened read-only."""
        if not self._create:
            raise StoreError(f"the store at {self.directory} was opened read-only (offline mode)")
        return self._open()

    def set(self, key: str, value: Any) -> None:
        self.set_text(key, encode_value(value))

    def set_text(self, key: str, text: str) -> None:
        """:meth:`set` of a value already written as JSON (``text``)."""
        self._writable()
        self._pending.pop(key, None)
        self._guarded("written", lambda c: c.set(key, text))

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
            raise self._failed("written", exc) from None
        if not self._pending:
            self._since = time.monotonic()
        self._pending[key] = text
        if len(self._pending) >= WRITE_BATCH or time.monotonic() - self._since >= WRITE_WINDOW_S:
            self.flush()

    def flush(self) -> None:
        """Write the answers kept in the journal to the database, in one transaction, and empty
        the journal. On failure they stay in the journal (a later writer recovers them). Where
        another process moved the database aside and rebuilt it meanwhile, they are written again
        to the new one."""
        if not self._pending:
            return
        self._open()
        pending = self._pending
        self._guarded("written", lambda c: write_many(c, pending))
        if self._inode != _inode(self.directory / _DB):  # written to a database moved aside since
            self._cache.close()
            self._cache = None
            self._guarded("written", lambda c: write_many(c, pending))
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


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None
