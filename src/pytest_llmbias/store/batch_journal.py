"""The store's journal of provider batches (``collection.batch``): every batch a run submitted and
has not yet read back, so that a run that is killed, or stops waiting, resumes polling the same
batch instead of submitting (and paying for) its lines again.

An entry is written once the batch's input file is uploaded (keyed by the file's id), again with
the batch's id the moment the provider creates it, before the first poll, and forgotten once the
batch's output and error files are read and its answers stored. An entry with no batch id is a run
stopped between the upload and the create: the next run looks for a batch of that file among the
endpoint's batches before it creates one. It lives in the
store itself (a side entry, see :meth:`~pytest_llmbias.store.response_store.ResponseStore.write_meta`):
on the team store (Redis) every machine of a team sees the batches every other one has open.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_llmbias.store.response_store import ResponseStore

#: the prefix of the journal's side entries in the store
PREFIX = "batch:"


@dataclasses.dataclass(frozen=True)
class OpenBatch:
    """A batch submitted and not yet read back: the provider's ids, where it was sent (the
    endpoint's base URL, the model as the endpoint knows it, the roster alias), the store keys of
    its lines (each line's ``custom_id``), when it was submitted and by whom."""

    batch_id: str
    input_file_id: str
    base_url: str
    model: str
    alias: str
    keys: tuple[str, ...]
    submitted: float
    owner: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "keys": list(self.keys)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpenBatch:
        """The entry ``data`` records; ValueError where it is no journal entry."""
        try:
            return cls(
                batch_id=str(data["batch_id"]),
                input_file_id=str(data["input_file_id"]),
                base_url=str(data["base_url"]),
                model=str(data["model"]),
                alias=str(data["alias"]),
                keys=tuple(str(k) for k in data["keys"]),
                submitted=float(data["submitted"]),
                owner=str(data.get("owner") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a batch journal entry ({type(exc).__name__}: {exc})") from None


class BatchJournal:
    """The open batches of one store (see the module docstring)."""

    def __init__(self, store: ResponseStore) -> None:
        self.store = store

    def opened(
        self,
        input_file_id: str,
        batch_id: str = "",
        *,
        base_url: str,
        model: str,
        alias: str,
        keys: Sequence[str],
        owner: str = "",
    ) -> OpenBatch:
        """Journal a batch's uploaded input file, and its batch id once the provider gives one."""
        entry = OpenBatch(batch_id, input_file_id, base_url, model, alias, tuple(keys), time.time(), owner)
        self.store.write_meta(PREFIX + input_file_id, entry.to_dict())
        return entry

    def created(self, entry: OpenBatch, batch_id: str) -> OpenBatch:
        """``entry`` with the id of the batch the provider created of its file."""
        done = dataclasses.replace(entry, batch_id=batch_id)
        self.store.write_meta(PREFIX + entry.input_file_id, done.to_dict())
        return done

    def closed(self, entry: OpenBatch) -> None:
        """Forget a batch whose answers are all read back (or that is gone for good)."""
        self.store.delete_meta(PREFIX + entry.input_file_id)

    def entries(self) -> list[OpenBatch]:
        """Every open batch, oldest first; an entry that cannot be read is skipped (its lines are
        asked again: a damaged entry must not stop a run)."""
        out = []
        for key in self.store.meta_keys(PREFIX):
            raw = self.store.read_meta(key)
            try:
                out.append(OpenBatch.from_dict(raw or {}))
            except ValueError:
                continue
        return sorted(out, key=lambda e: e.submitted)

    def by_key(self) -> dict[str, OpenBatch]:
        """Store key -> the open batch whose line it is."""
        return {key: entry for entry in self.entries() for key in entry.keys}
