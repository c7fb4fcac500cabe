"""A disk store examined without a change (``llmbias store check``) and healed on demand
(``llmbias store repair``).

The check reads the store's folder the way a run would find it, through read-only connections:
every damage a run would heal or warn of (see :mod:`pytest_llmbias.store.repair` and
:class:`~pytest_llmbias.store.disk.DiskCache`), every row that cannot be read as an answer, the
pages SQLite finds broken, and what is not a file where the store keeps a file (its locks, its
journals). The repair does what a run does when it finds the damage, with no model asked: the
database moved aside and rebuilt, the journals of interrupted runs taken in, and the rows that
cannot be read moved out of the database into a file kept beside it (the next run asks those
answers again, as it would have).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.store import journal, repair
from pytest_llmbias.store.seal import unseal

RESPONSES = "responses"
#: the store's own files, each of which must be a file where it exists
_FILES = (("collect.lock", "collection lock"), ("collect.lock.alive", "collection heartbeat"))
_PREFIX = "response:"


@dataclass(frozen=True)
class Checkup:
    """What :func:`check` found in the store at ``directory``: ``problems`` (damage: each a
    sentence), ``notes`` (what is worth knowing and is no damage), the ``answers`` that read and
    the keys of those that do not (``unreadable``: store key -> why)."""

    directory: Path
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    answers: int
    unreadable: tuple[tuple[str, str], ...] = ()

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "problems": list(self.problems),
            "notes": list(self.notes),
            "answers": self.answers,
            "unreadable": [list(u) for u in self.unreadable],
        }


def check(directory: Path) -> Checkup:
    """Examine the store at ``directory`` (the folder that holds ``responses/``) and change
    nothing: no file is written, renamed or locked for longer than a look at a journal's lock."""
    directory = Path(directory)
    problems: list[str] = []
    notes: list[str] = []
    folder = directory / RESPONSES
    db = folder / repair.DB
    if directory.exists() and not directory.is_dir():
        return Checkup(directory, (f"{directory} is a file, where the store's folder belongs",), (), 0)
    for name, what in _FILES:
        bad = repair.not_a_file(directory / name, what)
        if bad is not None:
            problems.append(str(bad))
    marker = folder.with_name(folder.name + ".made")
    if not folder.exists():
        if marker.is_file():
            problems.append(f"{folder} is missing (deleted): the answers it held are gone, and are asked again")
        else:
            notes.append(f"no answer is stored at {directory} yet")
        return Checkup(directory, tuple(problems), tuple(notes), 0)
    if not folder.is_dir():
        problems.append(f"{folder} is a file, where the store keeps its answers' folder")
        return Checkup(directory, tuple(problems), tuple(notes), 0)
    for name in (repair.REPAIR_LOCK,):
        bad = repair.not_a_file(folder / name, "repair lock")
        if bad is not None:
            problems.append(str(bad))
    waiting = _journals(folder, problems)
    if waiting:
        notes.append(
            f"{waiting} answer(s) of interrupted runs wait in journals: the next run or a repair takes them in"
        )
    kept = sorted(p.name for p in folder.glob(f"{repair.DB}.damaged-*") if not p.name.endswith(("-wal", "-shm")))
    if kept:
        notes.append(f"damaged databases kept for inspection: {', '.join(kept)}")
    found = repair.inspect(db, timeout=5.0)
    if found.damage is not None:
        problems.append(f"{db} cannot be read ({found.damage}): a run (or a repair) moves it aside and rebuilds it")
        return Checkup(directory, tuple(problems), tuple(notes), 0)
    if not db.is_file() or db.stat().st_size == 0:
        state = "is missing" if not db.exists() else "is empty (0 bytes)"
        (problems if marker.is_file() else notes).append(f"{db} {state}: no answer can be served from it")
        return Checkup(directory, tuple(problems), tuple(notes), 0)
    if found.tables is not None and "Cache" not in found.tables:
        problems.append(f"{db} has no Cache table (dropped): the answers it held are gone, and are asked again")
        return Checkup(directory, tuple(problems), tuple(notes), 0)
    answers, unreadable, damage = _read_all(db, folder)
    if damage is not None:
        problems.append(f"{db} has broken pages ({damage}): a run (or a repair) moves it aside and rebuilds it")
    if unreadable:
        shown = "; ".join(f"{k.removeprefix(_PREFIX)[:16]}: {why}" for k, why in unreadable[:5])
        more = f"; and {len(unreadable) - 5} more" if len(unreadable) > 5 else ""
        problems.append(
            f"{len(unreadable)} stored answer(s) cannot be read (a run asks each again alone): {shown}{more}"
        )
    return Checkup(directory, tuple(problems), tuple(notes), answers, tuple(unreadable))


def _journals(folder: Path, problems: list[str]) -> int:
    """The answers waiting in the journals of dead writers in ``folder``; a journal path that is
    not a file is a problem."""
    waiting = 0
    for path in repair.journal_files(folder):
        bad = repair.not_a_file(path, "journal of a run")
        if bad is not None:
            problems.append(str(bad))
            continue
        if journal.available() and not _dead(path):
            continue
        with contextlib.suppress(OSError):
            waiting += sum(1 for line in path.read_bytes().split(b"\n")[:-1] if b"\t" in line)
    return waiting


def _dead(path: Path) -> bool:
    """Whether the journal's writer is gone (its lock free), looked at without keeping the lock."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing lets go of the lock
    return True


def _read_all(db: Path, folder: Path) -> tuple[int, list[tuple[str, str]], str | None]:
    """The answers of ``db`` that read as records of their key, those that do not (key -> why),
    and the damage SQLite finds in its pages (None: none), through a read-only connection."""
    from pytest_llmbias.store.calls import Response

    answers = 0
    unreadable: list[tuple[str, str]] = []
    try:
        con = repair.read_only(db)
    except sqlite3.Error as exc:
        return 0, [], f"{type(exc).__name__}: {exc}"
    try:
        rows = con.execute(repair.ROW).fetchall()
        (verdict,) = con.execute("PRAGMA integrity_check(1)").fetchone()
    except sqlite3.Error as exc:
        return 0, [], f"{type(exc).__name__}: {exc}"
    finally:
        con.close()
    for row in rows:
        key, why = _read_row(row, folder, Response)
        if key is None or not key.startswith(_PREFIX):
            continue
        if why is None:
            answers += 1
        else:
            unreadable.append((key, why))
    return answers, unreadable, None if verdict == "ok" else f"SQLite's check of its pages: {verdict}"


def _read_row(row: tuple[Any, ...], folder: Path, response: Any) -> tuple[str | None, str | None]:
    """(key, why the row is no answer of its key; None: it is one)."""
    raw_key = row[0]
    try:
        key = raw_key.decode("utf-8") if isinstance(raw_key, bytes) else None
    except UnicodeDecodeError:
        return None, None
    if key is None:
        return None, None
    text = repair.row_text(row, folder)
    if text is None:
        return key, "its text cannot be read (not UTF-8, or its file is missing)"
    try:
        record = json.loads(unseal(text[1]))
        if not isinstance(record, dict):
            raise ValueError("not a JSON response record")
        kept = response.from_dict(record, source="store")
        if kept.key != key.removeprefix(_PREFIX) or record.get("key") != key.removeprefix(_PREFIX):
            raise ValueError("its request fields hash to another key")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return key, f"{type(exc).__name__}: {exc}"
    return key, None


@dataclass(frozen=True)
class RepairDone:
    """What :func:`repair_store` did: the database's ``rebuilt`` (None: it needed none), the rows
    that could not be read ``moved_out`` to the file ``unreadable_file``, the ``recovered`` answers
    of interrupted runs' journals, what the store said on opening (``notices``: found emptied) and
    the checkup after."""

    rebuilt: repair.Repair | None
    moved_out: int
    unreadable_file: Path | None
    recovered: int
    notices: tuple[str, ...]
    after: Checkup

    def to_dict(self) -> dict[str, Any]:
        return {
            "rebuilt": None if self.rebuilt is None else self.rebuilt.to_dict(),
            "moved_out": self.moved_out,
            "unreadable_file": None if self.unreadable_file is None else str(self.unreadable_file),
            "recovered": self.recovered,
            "notices": list(self.notices),
            "after": self.after.to_dict(),
        }


def repair_store(directory: Path) -> RepairDone:
    """Heal the store at ``directory`` as a run would (see the module's promise) and check it again.
    Nothing readable is dropped: a row that cannot be read leaves the database only once written,
    as it was stored, to ``responses/unreadable-<time>.jsonl``."""
    from pytest_llmbias.store.disk import DiskCache

    directory = Path(directory)
    folder = directory / RESPONSES
    waiting = _journals(folder, []) if folder.is_dir() else 0
    store = DiskCache(folder, watched=True)
    try:
        rebuilt = store.repair()
        before = check(directory)
        moved, path = _move_out(folder, before.unreadable)
    finally:
        store.close()
    recovered = waiting if rebuilt is None else rebuilt.from_journals
    return RepairDone(rebuilt, moved, path, recovered, tuple(store.notices), check(directory))


def _move_out(folder: Path, unreadable: tuple[tuple[str, str], ...]) -> tuple[int, Path | None]:
    """Write the rows of ``unreadable`` keys, as stored, to a file beside the database, then delete
    them from it."""
    if not unreadable:
        return 0, None
    db = folder / repair.DB
    path = folder / f"unreadable-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl"
    con = sqlite3.connect(str(db), timeout=60.0, isolation_level=None)
    try:
        with path.open("a", encoding="utf-8") as out:
            for key, why in unreadable:
                for (value,) in con.execute("SELECT CAST(value AS BLOB) FROM Cache WHERE key = ?", (key,)):
                    text = value.decode("utf-8", errors="backslashreplace") if isinstance(value, bytes) else value
                    out.write(json.dumps({"key": key, "why": why, "stored": text}, ensure_ascii=False) + "\n")
        con.execute("BEGIN IMMEDIATE")
        con.executemany("DELETE FROM Cache WHERE key = ?", [(k,) for k, _ in unreadable])
        con.execute("COMMIT")
    finally:
        con.close()
    return len(unreadable), path
