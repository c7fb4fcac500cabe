"""The response store: session memory, then the disk store, then snapshots (read-only)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmbias.choices import CacheMode
from pytest_llmbias.store.calls import ModelCall, Response, built_call
from pytest_llmbias.store.disk import DiskCache
from pytest_llmbias.store.fingerprints import Serving
from pytest_llmbias.store.records import answer_fields, record_text, seal, unseal
from pytest_llmbias.store.snapshot import CheckedSnapshots, SnapshotAnswers, SnapshotLayer, write_snapshot

if TYPE_CHECKING:
    from pytest_llmbias.store.redis_store import RedisCache

_PREFIX = "response:"
#: the store's list of snapshot files already checked line by line (see CheckedSnapshots)
CHECKED_SNAPSHOTS = "checked-snapshots.json"
#: the unreadable answers a notice names one by one (the rest it counts)
_NAMED = 5


class ResponseStore:
    """Responses by call key.

    Modes: ``use`` reads memory, disk and snapshots and writes new responses to disk; ``refresh``
    reads nothing persisted (every call is made again) and overwrites the disk entries; ``off`` reads
    and writes nothing on disk. Errors are never stored: only :class:`Response` objects go in.

    ``run_id`` (pytest-xdist's shared ``testrunuid``) stamps what this run writes: in ``refresh``
    mode, entries written by another worker of the same run are served, so no call is made twice.
    ``read_only`` (offline mode) reads an existing store and creates nothing on disk.

    Fingerprints (see :mod:`pytest_llmbias.store.fingerprints`): once :meth:`serve_fingerprints`
    names a model's current fingerprint, its stored answers collected under another one are not
    served (snapshots always are), and its new answers are written with the current one.

    Damage costs only what it damaged: a stored answer that cannot be read (not JSON, the wrong
    shape, a number for its text, bytes that are not text, bytes that no longer match the checksum
    they were written with: see :func:`~pytest_llmbias.store.seal.seal`) is a miss, asked again alone and
    written over; :attr:`notices` counts them and names each one's question. A disk store whose
    database cannot be read is rebuilt (see :class:`DiskCache`), and the notice says how many of
    the answers looked up since are not in it (they are asked again).
    """

    def __init__(
        self,
        directory: Path,
        *,
        mode: str = "use",
        snapshots: Iterable[Path] = (),
        run_id: str | None = None,
        read_only: bool = False,
        url: str | None = None,
        password: str | None = None,
    ) -> None:
        mode = CacheMode.parse(mode, what="the store mode")
        self.directory = Path(directory)
        self.mode = mode
        #: the team store (see :mod:`pytest_llmbias.store.redis_store`), or None for the disk store
        self.team: RedisCache | None = None
        self._disk: DiskCache | RedisCache | None = None
        if mode != "off" and url is not None:
            from pytest_llmbias.store import redis_store

            self._disk = self.team = redis_store.RedisCache(
                url, spool=self.directory / "spool", password=password, create=not read_only
            )
        elif mode != "off":
            self._disk = DiskCache(self.directory / "responses", create=not read_only, watched=True)
        self._snapshot_paths = tuple(Path(p) for p in snapshots) if mode == "use" else ()
        self._snapshots: SnapshotAnswers | None = None
        self._memory: dict[str, Response] = {}
        self._used: dict[str, Response] = {}
        self._labels: dict[str, dict[str, Any]] = {}
        self._serving: dict[str, Serving] = {}  # model endpoint -> which stored answers it is served
        self.run_id = run_id
        self._unreadable: dict[str, str] = {}  # key -> why its stored answer could not be read
        self._missed: set[str] = set()  # keys looked up in the store and not served by it
        self._told: list[str] = []
        self._told_of = [0, 0, 0]  # how many of the disk's notices, repairs and unreadable answers are told

    def add_snapshots(self, paths: Iterable[Path]) -> None:
        """Read ``paths`` too (those not read already), beneath the ones given at creation: a
        release a marker compares with is known only once its marker is planned."""
        if self.mode != "use":
            return
        new = tuple(Path(p) for p in paths if Path(p) not in self._snapshot_paths)
        if new:
            self._snapshot_paths += new
            self._snapshots = None

    def _snapshot_layer(self) -> SnapshotAnswers:
        if self._snapshots is None:
            layer = SnapshotLayer(CheckedSnapshots(self.directory / CHECKED_SNAPSHOTS))
            for path in self._snapshot_paths:
                layer.add(path)
            self._snapshots = layer.responses
        return self._snapshots

    def get(self, key: str) -> Response | None:
        """The response for ``key`` if this store may serve it, else None."""
        response = self._memory.get(key)
        if response is None:
            if self.mode == "use":
                response = self._read_disk(key) or self._snapshot_layer().get(key)
            elif self.mode == "refresh" and self.run_id:
                response = self._read_disk(key, run_id=self.run_id)
            if response is not None:
                self._memory[key] = response
            elif self.mode == "use":
                self._missed.add(key)
        if response is not None:
            self._used[key] = response
        return response

    def has(self, key: str) -> bool:
        """Whether this store may serve ``key``, without counting it as used this session."""
        if key in self._memory:
            return True
        if self.mode == "use":
            return self._read_disk(key) is not None or key in self._snapshot_layer()
        if self.mode == "refresh" and self.run_id:
            return self._read_disk(key, run_id=self.run_id) is not None
        return False

    @property
    def has_snapshots(self) -> bool:
        """Whether any snapshot is read beneath the store."""
        return bool(self._snapshot_paths)

    def in_snapshot(self, key: str) -> bool:
        """Whether a snapshot holds ``key`` (served whatever the model's fingerprint)."""
        return key in self._snapshot_layer()

    @property
    def where(self) -> str:
        """The store as messages name it: its folder, or the team store's URL (masked)."""
        return self.team.where if self.team is not None else str(self.directory)

    def fetch_many(self, keys: Sequence[str], calls: Mapping[str, ModelCall] | None = None) -> dict[str, Response]:
        """The responses of those ``keys`` this store may serve (what :meth:`get` gives each, and
        counted as used as it counts them), reading the team store in one round trip and the disk
        store a few hundred keys a query. ``calls`` (key -> call): the calls asked, when the
        caller has them: a response read from disk keeps its call instead of rebuilding it."""
        out = {k: self._memory[k] for k in keys if k in self._memory}
        rest = [k for k in keys if k not in out]
        if self._disk is not None and self.mode == "use" and rest:
            stored = [_PREFIX + k for k in rest]
            found = self._disk.get_raw_many(stored)
            asked = calls or {}
            for key, at in zip(rest, stored, strict=True):
                raw = found.get(at)
                response = self._read(key, raw, asked.get(key)) if raw is not None else None
                if response is None or (self._serving and not self._fresh(response)):  # as get(): then the snapshots
                    response = self._snapshot_layer().answer(key, asked.get(key)) if self._snapshot_paths else None
                if response is not None:
                    self._memory[key] = response
                    out[key] = response
                else:
                    self._missed.add(key)
            rest = []
        for key in rest:
            one = self.get(key)
            if one is not None:
                out[key] = one
        self._used.update(out)
        return out

    def _read_disk(self, key: str, run_id: str | None = None) -> Response | None:
        assert self._disk is not None
        raw = self._disk.get_raw(_PREFIX + key)
        response = None if raw is None else self._read(key, raw, run_id=run_id)
        return response if response is not None and self._fresh(response) else None

    def _read(
        self, key: str, raw: str | bytes, asked: ModelCall | None = None, run_id: str | None = None
    ) -> Response | None:
        """The response stored as ``raw`` under ``key`` (None: written by another run than
        ``run_id``, when given, or unreadable: then noted, to be asked again): with a call built for
        ``key`` (``asked``, or one this process built), its answer fields alone are parsed (see
        :mod:`pytest_llmbias.store.records`)."""
        assert self._disk is not None
        call = built_call(key, asked)
        try:
            raw = unseal(raw)
            head = answer_fields(key, raw) if call is not None else None
            if call is None or head is None:
                data = json.loads(raw)
                if run_id is not None and (not isinstance(data, dict) or data.get("run") != run_id):
                    return None
                return self._parse(key, data, call)
            if run_id is not None and head.get("run") != run_id:
                return None
            # the answer fields alone, of a record cut at its key (which answer_fields checked)
            return Response.answering(call, head, source="store")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._unreadable[key] = f"{type(exc).__name__}: {exc}"
            return None

    def _fresh(self, response: Response) -> bool:
        """Whether ``response`` may be served under its model's current fingerprint: always for
        an answer of this run or of a snapshot, and for a model without a known fingerprint."""
        if not self._serving or response.source != "store":
            return True
        serving = self._serving.get(response.call.endpoint)
        return serving is None or serving.serves(response.fingerprint)

    def serve_fingerprints(self, serving: Mapping[str, Serving]) -> None:
        """From now on serve each model (by endpoint) only the stored answers ``serving`` allows,
        and write its new answers with its current fingerprint; answers read before and now
        refused are forgotten (they will be asked again)."""
        self._serving.update(serving)
        for key, response in list(self._memory.items()):
            if not self._fresh(response):
                del self._memory[key]
                self._used.pop(key, None)

    def read_meta(self, key: str) -> Any | None:
        """A side entry of the store (not a response: a model's fingerprint history), or None
        (also where it cannot be read: it is written afresh)."""
        if self._disk is None:
            return None
        raw = self._disk.get_raw(key)
        try:
            return None if raw is None else json.loads(raw)
        except (TypeError, ValueError):
            return None

    def write_meta(self, key: str, value: Any) -> None:
        """Write a side entry (JSON values); nothing when the store keeps nothing (``off``)."""
        if self._disk is not None:
            self._disk.set(key, value)

    def meta_keys(self, prefix: str) -> list[str]:
        """The side entries' keys that start with ``prefix`` (none when the store keeps nothing)."""
        return [] if self._disk is None else list(self._disk.keys(prefix))

    def delete_meta(self, key: str) -> None:
        """Forget a side entry; nothing when the store keeps nothing (``off``)."""
        if self._disk is not None:
            self._disk.delete(key)

    def _parse(self, key: str, data: Any, call: ModelCall | None = None) -> Response:
        """The response ``data`` records under ``key``; raises ``KeyError``/``TypeError``/
        ``ValueError``/``AttributeError`` where it is no record of that call."""
        if data["key"] != key:
            raise ValueError("stored under the wrong key")
        response = Response.from_dict(data, source="store", call=call)
        # verified above: a call rebuilt from its record is not hashed again
        object.__setattr__(response.call, "key", key)
        return response

    def put(self, response: Response, *, later: bool = False) -> None:
        """Keep ``response`` for this session and, unless the mode is ``off``, write it to disk now.
        ``later`` (a collection's answers): to the disk store's journal now and to its database
        with the next batch (see :mod:`pytest_llmbias.store.journal`); :meth:`flush` writes the rest."""
        if not isinstance(response, Response):
            raise TypeError("only responses are stored")
        serving = self._serving.get(response.call.endpoint) if self._serving else None
        if serving is not None and response.fingerprint is None and response.source == "network":
            response = response.collected_under(serving.current)
        if self._disk is not None:
            kept = seal(record_text(response, self.run_id))
            if later and isinstance(self._disk, DiskCache):
                self._disk.set_text_later(_PREFIX + response.key, kept)
            else:
                self._disk.set_text(_PREFIX + response.key, kept)
        self._memory[response.key] = response
        self._used[response.key] = response

    def flush(self) -> None:
        """Write to the database the answers :meth:`put` kept in the journal (see ``later``)."""
        if isinstance(self._disk, DiskCache):
            self._disk.flush()

    def label(
        self, key: str, alias: str | None = None, domain: str | None = None, question: str | None = None, **more: Any
    ) -> None:
        """Attach reader-facing labels (alias, domain, question, any ``more``: those not None)
        used when exporting a snapshot."""
        known = self._labels.get(key)
        if known is None:
            known = self._labels[key] = {}
        if alias is not None:
            known["alias"] = alias
        if domain is not None:
            known["domain"] = domain
        if question is not None:
            known["question"] = question
        if more:
            known.update((k, v) for k, v in more.items() if v is not None)

    def labels_of(self, key: str) -> dict[str, Any]:
        """The reader-facing labels attached to ``key`` (alias, domain, question), if any."""
        return dict(self._labels.get(key, {}))

    @property
    def notices(self) -> list[str]:
        """Things a user should know about the store: found emptied (see :class:`DiskCache`),
        rebuilt, answers that could not be read. Only ever grows: each is told once, composed when
        first read (after the lookups it counts)."""
        disk = self._disk
        if disk is not None:
            told = self._told_of
            self._told.extend(disk.notices[told[0] :])
            told[0] = len(disk.notices)
            repairs = getattr(disk, "repairs", [])
            self._told.extend(r.message(asked_again=len(self._missed)) for r in repairs[told[1] :])
            told[1] = len(repairs)
            for key, why in getattr(disk, "unreadable", {}).items():
                if key.startswith(_PREFIX):  # an answer's row (a side entry that cannot be read is written afresh)
                    self._unreadable.setdefault(key[len(_PREFIX) :], why)
            new = list(self._unreadable.items())[told[2] :]
            told[2] = len(self._unreadable)
            if new:
                self._told.append(self._unreadable_notice(new))
        return list(self._told)

    def _unreadable_notice(self, unread: list[tuple[str, str]]) -> str:
        shown = []
        for key, why in unread[:_NAMED]:
            labels = self._labels.get(key, {})
            named = ", ".join(f"{k} {labels[k]}" for k in ("alias", "domain", "question") if k in labels)
            shown.append(f"{key[:16]} ({named or 'a call not asked this run'}): {why}")
        more = f"; and {len(unread) - _NAMED} more" if len(unread) > _NAMED else ""
        return (
            f"the store at {self.where} held {len(unread)} answer(s) that could not be read, each asked again "
            "alone (the rest of the store is served as usual): " + "; ".join(shown) + more
        )

    @property
    def used(self) -> Mapping[str, Response]:
        """Every response read or written this session."""
        return dict(self._used)

    def used_with_labels(self) -> list[tuple[Response, Mapping[str, Any]]]:
        """Every response read or written this session, with its labels (empty when it has none)."""
        return [(r, self._labels.get(r.key, {})) for r in self._used.values()]

    def export(self, path: Path, systems: Mapping[str, str] | None = None) -> int:
        """Write the responses this session used to a JSONL snapshot. Returns the number written.
        ``systems`` (alias -> the short hash of its system prompt) adds a ``system`` label to the
        lines of those models, so that a reviewer sees which deployment answered."""
        labels = {
            k: ({**v, "system": systems[v["alias"]]} if systems and v.get("alias") in systems else v)
            for k, v in self._labels.items()
        }
        return write_snapshot(path, self._used.values(), labels)

    def release_thread(self) -> None:
        """Close the calling thread's connection to the store (see ``DiskCache.release_thread``)."""
        if self._disk is not None:
            self._disk.release_thread()

    def close(self) -> None:
        if self._disk is not None:
            self._disk.close()
