"""The store's journal: each answer on disk the moment it arrives, written to the database in batches.

A transaction of the SQLite database under ``diskcache`` costs far more than the write of one line
to a file, and a collection writes thousands of answers. So an answer is first appended to the
writing process's journal file, ``journal-<host>-<pid>-<random>.log`` in the store's folder, in one
``write`` call: once that call returns the line is in the operating system's hands, and a
``kill -9`` of the process (or its crash) loses nothing. The answers kept since the last batch are
then written to the database together, in one transaction, and the journal is emptied.

While its writer lives, a journal is locked (``flock``); the operating system releases the lock
when the writer dies. Whoever opens the store next finds the journals of dead writers, writes
their answers to the database (:func:`replay`) and deletes them. A line the writer was cut off in
the middle of is incomplete and left out: its call had not finished, and is asked again.

A power cut may lose what the operating system had not yet written, as it may the database's last
transactions (``diskcache`` runs SQLite with ``synchronous=NORMAL``): the journal promises what the
database promises, a process's death loses no answer it was handed.

Where ``fcntl`` is missing (Windows), there is no journal: each answer is written to the database
at once, as before.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

PREFIX = "journal-"
SUFFIX = ".log"


def available() -> bool:
    """Whether this platform can keep a journal (it needs ``fcntl``'s locks)."""
    return fcntl is not None


class Journal:
    """One process's journal in ``directory``, created on the first :meth:`append`."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._fd: int | None = None
        self.path: Path | None = None
        self._pid = os.getpid()

    def _open(self) -> int:
        if self._fd is not None and self._pid != os.getpid():  # a forked child: the lock is not its own
            self._fd = None
        if self._fd is None:
            name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
            # locked under a name no replay looks at, then renamed: a replay never takes a new
            # journal for a dead one between its creation and its lock
            hidden = self.directory / f".{PREFIX}{name}"
            fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.path = self.directory / f"{PREFIX}{name}{SUFFIX}"
                os.rename(hidden, self.path)
            except BaseException:
                os.close(fd)
                hidden.unlink(missing_ok=True)
                raise
            self._fd, self._pid = fd, os.getpid()
        return self._fd

    def append(self, key: str, text: str) -> None:
        """Append ``text`` (a JSON document, on one line) under ``key`` in one ``write``."""
        if "\t" in key or "\n" in key or "\n" in text:
            raise ValueError("a journal line holds a key without tabs or newlines and one line of JSON")
        line = f"{key}\t{text}\n".encode()
        fd = self._open()
        written = os.write(fd, line)
        while written < len(line):  # a short write (a full disk, a signal): the rest, then the error
            written += os.write(fd, line[written:])

    def clear(self) -> None:
        """Empty the journal: its answers are in the database."""
        if self._fd is not None and self._pid == os.getpid():
            os.ftruncate(self._fd, 0)

    def close(self, *, keep: bool = False) -> None:
        """Delete the journal (its answers are in the database) and let go of its lock; ``keep``:
        leave it for the next writer to recover (its answers did not reach the database)."""
        if self._fd is not None and self._pid == os.getpid():
            if self.path is not None and not keep:
                self.path.unlink(missing_ok=True)
            os.close(self._fd)
        self._fd = None
        self.path = None


def _entries(data: bytes) -> Iterator[tuple[str, str]]:
    """The complete lines of a journal's bytes, as (key, JSON text)."""
    for raw in data.split(b"\n")[:-1]:  # the piece after the last newline is a line cut off
        key, sep, text = raw.decode("utf-8", errors="replace").partition("\t")
        if sep and key and text:
            yield key, text


def replay(directory: Path, write: Callable[[Sequence[tuple[str, str]]], None]) -> int:
    """Hand the answers of every dead writer's journal in ``directory`` to ``write`` (which puts
    them in the database), then delete the journal. A journal whose writer is alive is left alone.
    Returns how many answers were handed over."""
    if fcntl is None:
        return 0
    count = 0
    for path in sorted(Path(directory).glob(f"{PREFIX}*{SUFFIX}")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # replayed by another process meanwhile
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its writer is alive
                continue
            if not path.exists():  # replayed and deleted between our open and our lock
                continue
            with os.fdopen(os.dup(fd), "rb") as f:
                entries = list(_entries(f.read()))
            if entries:
                write(entries)
            path.unlink(missing_ok=True)
            count += len(entries)
        finally:
            os.close(fd)
    return count
