"""A checked snapshot's answers in a form read faster than its JSON lines.

A snapshot of a few thousand lines spends most of its reading time parsing each line's prompt (its
``messages``), which a run never needs: the run asks its calls by key and already holds each call.
Once every line of a file has been checked (see :class:`~pytest_llmbias.store.snapshot.CheckedSnapshots`),
its *index* is written beside the checked list: for each line, its key, where it lies in the file,
and the answer's fields, without the prompt. Reading the same bytes again reads the index; a line
whose call is needed is parsed from the file then (the bytes are the checked ones: the index is
named by their SHA-256).

Promises: an index is only ever a copy of what the file says; one that cannot be read, is of
another version, or does not match is ignored (the file is read line by line as before, and the
index written again); nothing is written where the folder does not exist or cannot be written; the
indexes of files no longer in the checked list are removed. The index holds plain values only, and
is read by an unpickler that refuses anything else.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.store.calls import number_positions

#: the folder, beside the checked list, of the indexes (one file per checked file's digest)
INDEX_DIR = "snapshot-index"
#: the index's layout; another is ignored
VERSION = 2
#: a row's fields after the key, in order (see :func:`row_of`)
FIELDS = (
    "start",
    "end",
    "lineno",
    "text",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "created",
    "top_logprobs",
    "system_fingerprint",
    "fingerprint",
    "labels",
    "number_logprobs",
)


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain values (str, numbers, None, tuples, lists, dicts) and refuses any class."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a snapshot index holds plain values only, not {module}.{name}")


def row_of(start: int, end: int, lineno: int, data: dict[str, Any], labels: dict[str, Any]) -> tuple[Any, ...]:
    """The index row of the line ``data`` (a parsed response record) at bytes ``start:end``."""
    usage = data.get("usage") or {}
    top = data.get("top_logprobs")
    number = data.get("number_logprobs")
    return (
        start,
        end,
        lineno,
        data["text"],
        data.get("finish_reason"),
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        data.get("latency_s"),
        data.get("created"),
        None if top is None else tuple((str(t), float(lp)) for t, lp in top),
        data.get("system_fingerprint"),
        data.get("fingerprint"),
        labels or None,
        None if number is None else number_positions(number),
    )


def load_index(folder: Path, digest: str, size: int) -> list[tuple[str, tuple[Any, ...]]] | None:
    """The (key, row) of every line of the checked file whose SHA-256 is ``digest`` and whose
    length is ``size``; None when there is no readable index of this version for it."""
    try:
        with open(Path(folder) / INDEX_DIR / f"{digest}.pickle", "rb") as handle:
            value = _PlainUnpickler(io.BytesIO(handle.read())).load()
        if not isinstance(value, dict) or value.get("v") != VERSION or value.get("digest") != digest:
            return None
        rows = value["rows"]
        for key, row in rows:  # the shape only; the values are the checked file's own
            if not isinstance(key, str) or len(row) != len(FIELDS) or not 0 <= row[0] <= row[1] <= size:
                return None
        return list(rows)
    except (OSError, EOFError, pickle.UnpicklingError, KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None


def write_index(folder: Path, digest: str, rows: Sequence[tuple[str, tuple[Any, ...]]], keep: Iterable[str]) -> None:
    """Write the index of the checked file ``digest`` in ``folder`` (nothing where it does not
    exist or cannot be written), and remove the indexes of files not in ``keep``."""
    where = Path(folder) / INDEX_DIR
    if not Path(folder).is_dir():
        return
    try:
        where.mkdir(exist_ok=True)
        blob = pickle.dumps({"v": VERSION, "digest": digest, "rows": list(rows)}, protocol=pickle.HIGHEST_PROTOCOL)
        tmp = where / f".{digest}.{os.getpid()}.tmp"
        try:
            tmp.write_bytes(blob)
            os.replace(tmp, where / f"{digest}.pickle")
        finally:
            tmp.unlink(missing_ok=True)
        wanted = {f"{d}.pickle" for d in keep} | {f"{digest}.pickle"}
        for old in where.glob("*.pickle"):
            if old.name not in wanted:
                old.unlink(missing_ok=True)
    except OSError:  # a read-only folder: the file is read line by line next time
        pass
