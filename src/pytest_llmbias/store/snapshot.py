"""JSONL snapshots: one response per line, sorted for reviewable diffs, committed beside the tests.

A line is a response record (see :meth:`pytest_llmbias.store.calls.Response.to_dict`) plus optional
``labels`` (alias, domain, question id) for the reader. The ``key`` of every line is recomputed from
its request fields on reading; a line whose key does not match was edited by hand or written by an
incompatible version, and is an error rather than a silent miss. A run's store remembers the
digests of the files it has checked (:class:`CheckedSnapshots`), so the same bytes are checked once.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import StoreError
from pytest_llmbias.store.calls import ModelCall, Response, built_call
from pytest_llmbias.store.snapshot_index import load_index, row_of, write_index


def iter_snapshot(path: Path) -> Iterator[tuple[int, Response, dict[str, Any]]]:
    """(line number, response, labels) for every non-blank line of ``path``. Raises
    :class:`StoreError` naming the file and line of a line that is not UTF-8, not JSON, not a
    response record, or whose key does not match its request fields."""
    path = Path(path)
    return _lines(path, _read(path), trusted=False)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise StoreError(f"snapshot {path} cannot be read: {exc}") from None


def _lines(path: Path, content: bytes, *, trusted: bool) -> Iterator[tuple[int, Response, dict[str, Any]]]:
    """The records of ``content`` (the file ``path``). ``trusted``: these very bytes were checked
    before, so each line's key is taken as written instead of recomputed from its request fields."""
    for lineno, _, _, response, labels, _ in _records(path, content, trusted=trusted):
        yield lineno, response, labels


def _records(
    path: Path, content: bytes, *, trusted: bool
) -> Iterator[tuple[int, int, int, Response, dict[str, Any], dict[str, Any]]]:
    """(line number, start, end, response, labels, record) of every non-blank line of ``content``
    (``start:end``: the line's bytes, without its line ending); see :func:`_lines`."""
    end = 0
    for lineno, raw in enumerate(content.splitlines(keepends=True), 1):
        start, end = end, end + len(raw)
        try:
            line = raw.decode("utf-8")
            if not line.strip():
                continue
            data = json.loads(line)
            response = _response(data, path)
            written = data.get("key")
        except UnicodeDecodeError as exc:
            raise StoreError(f"{path}:{lineno}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(f"{path}:{lineno}: not a response record ({type(exc).__name__}: {exc})") from None
        if trusted and isinstance(written, str):
            # the call's cached key, set as its cached property would (see ModelCall._build)
            object.__setattr__(response.call, "key", written)
        elif written not in (None, response.key):
            raise StoreError(
                f"{path}:{lineno}: the line's key does not match its request fields (edited by hand, "
                "or written by an incompatible version); export the snapshot again"
            )
        yield lineno, start, start + len(raw.rstrip(b"\r\n")), response, dict(data.get("labels") or {}), data


def _response(data: Any, path: Path, call: ModelCall | None = None) -> Response:
    if not isinstance(data, dict):
        raise TypeError(f"a record is a JSON object, not {type(data).__name__}")
    return Response.from_dict(data, source=f"snapshot:{path.name}", call=call)


class CheckedSnapshots:
    """The digests of snapshot files whose every line's key was checked, kept in ``path`` (a JSON
    list, the last :attr:`KEPT`): the same bytes read again are not checked again. Nothing is
    written where the folder does not exist; an unreadable or broken file counts as empty."""

    KEPT = 32

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._digests: list[str] | None = None

    def _load(self) -> list[str]:
        if self._digests is None:
            try:
                value = json.loads(self.path.read_text(encoding="utf-8"))
                self._digests = [d for d in value if isinstance(d, str)] if isinstance(value, list) else []
            except (OSError, ValueError):
                self._digests = []
        return self._digests

    def __contains__(self, digest: str) -> bool:
        return digest in self._load()

    def digests(self) -> list[str]:
        return list(self._load())

    def add(self, digest: str) -> None:
        others = [d for d in self._load() if d != digest]
        digests = others[max(0, len(others) - (self.KEPT - 1)) :] + [digest]
        self._digests = digests
        if not self.path.parent.is_dir():
            return
        try:
            _write_atomically(self.path, [json.dumps(digests)])
        except OSError:  # a read-only folder: the file is checked again next time
            pass


class SnapshotAnswers(Mapping[str, Response]):
    """A snapshot layer's responses by key. Those read from an index
    (:mod:`~pytest_llmbias.store.snapshot_index`) are built when first asked for: with the call
    the caller asks (:meth:`answer`), or one this process built with the same key, without parsing
    the line's prompt; else from the line."""

    def __init__(self) -> None:
        self._built: dict[str, Response] = {}
        self._rows: dict[str, tuple[Path, bytes, tuple[Any, ...]]] = {}

    def __getitem__(self, key: str) -> Response:
        built = self.answer(key)
        if built is None:
            raise KeyError(key)
        return built

    def __contains__(self, key: object) -> bool:
        return key in self._built or key in self._rows

    def __iter__(self) -> Iterator[str]:
        yield from self._built
        yield from (k for k in self._rows if k not in self._built)

    def __len__(self) -> int:
        return len(self._built) + sum(1 for k in self._rows if k not in self._built)

    def answer(self, key: str, call: ModelCall | None = None) -> Response | None:
        """The response for ``key``, or None; ``call`` (the call asked, whose key is ``key``)
        becomes the response's call instead of one parsed from the snapshot's line."""
        built = self._built.get(key)
        if built is not None:
            return built
        entry = self._rows.get(key)
        if entry is None:
            return None
        call = built_call(key, call)
        if call is None:
            built = self._built[key] = self._from_line(key, *entry)
            return built
        path, _, row = entry
        built = self._built[key] = Response(
            call=call,
            text=row[3],
            finish_reason=row[4],
            prompt_tokens=row[5],
            completion_tokens=row[6],
            latency_s=row[7],
            created=row[8],
            source=f"snapshot:{path.name}",
            top_logprobs=row[9],
            system_fingerprint=row[10],
            fingerprint=row[11],
            number_logprobs=row[13],
        )
        return built

    def text_of(self, key: str) -> str:
        built = self._built.get(key)
        return built.text if built is not None else str(self._rows[key][2][3])

    def _add(self, key: str, response: Response) -> None:
        self._built[key] = response

    def _add_row(self, key: str, path: Path, content: bytes, row: tuple[Any, ...]) -> None:
        self._rows[key] = (path, content, row)

    @staticmethod
    def _from_line(key: str, path: Path, content: bytes, row: tuple[Any, ...]) -> Response:
        try:
            response = _response(json.loads(content[row[0] : row[1]]), path)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreError(f"{path}:{row[2]}: not a response record ({type(exc).__name__}: {exc})") from None
        object.__setattr__(response.call, "key", key)  # the checked file's key (see _lines)
        return response


class SnapshotLayer:
    """Responses from several snapshot files by key, each remembering its file and line.

    The same call in two lines (of one file or of two) is kept once when the texts agree; when
    they differ, which one a test should see is unknown, and :meth:`add` raises
    :class:`StoreError` naming both lines. A file already checked is read from its index where
    it has one (see :mod:`~pytest_llmbias.store.snapshot_index`), which is written after a check.
    """

    def __init__(self, checked: CheckedSnapshots | None = None) -> None:
        self.responses = SnapshotAnswers()
        self.labels: dict[str, dict[str, Any]] = {}
        self._where: dict[str, str] = {}
        #: files already checked line by line (see :class:`CheckedSnapshots`), or None: check each
        self.checked = checked

    def add(self, path: Path) -> SnapshotLayer:
        path = Path(path)
        content = _read(path)
        digest = hashlib.sha256(content).hexdigest() if self.checked is not None else ""
        trusted = self.checked is not None and digest in self.checked
        indexed = load_index(self.checked.path.parent, digest, len(content)) if trusted and self.checked else None
        if indexed is not None:
            for key, row in indexed:
                if self._keep(key, row[3], f"{path}:{row[2]}", row[12]):
                    self.responses._add_row(key, path, content, row)
            return self
        rows = []
        for lineno, start, end, response, labels, data in _records(path, content, trusted=trusted):
            key = response.key
            rows.append((key, row_of(start, end, lineno, data, labels)))
            if self._keep(key, response.text, f"{path}:{lineno}", labels):
                self.responses._add(key, response)
        if self.checked is not None:
            if not trusted:
                self.checked.add(digest)
            write_index(self.checked.path.parent, digest, rows, self.checked.digests())
        return self

    def _keep(self, key: str, text: str, here: str, labels: dict[str, Any] | None) -> bool:
        """Whether the line ``here`` answering ``key`` with ``text`` is new (raises
        :class:`StoreError` when an earlier line answered the same call otherwise)."""
        if key in self.responses:
            if self.responses.text_of(key) != text:
                raise StoreError(
                    f"{here}: the same call as {self._where[key]} with a different answer; a "
                    "snapshot holds one response per call: keep one of the two lines"
                )
            return False
        self._where[key] = here
        if labels:
            self.labels[key] = dict(labels)
        return True


def read_snapshot(path: Path) -> Mapping[str, Response]:
    """Every response in ``path`` by key. Raises :class:`StoreError` with the file and line."""
    return SnapshotLayer().add(path).responses


def read_labels(path: Path) -> dict[str, dict[str, Any]]:
    """The ``labels`` of every line of a snapshot, by key (lines without labels are left out)."""
    return SnapshotLayer().add(path).labels


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
    _write_atomically(path, (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n" for record in rows))
    return len(rows)


def _write_atomically(path: Path, chunks: Iterable[str]) -> None:
    """Write ``chunks`` to a new file beside ``path``, then put it in ``path``'s place: a reader
    sees the old file or the new one, never part of one. The new file is removed on any failure."""
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(chunks)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _create_temporary(path: Path) -> tuple[int, str]:
    """A new file beside ``path`` for an atomic replace, with the user's default file mode
    (0666 less the umask, as ``open`` gives): a snapshot is meant to be committed and shared, and
    ``mkstemp``'s 0600 would make it private."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(tmp)
        except FileExistsError:
            continue
    raise StoreError(f"cannot create a temporary file beside {path}")  # pragma: no cover


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
    layer = SnapshotLayer()
    for part in parts:
        layer.add(part)
    count = write_snapshot(path, layer.responses.values(), layer.labels)
    for part in parts:
        Path(part).unlink()
    return count
