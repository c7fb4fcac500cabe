"""A domain file's parsed YAML kept between runs, so that a re-run does not parse it again.

Parsing a domain of ten thousand questions costs more than the rest of a warm run's per-question
work; the file rarely changes between runs. The parsed data and its key -> line map are kept as
JSON in a folder of the store (``<store>/domains/<sha256 of the file's bytes>.json``): a file
whose bytes changed is another entry, however its modification time reads. The line map, which
only an error message reads, is kept as one JSON string in the entry and decoded when first read
(it is twice the data's size: decoding it took three quarters of a kept parse's read); one that
does not decode is the file's, parsed again then. Only data that JSON
gives back unchanged is kept (a YAML date, a non-string key or a set is not: such a file is parsed
every time). An entry that cannot be read, or does not hold what one writes, is ignored and
written again; writing fails silently (a read-only folder only costs the parse).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

#: bumped when the entries' layout, or what the YAML loader gives for the same text, changes
FORMAT = 2


def entry_path(folder: Path, content: bytes) -> Path:
    """Where the parse of a file holding ``content`` is kept under ``folder``."""
    return folder / f"{hashlib.sha256(content).hexdigest()}.json"


def read_entry(path: Path, reparse: Callable[[], Mapping[str, int]]) -> tuple[Any, Mapping[str, int]] | None:
    """The (data, key -> line map) kept at ``path``; None when there is none, or it is damaged.
    The line map is decoded when first read; ``reparse`` gives the file's own where the kept one
    does not decode."""
    try:
        kept = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(kept, dict) or kept.get("format") != FORMAT or "data" not in kept:
        return None
    lines = kept.get("lines")
    if not isinstance(lines, str):
        return None
    return kept["data"], KeptLines(lines, reparse)


class KeptLines(Mapping[str, int]):
    """A kept key -> line map, decoded from its JSON when first read (a run whose domain is valid
    reads none of it); ``reparse``'s map where that JSON is not a map of whole numbers."""

    __slots__ = ("_decoded", "_reparse", "_text")

    def __init__(self, text: str, reparse: Callable[[], Mapping[str, int]]) -> None:
        self._text = text
        self._reparse = reparse
        self._decoded: Mapping[str, int] | None = None

    def _lines(self) -> Mapping[str, int]:
        if self._decoded is None:
            try:
                lines = json.loads(self._text)
            except (ValueError, RecursionError):
                lines = None
            if not isinstance(lines, dict) or not all(isinstance(v, int) for v in lines.values()):
                lines = self._reparse()
            self._decoded = lines
        return self._decoded

    def __getitem__(self, key: str) -> int:
        return self._lines()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines())

    def __len__(self) -> int:
        return len(self._lines())


#: the parses read before their store was made, by entry (the latest few): see :func:`write_pending`
_PENDING: dict[Path, tuple[Any, Mapping[str, int]]] = {}
_PENDING_KEPT = 16


def write_entry(path: Path, data: Any, lines: Mapping[str, int]) -> None:
    """Keep ``data`` and ``lines`` at ``path`` if JSON gives them back as they are, and only in a
    store that a run has already made (``path``'s folder's parent exists): planning, a usage error
    or ``--collect-only`` in a fresh project writes nothing. In a store not made yet, they wait for
    :func:`write_pending` at the run's end. A failure to write leaves nothing behind and raises
    nothing."""
    if not _plain(data):
        return
    if not path.parent.parent.is_dir():
        _PENDING.pop(path, None)
        if len(_PENDING) >= _PENDING_KEPT:
            del _PENDING[next(iter(_PENDING))]
        _PENDING[path] = (data, lines)
        return
    _write(path, data, lines)


def write_pending() -> None:
    """At a run's end: write the parses :func:`write_entry` kept for a store not made yet, where
    the run has made it since (its first collection: the next run reads its domains without
    parsing them); planning alone, a usage error or ``--collect-only`` made none, and nothing is
    written. Every kept parse is forgotten."""
    pending = list(_PENDING.items())
    _PENDING.clear()
    for path, (data, lines) in pending:
        if path.parent.parent.is_dir():
            _write(path, data, lines)


def _write(path: Path, data: Any, lines: Mapping[str, int]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(
            json.dumps(
                {"format": FORMAT, "data": data, "lines": json.dumps(dict(lines), ensure_ascii=False)},
                ensure_ascii=False,
                allow_nan=False,
            ),
            encoding="utf-8",
        )
        os.replace(temporary, path)  # whole or not at all, for a process reading it meanwhile
    except (OSError, ValueError):
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass


def _plain(root: Any) -> bool:
    """Whether ``root`` is made of what JSON writes and reads back as the same types: strings,
    whole and finite numbers, booleans, None, lists, and mappings of string keys."""
    stack = [root]
    pop, push = stack.pop, stack.append
    while stack:
        value = pop()
        kind = type(value)
        if kind is dict:
            for key, item in value.items():
                if type(key) is not str:
                    return False
                if type(item) is not str:  # a string, most of a domain's values, needs no visit
                    push(item)
        elif kind is list:
            stack.extend(value)
        elif kind is str or kind is int or kind is bool or value is None:
            continue
        elif kind is float:
            if value != value or value in (float("inf"), float("-inf")):
                return False
        else:
            return False
    return True
