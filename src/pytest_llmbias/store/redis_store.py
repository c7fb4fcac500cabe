"""The team store: stored calls in Redis, shared by every process and machine that names it.

``store.url: redis://HOST:PORT/DB`` puts the records the disk store keeps (the same keys, the same
JSON) under ``llmbias:`` in that Redis database, through redis-py (``pytest-llmbias[redis]``). Beside
the records it holds the *claims* that make each call paid once across machines (``SET NX`` with
an expiry that the claimant's heartbeat renews: a claimant that dies lets its claims lapse and
another process takes its calls over) and the shared limits of
:mod:`pytest_llmbias.clients.shared_limits`.

Faults never lose an answer: when Redis cannot be reached, or refuses a write because it is full
(``maxmemory``), the answer is written to a *spool* (a disk store in ``<store dir>/spool``) and a
:class:`StoreLost` error stops the collection; the next run uploads the spool before it reads
anything. The password (the URL's, or the variable ``store.password_env`` names) is a credential:
every message shows the URL with its user info masked.
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.config.redaction import Redactor
from pytest_llmbias.errors import ConfigError, LLMBiasError, StoreError, StoreLost
from pytest_llmbias.store.disk import DiskCache, encode_value

#: the prefix of every key this project writes in Redis
NAMESPACE = "llmbias:"
EXTRA = "pip install 'pytest-llmbias[redis]'"

# A claim is renewed or released only by the process that holds it.
_RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def masked(url: str) -> str:
    """``url`` with its password masked: its user info, and a ``password=`` of its query."""
    return Redactor()(url)


def url_secrets(url: str | None) -> list[str]:
    """The credential values ``url`` holds (its user info's password, its query's ``password``),
    for a :class:`Redactor` to mask wherever they appear alone. A user name is not a secret (an
    ACL URL's is often ``default``: masked alone, every "default" in a report would be)."""
    if not url:
        return []
    from urllib.parse import parse_qsl, unquote, urlsplit

    parts = urlsplit(url)
    found = [unquote(parts.password)] if parts.password else []
    found += [v for k, v in parse_qsl(parts.query) if k.lower() == "password" and v]
    return found


def password_of(password_env: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The password in the variable ``password_env`` names; a named variable that is unset is a
    :class:`ConfigError`."""
    if password_env is None:
        return None
    value = (os.environ if environ is None else environ).get(password_env)
    if not value:
        raise ConfigError(f"store.password_env names ${password_env}, which is not set")
    return value


def connect(url: str, *, password: str | None = None, timeout: float = 10.0) -> Any:
    """A redis-py client of ``url`` that has answered a PING. A missing redis-py, an unreachable
    server, a refused password: a :class:`StoreError` that names the URL (masked) and what to do."""
    try:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry
    except ImportError:
        raise ConfigError(f"store.url names a Redis store, which needs redis-py: {EXTRA}") from None
    where = masked(url)
    try:
        client = redis.Redis.from_url(
            url,
            password=password,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            # a restarted server is reached again within a second; a lost one fails the command
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 3),
            retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
        )
        client.ping()
    except redis.exceptions.AuthenticationError as exc:
        raise StoreError(
            f"the Redis store at {where} refused the password ({exc}): check the URL's "
            "password or the variable store.password_env names"
        ) from None
    except (redis.exceptions.RedisError, OSError, ValueError) as exc:
        raise StoreError(
            f"the Redis store at {where} cannot be reached ({type(exc).__name__}: "
            f"{Redactor()(str(exc))}): is the server running, and is the URL right?"
        ) from None
    return client


def _is_full(exc: Exception) -> bool:
    return type(exc).__name__ == "OutOfMemoryError" or str(exc).startswith("OOM")


class RedisCache:
    """JSON records under string keys in Redis, with the interface of
    :class:`~pytest_llmbias.store.disk.DiskCache` (``get``, ``set``, ``notices``, ``close``) and
    ``get_many``, ``keys`` and the claims. Connects on first use; uploads the spool then."""

    def __init__(
        self, url: str, *, spool: Path, password: str | None = None, create: bool = True, timeout: float = 10.0
    ) -> None:
        self.url = url
        self.where = masked(url)
        self._password = password
        self._timeout = timeout
        self._create = create
        self._client: Any = None
        self._spool_dir = Path(spool)
        self._spool: DiskCache | None = None
        self.lost: StoreLost | None = None
        self.notices: list[str] = []

    # -- the connection --------------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = connect(self.url, password=self._password, timeout=self._timeout)
            self._check_policy()
            if self._create:
                self._upload_spool()
        return self._client

    def _check_policy(self) -> None:
        """A Redis that evicts keys would forget answers silently: say so."""
        try:
            policy = self._client.config_get("maxmemory-policy").get("maxmemory-policy")
        except Exception:  # CONFIG is often disabled on managed servers: nothing to check then
            return
        if policy and policy != "noeviction":
            self.notices.append(
                f"the Redis store at {self.where} evicts keys (maxmemory-policy {policy}): a stored answer may "
                "be forgotten and bought again; set maxmemory-policy noeviction for a store"
            )

    def _lose(self, exc: Exception, doing: str) -> StoreLost:
        if _is_full(exc):
            why = (
                f"is full: it refused to {doing} (maxmemory reached; raise maxmemory in the server's "
                "configuration, or free memory)"
            )
        else:
            why = f"stopped answering while this run was to {doing} ({type(exc).__name__}: {Redactor()(str(exc))})"
        self.lost = StoreLost(f"the Redis store at {self.where} {why}")
        return self.lost

    def guard(self, doing: str, action: Any) -> Any:
        """``action()``, a Redis command; a lost or full server makes it :class:`StoreLost`,
        naming what the run was ``doing``, and every later command fails the same way at once."""
        if self.lost is not None:
            raise self.lost
        try:
            return action()
        except (
            LLMBiasError
        ):  # the plugin's own: a missing redis-py (a ConfigError naming the extra), a refused connection
            raise
        except Exception as exc:
            import redis

            if isinstance(exc, (redis.exceptions.RedisError, OSError)):
                raise self._lose(exc, doing) from None
            raise

    # -- records ---------------------------------------------------------------------------

    def get(self, key: str) -> Any | None:
        raw = self.get_raw(key)
        return None if raw is None else self.decode(key, raw)

    def get_raw(self, key: str) -> bytes | None:
        """The JSON bytes stored under ``key`` (what :meth:`get` decodes), or None."""
        return self.guard("read", lambda: self.client.get(NAMESPACE + key))

    def raw_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The stored bytes of each of ``keys`` (None where nothing is stored), in one round trip."""
        return list(self.guard("read", lambda: self.client.mget([NAMESPACE + k for k in keys]))) if keys else []

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The records of those ``keys`` that are stored, in one round trip."""
        return {k: self.decode(k, raw) for k, raw in self.get_raw_many(keys).items()}

    def get_raw_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The JSON bytes of those ``keys`` that are stored (what :meth:`get_many` decodes)."""
        return {k: raw for k, raw in zip(keys, self.raw_many(keys), strict=True) if raw is not None}

    def decode(self, key: str, raw: bytes | str) -> Any:
        """The record of ``key`` stored as ``raw``; an unreadable one is a :class:`StoreError`
        saying how to delete it."""
        try:
            return json.loads(raw)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"the Redis store at {self.where} holds an unreadable entry {key!r} ({exc}); "
                f"delete it (DEL {NAMESPACE}{key}) and run again"
            ) from None

    def set(self, key: str, value: Any) -> None:
        """Write ``value``; when Redis cannot take it, keep it in the spool and raise :class:`StoreLost`."""
        self.set_text(key, encode_value(value))

    def set_text(self, key: str, text: str) -> None:
        """:meth:`set` of a value already written as JSON (``text``)."""
        if not self._create:
            raise StoreError(f"the Redis store at {self.where} was opened read-only (offline mode)")
        try:
            self.guard("write an answer", lambda: self.client.set(NAMESPACE + key, text))
        except StoreLost:
            self.spool.set_text(key, text)
            raise

    def set_many(self, items: Mapping[str, Any], *, overwrite: bool = True) -> int:
        """Write many records in one round trip; ``overwrite=False`` keeps those already there.
        A ``str`` value is a record's text as a run wrote it (its seal kept) and is written as it
        is. Returns the number written."""
        if not items:
            return 0

        def write() -> int:
            pipe = self.client.pipeline(transaction=False)
            for key, value in items.items():
                text = value if isinstance(value, str) else encode_value(value)
                pipe.set(NAMESPACE + key, text, nx=not overwrite)
            return sum(1 for ok in pipe.execute() if ok)

        return int(self.guard("write answers", write))

    def keys(self, prefix: str = "") -> Iterator[str]:
        """Every stored key that starts with ``prefix`` (without the namespace)."""
        client = self.client
        cut = len(NAMESPACE)
        for raw in self.guard("list keys", lambda: list(client.scan_iter(match=NAMESPACE + prefix + "*", count=1000))):
            yield raw.decode()[cut:] if isinstance(raw, bytes) else raw[cut:]

    def delete(self, key: str) -> None:
        """Forget ``key`` (nothing when it is not stored)."""
        client = self.client
        self.guard("delete an entry", lambda: client.delete(NAMESPACE + key))

    def clear(self) -> int:
        """Delete every key of this project's namespace (records, claims, limits); the number deleted."""
        keys = [NAMESPACE + k for k in self.keys()]
        for start in range(0, len(keys), 500):
            self.guard("delete keys", lambda start=start: self.client.delete(*keys[start : start + 500]))
        return len(keys)

    # -- the spool -------------------------------------------------------------------------

    @property
    def spool(self) -> DiskCache:
        if self._spool is None:
            self._spool = DiskCache(self._spool_dir, create=True)
        return self._spool

    def _upload_spool(self) -> None:
        """Upload the answers a run kept while Redis was unreachable (without overwriting)."""
        if not (self._spool_dir / "cache.db").is_file():
            return
        cache = self.spool._open()
        keys = list(cache.iterkeys())
        if not keys:
            return
        written = self.set_many(dict(self.spool.get_raw_many(keys)), overwrite=False)  # as written, seals kept
        for key in keys:
            cache.delete(key)
        self.notices.append(
            f"uploaded {len(keys)} answer(s) kept in {self._spool_dir} while the Redis store at "
            f"{self.where} was unreachable ({written} new to it)"
        )

    # -- claims ----------------------------------------------------------------------------

    def claim(self, key: str, owner: str, ttl_s: float) -> bool:
        """Claim ``key`` for ``owner`` for ``ttl_s`` seconds, unless someone holds it."""
        return bool(
            self.guard(
                "claim a call",
                lambda: self.client.set(NAMESPACE + "claim:" + key, owner, nx=True, px=max(1, int(ttl_s * 1000))),
            )
        )

    def renew(self, keys: Iterable[str], owner: str, ttl_s: float) -> None:
        """Extend ``owner``'s claims on ``keys`` (those it still holds) by ``ttl_s`` seconds."""
        keys = list(keys)
        if not keys:
            return

        def run() -> None:
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.eval(_RENEW, 1, NAMESPACE + "claim:" + key, owner, max(1, int(ttl_s * 1000)))
            pipe.execute()

        self.guard("renew its claims", run)

    def release(self, key: str, owner: str) -> None:
        """Give back ``owner``'s claim on ``key`` (no-op when it lapsed or another holds it)."""
        self.guard("release a claim", lambda: self.client.eval(_RELEASE, 1, NAMESPACE + "claim:" + key, owner))

    def claimed(self, keys: Sequence[str]) -> builtins.set[str]:  # set: the method above
        """Those of ``keys`` someone holds a claim on now."""
        if not keys:
            return set()
        held = self.guard("read claims", lambda: self.client.mget([NAMESPACE + "claim:" + k for k in keys]))
        return {k for k, v in zip(keys, held, strict=True) if v is not None}

    def release_thread(self) -> None:
        """Close the calling thread's connection to the spool (see ``DiskCache.release_thread``)."""
        if self._spool is not None:
            self._spool.release_thread()

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # a lost server: nothing left to close
                pass
            self._client = None
        if self._spool is not None:
            self._spool.close()
            self._spool = None
