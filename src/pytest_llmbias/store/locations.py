"""Where a response store is, for the commands that read or copy one whole: a folder (the disk
store) or a Redis URL (the team store), each read and written record by record, the records being
exactly what a run writes (see :mod:`pytest_llmbias.store.response_store`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import StoreError

#: the prefix of a response record's key, in both stores
PREFIX = "response:"


def is_url(text: str | Path) -> bool:
    return str(text).startswith(("redis://", "rediss://", "unix://"))


@dataclass(frozen=True)
class StoreLocation:
    """A disk store's ``directory``, or with ``url`` the team store there (``directory`` then holds
    only the machine's spool)."""

    directory: Path
    url: str | None = None
    password_env: str | None = None

    @property
    def where(self) -> str:
        """The store as messages name it (a URL's password masked)."""
        if self.url is None:
            return str(self.directory)
        from pytest_llmbias.store.redis_store import masked

        return masked(self.url)

    def _team(self) -> Any:
        from pytest_llmbias.store.redis_store import RedisCache, password_of

        return RedisCache(self.url or "", spool=self.directory / "spool", password=password_of(self.password_env))

    def exists(self) -> bool:
        """Whether there is a store to read (a team store always is: it is asked, and an
        unreachable one is a :class:`StoreError`)."""
        return self.url is not None or (self.directory / "responses" / "cache.db").is_file()

    def entries(self) -> Iterator[tuple[str, Any]]:
        """(call key, record) of every stored response; a record that is not JSON is ``None``."""
        if self.url is not None:
            team = self._team()
            try:
                keys = sorted(team.keys(PREFIX))
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    for key, raw in zip(chunk, team.raw_many(chunk), strict=True):
                        if raw is not None:
                            yield key[len(PREFIX) :], _json(raw)
            finally:
                team.close()
            return
        from pytest_llmbias.store.disk import open_cache

        db = self.directory / "responses" / "cache.db"
        if not db.is_file():
            raise StoreError(f"no response store at {self.directory} (no {db})")
        cache = open_cache(self.directory / "responses", timeout=60.0)
        try:
            for key in list(cache.iterkeys()):
                if str(key).startswith(PREFIX):
                    yield str(key)[len(PREFIX) :], _json(cache.get(key))
        finally:
            cache.close()

    def size_bytes(self) -> int:
        """The bytes the store takes: its folder's files, or the team store's records."""
        if self.url is None:
            return sum(p.stat().st_size for p in self.directory.rglob("*") if p.is_file())
        from pytest_llmbias.store.redis_store import NAMESPACE

        team = self._team()
        try:
            return sum(int(team.client.memory_usage(NAMESPACE + k) or 0) for k in team.keys(PREFIX))
        finally:
            team.close()

    def clear(self) -> None:
        """Delete the store: its folder, or the team store's keys."""
        if self.url is None:
            if self.directory.exists():
                shutil.rmtree(self.directory)
            return
        team = self._team()
        try:
            team.clear()
        finally:
            team.close()

    def write(self, records: Mapping[str, Any]) -> int:
        """Write ``records`` (call key -> record) where no record is stored under their key;
        returns the number written."""
        from pytest_llmbias.store.disk import DiskCache, encode_value
        from pytest_llmbias.store.seal import seal

        if self.url is not None:
            team = self._team()
            try:  # sealed as a run writes them, so a copy holds what a run would have written
                return team.set_many({PREFIX + k: seal(encode_value(v)) for k, v in records.items()}, overwrite=False)
            finally:
                team.close()

        disk = DiskCache(self.directory / "responses", watched=True)
        written = 0
        try:
            for key, record in records.items():
                if disk.get_raw(PREFIX + key) is None:
                    disk.set_text(PREFIX + key, seal(encode_value(record)))
                    written += 1
        finally:
            disk.close()
        return written


def _json(raw: Any) -> Any:
    """The record stored as ``raw`` (its seal checked and left out: see
    :func:`~pytest_llmbias.store.records.unseal`); None where it is no JSON, or its seal fails."""
    from pytest_llmbias.store.seal import unseal

    try:
        return json.loads(unseal(raw))
    except (TypeError, ValueError, AttributeError):
        return None
