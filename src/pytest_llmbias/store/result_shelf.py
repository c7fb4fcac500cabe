"""A folder of computed results kept between runs, one file each (a run's resamplings: see
:mod:`pytest_llmbias.stats.shelf`).

Each value is a file named by its key, written whole (to a temporary file, then renamed into
place), so a reader in another process or thread sees a value whole or not at all, and a crash
leaves no half-written one. A value read is marked as used (its modification time); when the run
ends the folder keeps its :data:`KEPT` most recently used files. A value that cannot be read is a
miss and one that cannot be written is not kept: a result that is not found is computed again, so
a broken or read-only folder costs time, never a verdict.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from pathlib import Path

#: how many results the folder keeps (a few hundred KB at most each)
KEPT = 512
#: a temporary file older than this (seconds) is a crash's leftover, not another writer's
_PART_LEFT_S = 3600
_NAME = re.compile(r"[0-9a-f]{64}")


class ResultShelf:
    """Values (bytes) under keys (64 hex digits) in the files of ``directory``, created on the
    first value written."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def _path(self, key: str) -> Path:
        if not _NAME.fullmatch(key):
            raise ValueError(f"a shelf key is 64 hex digits, got {key!r}")
        return self.directory / key

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            value = path.read_bytes()
        except OSError:
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used: kept by prune() before those not used lately
        return value

    def set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".part-")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(value)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def prune(self, keep: int = KEPT) -> int:
        """Delete all but the ``keep`` most recently used values (and any temporary file left by
        a crash); how many were deleted."""
        try:
            entries = [(p.stat().st_mtime, p) for p in self.directory.iterdir()]
        except OSError:
            return 0
        values = sorted(((t, p) for t, p in entries if _NAME.fullmatch(p.name)), reverse=True)
        stale = [p for _, p in values[keep:]]
        left_before = time.time() - _PART_LEFT_S
        stale += [p for t, p in entries if p.name.startswith(".part-") and t < left_before]
        deleted = 0
        for path in stale:
            with contextlib.suppress(OSError):
                path.unlink()
                deleted += 1
        return deleted
