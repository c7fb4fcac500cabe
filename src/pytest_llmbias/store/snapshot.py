"""JSONL snapshots: one response per line, sorted for reviewable diffs, committed beside the tests.

A line is a response record (see :meth:`pytest_llmbias.calls.Response.to_dict`) plus optional
``labels`` (alias, domain, question id) for the reader. The ``key`` of every line is recomputed from
its request fields on reading; a line whose key does not match was edited by hand or written by an
incompatible version, and is an error rather than a silent miss.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_llmbias.calls import Response
from pytest_llmbias.errors import StoreError


def read_snapshot(path: Path) -> dict[str, Response]:
    """Every response in ``path`` by key. Raises :class:`StoreError` with the file and line."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"snapshot {path} cannot be read: {exc}") from None
    out: dict[str, Response] = {}
    with handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                response = Response.from_dict(data, source=f"snapshot:{path.name}")
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise StoreError(f"{path}:{lineno}: not a response record ({type(exc).__name__}: {exc})") from None
            if data.get("key") not in (None, response.key):
                raise StoreError(
                    f"{path}:{lineno}: the line's key does not match its request fields (edited by hand, "
                    "or written by an incompatible version); export the snapshot again"
                )
            out[response.key] = response
    return out


def read_labels(path: Path) -> dict[str, dict[str, Any]]:
    """The ``labels`` of every line of a snapshot, by key (lines without labels are left out)."""
    out: dict[str, dict[str, Any]] = {}
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                data = json.loads(line)
                if data.get("labels"):
                    out[data["key"]] = data["labels"]
    return out


def write_snapshot(
    path: Path, responses: Iterable[Response], labels: Mapping[str, Mapping[str, Any]] | None = None
) -> int:
    """Write ``responses`` to ``path`` atomically, sorted by labels then key. Returns the line count."""
    labels = labels or {}
    rows = []
    for response in responses:
        record = response.to_dict()
        if response.key in labels:
            record["labels"] = dict(labels[response.key])
        rows.append(record)

    def order(record: dict[str, Any]) -> tuple[str, str, str, int, str]:
        lab = record.get("labels", {})
        return (lab.get("domain", ""), lab.get("alias", ""), lab.get("question", ""), record["sample"], record["key"])

    rows.sort(key=order)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for record in rows:
                handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(rows)


def export_part_path(path: Path, worker_id: str, run_id: str | None = None) -> Path:
    """The file a pytest-xdist worker exports to instead of ``path``:
    ``<path>.<run>.<worker_id>.part``, the run being the first 8 characters of ``run_id`` (the
    run's id, shared by its workers), so that two runs never write or read each other's parts."""
    run = f".{run_id[:8]}" if run_id else ""
    return Path(f"{path}{run}.{worker_id}.part")


def merge_export_parts(path: Path, parts: Iterable[Path]) -> int:
    """Join the snapshot ``parts`` (the workers' exports) into ``path``, then remove them.

    A response in several parts is written once. Writes nothing when ``parts`` is empty.
    Returns the number of lines written.
    """
    parts = list(parts)
    if not parts:
        return 0
    merged: dict[str, Response] = {}
    labels: dict[str, Mapping[str, Any]] = {}
    for part in parts:
        merged.update(read_snapshot(part))
        labels.update(read_labels(part))
    count = write_snapshot(path, merged.values(), labels)
    for part in parts:
        Path(part).unlink()
    return count
