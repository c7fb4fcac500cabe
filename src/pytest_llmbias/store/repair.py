"""Damage to the disk store's database: found, moved aside, and what can be read of it kept.

A store's answers are worth money and time, so damage never costs more of them than it must. An
answer row that cannot be read is that answer's loss alone (the run asks it again: see
:class:`~pytest_llmbias.store.response_store.ResponseStore`). A database that cannot be opened
(truncated, a foreign header, random bytes, a folder where the file belongs) or whose pages are
found broken while it is read is *moved aside*, renamed beside itself as
``cache.db.damaged-<time>`` (with its ``-wal`` file), and kept for inspection; a new database is
created in its place and given every row that can still be read from the old one
(:func:`salvage`) and the answers of the journals that interrupted runs left (see
:mod:`pytest_llmbias.store.journal`). Snapshots are read beneath the store as always.

What is damage here is what SQLite reports as a corrupt or foreign file (``DatabaseError`` that is
no ``OperationalError``, or text of its schema that is not UTF-8). A locked or busy database, a
full disk or a refused permission is not: those stay errors, since moving a healthy database aside
would lose the answers other processes are writing to it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import StoreError

DB = "cache.db"
#: the first bytes of every SQLite database file
HEADER = b"SQLite format 3\x00"
#: diskcache's modes: a value kept in the row as it is, or as text in a file of its own
MODE_RAW, MODE_TEXT = 1, 3
#: the lock taken while a damaged database is moved aside and rebuilt, in the store's folder
REPAIR_LOCK = "repair.lock"
#: the rows looked up one by one when a damaged table cannot be read in one pass
MAX_ROWS_PROBED = 1_000_000


@dataclass(frozen=True)
class Inspection:
    """What :func:`inspect` found: ``damage`` (why the database cannot be used; None: it can, or
    there is none) and the names of its ``tables`` (None where they could not be read)."""

    damage: str | None
    tables: frozenset[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"damage": self.damage, "tables": None if self.tables is None else sorted(self.tables)}


@dataclass(frozen=True)
class Repair:
    """A database moved aside and rebuilt: the ``database``, why (``damage``), where it was kept
    (``aside``), the answers and other rows ``recovered`` from it, the rows of it that could not
    be read (``unreadable``; None where not one row could: how many it held is unknown) and the
    answers taken from the journals of interrupted runs (``from_journals``)."""

    database: Path
    damage: str
    aside: Path
    recovered: int
    unreadable: int | None
    from_journals: int

    def message(self, asked_again: int | None = None) -> str:
        """The warning a run shows; ``asked_again``: how many of the answers it needs the rebuilt
        store lacks (they are asked again)."""
        lost = (
            "none of its rows could be read"
            if self.unreadable is None
            else f"{self.unreadable} of its rows could not be read"
        )
        again = (
            "" if asked_again is None else f"; {asked_again} answer(s) this run needs are not in it and are asked again"
        )
        return (
            f"the store's database {self.database} could not be read ({self.damage}): it was moved aside to "
            f"{self.aside} (kept for inspection) and rebuilt with the {self.recovered} row(s) read from it and "
            f"{self.from_journals} answer(s) from the journals of interrupted runs ({lost}){again}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "database": str(self.database),
            "damage": self.damage,
            "aside": str(self.aside),
            "recovered": self.recovered,
            "unreadable": self.unreadable,
            "from_journals": self.from_journals,
        }


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc``, raised by SQLite on the store's database, says the file is corrupt or no
    database (not locked, busy, full or refused)."""
    if isinstance(exc, sqlite3.OperationalError):
        return False
    return isinstance(exc, (sqlite3.DatabaseError, UnicodeDecodeError))


def not_a_file(path: Path, what: str) -> StoreError | None:
    """A :class:`StoreError` naming ``path`` when something other than a file is there (a folder
    where ``what`` belongs); None where there is a file or nothing."""
    if path.is_symlink() or not path.exists() or path.is_file():
        return None
    kind = "a folder" if path.is_dir() else "not a regular file"
    return StoreError(
        f"{path} is {kind}, where the store keeps its {what} (a file): move it out of the way "
        f"(mv '{path}' '{path}.moved') and run again; it holds none of the store's answers"
    )


def inspect(db: Path, *, timeout: float = 60.0) -> Inspection:
    """Why the database file ``db`` cannot be used, if it cannot: a folder or other non-file in its
    place, a header that is not SQLite's, or a schema SQLite finds corrupt. An absent or empty
    file is no damage (the store says it was emptied). Reads the header and the schema only: a
    page broken further in is found when it is read (:func:`is_damage`)."""
    if db.exists() and not db.is_file():
        return Inspection(f"{db.name} is a folder, not a file" if db.is_dir() else f"{db.name} is not a regular file")
    if not db.is_file() or db.stat().st_size == 0:
        return Inspection(None)
    with db.open("rb") as f:
        head = f.read(len(HEADER))
    if head != HEADER[: len(head)] or len(head) < len(HEADER):
        return Inspection("its header is not an SQLite database's")
    try:
        con = read_only(db, timeout=timeout)
        try:
            tables = frozenset(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        finally:
            con.close()
    except Exception as exc:
        if is_damage(exc):
            return Inspection(f"{type(exc).__name__}: {exc}")
        return Inspection(None)  # locked, busy, refused: not damage; opening it says what it is
    return Inspection(None, tables)


def read_only(db: Path, *, timeout: float = 5.0) -> sqlite3.Connection:
    """A connection that reads ``db`` and writes nothing beside it: without a ``-wal`` file (no
    writer in WAL mode has it open) the file is read as it is, creating no ``-wal`` or ``-shm``."""
    mode = "ro" if db.with_name(db.name + "-wal").exists() else "ro&immutable=1"
    return sqlite3.connect(f"file:{db}?mode={mode}", uri=True, timeout=timeout, isolation_level=None)


def move_aside(db: Path) -> Path:
    """Rename ``db`` (and its ``-wal``; its ``-shm`` is dropped, SQLite makes one) beside itself as
    ``cache.db.damaged-<UTC time>``, a name no other file has. Returns the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = db.with_name(f"{db.name}.damaged-{stamp}")
    n = 1
    while aside.exists() or aside.is_symlink():
        n += 1
        aside = db.with_name(f"{db.name}.damaged-{stamp}-{n}")
    os.replace(db, aside)
    wal = db.with_name(db.name + "-wal")
    if wal.is_file():
        os.replace(wal, aside.with_name(aside.name + "-wal"))
    with contextlib.suppress(OSError):
        db.with_name(db.name + "-shm").unlink()
    return aside


@dataclass(frozen=True)
class Salvage:
    """The rows read from a damaged database (``rows``: key, JSON text) and how many of its rows
    could not be (``unreadable``; None where none could be read at all)."""

    rows: tuple[tuple[str, str], ...]
    unreadable: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"rows": len(self.rows), "unreadable": self.unreadable}


def salvage(aside: Path, folder: Path) -> Salvage:
    """Every row of the diskcache table ``Cache`` in the damaged database ``aside`` whose key and
    value can still be read as text (a value kept in a file of its own is read from ``folder``,
    the store's). ``aside`` (and its ``-wal``) is left exactly as it is: a copy is read, as it is;
    then, where that did not read every row, with SQLite told to trust the file's size over its
    header's (a truncated file); then with its first page (the header and the schema, which a
    damaged byte there makes unreadable) replaced by a new store's. The most rows any of these
    gives are kept: each row is a record that names its own key, which the reader checks."""
    if not aside.is_file():
        return Salvage((), None)
    copy = aside.with_name(aside.name + ".reading")
    wal = aside.with_name(aside.name + "-wal")
    best: Salvage | None = None
    try:
        shutil.copyfile(aside, copy)
        if wal.is_file():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        for prepare in (None, _trust_file_size, _fresh_first_page):
            if prepare is not None and not prepare(copy):
                continue
            got = _read_rows(copy, folder)
            if got is not None and (best is None or len(got.rows) > len(best.rows)):
                best = got
            if best is not None and best.unreadable == 0:
                break
    except OSError:
        pass
    finally:
        for p in (copy, copy.with_name(copy.name + "-wal"), copy.with_name(copy.name + "-shm")):
            with contextlib.suppress(OSError):
                p.unlink()
    return _trusted(best) if best is not None else Salvage((), None)


def _trusted(got: Salvage) -> Salvage:
    """``got`` without the answers it cannot vouch for: in a store whose answers are sealed (see
    :func:`~pytest_llmbias.store.records.seal`; any one read with its seal intact says so), an
    answer whose seal does not check, or is gone, comes from a damaged file and may have been
    changed: it is left out (counted unreadable) and asked again. A store of earlier releases,
    none sealed, keeps every row that reads."""
    from pytest_llmbias.store.seal import unseal

    sealed: dict[int, bool] = {}  # row -> whether its seal checks
    for i, (key, text) in enumerate(got.rows):
        if key.startswith("response:"):
            try:
                sealed[i] = unseal(text) != text
            except ValueError:
                sealed[i] = False
    if not any(sealed.values()):
        return got
    kept = tuple(row for i, row in enumerate(got.rows) if sealed.get(i, True))
    return Salvage(kept, (got.unreadable or 0) + len(got.rows) - len(kept))


def _trust_file_size(db: Path) -> bool:
    """Make SQLite take ``db``'s size in pages from the file, not the header (it believes the
    header only while its change counter and its version-valid-for number agree)."""
    with db.open("r+b") as f:
        f.seek(24)
        counter = f.read(4)
        if len(counter) < 4:
            return False
        f.seek(92)
        f.write(bytes(b ^ 0xFF for b in counter))
    return True


#: the page size of a database diskcache creates (SQLite's default)
_PAGE = 4096


def _fresh_first_page(db: Path) -> bool:
    """Replace ``db``'s first page by that of a new, empty diskcache database (whose schema is the
    same, at the same pages, for a store this diskcache made), then trust the file's size."""
    import tempfile

    import diskcache

    with db.open("rb") as f:
        head = f.read(18)
    size = int.from_bytes(head[16:18], "big") if len(head) == 18 else 0
    if head.startswith(HEADER) and size not in (0, _PAGE):  # a header that reads, of another size
        return False
    with tempfile.TemporaryDirectory() as tmp:
        diskcache.Cache(tmp, timeout=5.0, eviction_policy="none", cull_limit=0).close()
        page = (Path(tmp) / DB).read_bytes()[:_PAGE]
    if len(page) < _PAGE or db.stat().st_size < 2 * _PAGE:
        return False
    with db.open("r+b") as f:
        f.write(page)
    return _trust_file_size(db)


ROW = "SELECT CAST(key AS BLOB), raw, mode, filename, CAST(value AS BLOB) FROM Cache"


def _read_rows(db: Path, folder: Path) -> Salvage | None:
    """The readable rows of ``db``'s ``Cache`` table (None: not one could be read): in one pass
    where the table reads whole, else row by row up to its highest row id."""
    try:
        con = sqlite3.connect(str(db), timeout=5.0, isolation_level=None)
    except Exception:
        return None
    rows: list[tuple[str, str]] = []
    bad = 0

    def keep(found: list[Any]) -> None:
        nonlocal bad
        for row in found:
            text = row_text(row, folder)
            if text is None:
                bad += 1
            else:
                rows.append(text)

    try:
        try:
            keep(con.execute(ROW).fetchall())
            return Salvage(tuple(rows), bad)
        except Exception:
            rows, bad = [], 0
        top = _highest_rowid(con)
        if top is None:
            return None
        for rowid in range(1, min(top, MAX_ROWS_PROBED) + 1):
            try:
                found = con.execute(ROW + " WHERE rowid = ?", (rowid,)).fetchall()
            except Exception:
                bad += 1
                continue
            keep(found)
        return Salvage(tuple(rows), bad)
    finally:
        con.close()


def _highest_rowid(con: sqlite3.Connection) -> int | None:
    """The highest row id of ``Cache``, or where that cannot be read an upper bound from
    diskcache's count of rows (doubled, for the rows deleted since); None: neither reads."""
    for query, scale in (("SELECT max(rowid) FROM Cache", 1), ("SELECT value FROM Settings WHERE key = 'count'", 2)):
        try:
            (value,) = con.execute(query).fetchone()
            return int(value) * scale + (0 if scale == 1 else 1000)
        except Exception:
            continue
    return None


def row_text(row: tuple[Any, ...], folder: Path) -> tuple[str, str] | None:
    """(key, text) of one row: a string key and a text value (in the row or in its file), else None."""
    key, raw, mode, filename, value = row
    try:
        if not raw or not isinstance(key, bytes):
            return None
        if mode == MODE_RAW and isinstance(value, bytes) and filename is None:
            return key.decode("utf-8"), value.decode("utf-8")
        if mode == MODE_TEXT and isinstance(filename, str):
            return key.decode("utf-8"), (folder / filename).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError, ValueError):
        return None
    return None


def journal_files(folder: Path) -> Iterator[Path]:
    """The journal paths in ``folder`` (see :mod:`pytest_llmbias.store.journal`), files or not."""
    from pytest_llmbias.store.journal import PREFIX, SUFFIX

    return iter(sorted(folder.glob(f"{PREFIX}*{SUFFIX}")))
