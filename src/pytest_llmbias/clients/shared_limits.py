"""The limits of :mod:`pytest_llmbias.clients.ratelimit`, shared by every process that uses one team
store (see :mod:`pytest_llmbias.store.redis_store`): four CI jobs on one provider quota stay inside
what one job was given.

Each limit is kept per *endpoint*, a model at an ``api_base`` (as each process keeps its own
adaptive limit): two servers that serve the same model name have two quotas, and the aliases that
name one endpoint share its quota. The Redis keys name the model and a digest of the endpoint (an
``api_base`` may hold a password; no key shows it).

- :class:`SharedRateLimiter`: the ``rpm`` cap as one schedule of call starts for all processes (a
  start is granted when it is due, ``60/rpm`` seconds after the last one, in one atomic Lua script
  on the Redis server's clock, so machines' clocks do not matter), and the *backing off* after a
  429 or 503: a process that is told to slow down publishes the ``Retry-After`` the provider gave,
  and every process waits it out.
- :class:`SharedAdaptiveLimit`: the endpoint's adaptive limit (:class:`AdaptiveLimit`) as one value
  in Redis: a 429, a timeout or a connection error seen by any process halves it (once per
  overload), the successes of every process raise it back, and each process reads it before each
  attempt and keeps at most that many of its own attempts in flight.
- :class:`SharedTokenLimiter`: the ``tpm`` cap over one rolling minute of every process's tokens.

All are used from a session's one event loop; each Redis round trip is one short script.
:class:`EndpointLimits` gives each endpoint its limits: these with a team store, else the
process's own.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pytest_llmbias.clients.faults import FaultLog
from pytest_llmbias.clients.ratelimit import AdaptiveLimit, RateLimiter, TokenLimiter
from pytest_llmbias.errors import StoreError
from pytest_llmbias.store.redis_store import NAMESPACE, RedisCache

#: ``DEBUG`` records "start granted at <µs> (server clock)" for each start the rpm schedule grants
#: (``benchmarks/team_store.py`` reads them to measure the cap as Redis held it)
log = logging.getLogger(__name__)

# KEYS: the theoretical time of the next start, backoff end (microseconds on the server's clock),
# the endpoint's adaptive state. ARGV[1]: the interval between starts (0: no cap). A start is
# granted only when it is due (at most half an interval early), and the next one is then due an
# interval after the later of now and this one's due time: the grants are spaced by the clock at
# which they are taken, so a process that wakes late never starts two calls together (the GCRA of
# ATM networks), and any second holds at most one start more than the cap's share of it.
# Returns {wait (0: granted), adaptive limit (-1: never lowered), its epoch, now}.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local a = redis.call('HMGET', KEYS[3], 'limit', 'epoch')
local limit, epoch = tonumber(a[1] or '-1'), tonumber(a[2] or '0')
local backoff = tonumber(redis.call('GET', KEYS[2]) or '0')
if backoff > now then return {math.floor(backoff - now), limit, epoch, now} end
local interval = tonumber(ARGV[1])
if interval <= 0 then return {0, limit, epoch, now} end
local due = tonumber(redis.call('GET', KEYS[1]) or '0')
local early = due - interval / 2 - now
if early > 0 then return {math.floor(early), limit, epoch, now} end
local nxt = math.max(now, due) + interval
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', math.floor((nxt - now) / 1000) + 60000)
return {0, limit, epoch, now}
"""

# KEYS[1]: backoff end. ARGV[1]: the wait the provider asked for, in microseconds.
_THROTTLED = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local wait = tonumber(ARGV[1])
if wait > 0 then
  local until_ = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now + wait)
  redis.call('SET', KEYS[1], string.format('%.0f', until_), 'PX', math.floor((until_ - now) / 1000) + 60000)
end
return 1
"""

# The state machine of AdaptiveLimit.throttled and AdaptiveLimit._grow, on one hash per endpoint
# (limit, epoch, hit: the limit at the last decrease or -1, credit, clean rounds, probe wait).
# ARGV: 't' (a throttle of an attempt started at epoch ARGV[2]) or 'ok' (a success), the epoch, the
# caller's ceiling, probe_rounds. No hash: never lowered (every process at its ceiling); a throttle
# creates it. An epoch above the stored one means the state lapsed since: that throttle counts.
# Returns {limit (-1: never lowered), epoch}.
_ADAPT = """
local s = redis.call('HMGET', KEYS[1], 'limit', 'epoch', 'hit', 'credit', 'clean', 'probe')
local op, seen, ceiling, rounds = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not s[1] then
  if op ~= 't' then return {-1, 0} end
  s = {ceiling, 0, -1, 0, 0, rounds}
end
local limit, epoch, hit = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
local credit, clean, probe = tonumber(s[4]), tonumber(s[5]), tonumber(s[6])
if op == 't' then
  if seen < epoch then return {limit, epoch} end
  if hit >= 0 and limit >= hit then
    limit = math.max(1, hit - 1)
    probe = math.min(2 * probe, 16 * rounds)
  elseif hit >= 0 and limit == hit - 1 then
    hit = limit
    limit = math.max(1, limit - 1)
  else
    hit = limit
    limit = math.max(1, math.floor(limit / 2))
    probe = rounds
  end
  epoch = math.max(epoch, seen) + 1
  credit, clean = 0, 0
else
  credit = credit + 1
  if credit >= limit then
    credit = 0
    if hit >= 0 and limit >= hit then
      hit = limit + 1
      probe = rounds
    end
    if limit < ceiling then
      if hit < 0 or limit < hit - 1 then
        limit = limit + 1
      else
        clean = clean + 1
        if clean >= probe then
          clean = 0
          limit = limit + 1
        end
      end
    end
  end
end
redis.call('HSET', KEYS[1], 'limit', limit, 'epoch', epoch, 'hit', hit, 'credit', credit,
  'clean', clean, 'probe', probe)
redis.call('PEXPIRE', KEYS[1], 900000)
return {limit, epoch}
"""

# KEYS[1]: a sorted set of "id:tokens" scored by time. ARGV: tpm, then (spend) the tokens.
_TOKENS_WAIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000000)
local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local total = 0
for i = 1, #entries, 2 do total = total + tonumber(string.match(entries[i], ':(%d+)$')) end
local over = total - tonumber(ARGV[1])
if over < 0 then return 0 end
for i = 1, #entries, 2 do
  over = over - tonumber(string.match(entries[i], ':(%d+)$'))
  if over < 0 then return math.floor(tonumber(entries[i + 1]) + 60000000 - now) end
end
return 1000000
"""
_TOKENS_SPEND = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZADD', KEYS[1], string.format('%.0f', now), ARGV[1])
redis.call('PEXPIRE', KEYS[1], 120000)
return 1
"""


def endpoint_key(model: str, api_base: str | None) -> str:
    """The name of the endpoint ``model`` at ``api_base`` in Redis keys: the model, and a digest of
    both (the same for every alias of that endpoint, another for another ``api_base``)."""
    digest = hashlib.sha256(f"{model}\0{api_base or ''}".encode()).hexdigest()[:16]
    return f"{model}@{digest}"


def _key(kind: str, endpoint: str) -> str:
    return f"{NAMESPACE}limit:{kind}:{endpoint}"


class SharedAdaptiveLimit(AdaptiveLimit):
    """The adaptive limit of the endpoint ``model`` at ``api_base``, one value in ``store`` for every
    process: :meth:`throttled` and the successes given to :meth:`release` update it there (one Lua
    script, the rules of :class:`AdaptiveLimit`), and :meth:`update` takes what another process made
    of it (read with each start by :class:`SharedRateLimiter`). ``ceiling`` is this process's own:
    it never keeps more than that in flight, whatever the shared value. When Redis fails, the
    limit goes on as this process's own (the store's loss is reported by the store)."""

    def __init__(
        self, store: RedisCache, model: str, api_base: str | None, ceiling: int, *, probe_rounds: int = 10
    ) -> None:
        super().__init__(ceiling, probe_rounds=probe_rounds)
        self.store = store
        self.key = _key("adaptive", endpoint_key(model, api_base))
        self._lowered = False  # whether the shared value exists (a success then counts towards raising it)
        self._alone = False  # Redis failed: the local rules from now on

    def update(self, limit: int, epoch: int) -> None:
        """Take the shared value (``limit`` -1: never lowered) and its ``epoch``."""
        if self._alone:
            return
        self._lowered = limit >= 0
        self.limit = self.ceiling if limit < 0 else max(1, min(int(limit), self.ceiling))
        self._epoch = int(epoch)
        self._wake()  # a raised limit lets waiting attempts start

    def _shared(self, op: str, epoch: int) -> bool:
        if self._alone:
            return False
        try:
            limit, new = self.store.guard(
                "share the adaptive limit",
                lambda: self.store.client.eval(_ADAPT, 1, self.key, op, epoch, self.ceiling, self.probe_rounds),
            )
        except StoreError:
            self._alone = True
            return False
        if op == "t" and int(new) > self._epoch:
            self.decreases += 1
        self.update(int(limit), int(new))
        return True

    def overloaded(self, epoch: int, kind: str = "throttled") -> None:
        """A throttle, timeout or connection error, in the shared value (the rules of
        :meth:`AdaptiveLimit.overloaded`, one Lua script for every kind)."""
        if self._alone or not self._shared("t", epoch):
            super().overloaded(epoch, kind)
            return
        if kind == "throttled":
            self.throttles += 1
        else:
            self.stalls[kind] = self.stalls.get(kind, 0) + 1
        self.reason = kind

    def release(self, epoch: int, *, ok: bool = False) -> None:
        if ok and self._lowered and not self._alone and self._shared("ok", epoch):
            ok = False  # counted in the shared value
        # never lowered: nothing to raise, and no round trip; Redis failed: the local rules
        super().release(epoch, ok=ok and self._alone)


class SharedRateLimiter:
    """The ``rpm`` cap and the backing off of the endpoint ``model`` at ``api_base``, shared through
    ``store``; ``rpm=0`` shares only the backing off. ``adaptive``, the endpoint's
    :class:`SharedAdaptiveLimit`, is given the shared value with each start."""

    def __init__(
        self,
        store: RedisCache,
        model: str,
        api_base: str | None,
        rpm: int,
        *,
        adaptive: SharedAdaptiveLimit | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.model = model
        self.interval_us = int(60_000_000 / rpm) if rpm > 0 else 0
        self.adaptive = adaptive
        self._sleep = sleep
        endpoint = endpoint_key(model, api_base)
        self._keys = [
            _key("next", endpoint),
            _key("backoff", endpoint),
            adaptive.key if adaptive is not None else _key("adaptive", endpoint),
        ]
        self._lock: asyncio.Lock | None = None

    def _eval(self, script: str, keys: list[str], *args: Any) -> Any:
        return self.store.guard("share the rate limit", lambda: self.store.client.eval(script, len(keys), *keys, *args))

    async def acquire(self) -> None:
        """Wait for this call's start: a slot of the shared schedule, taken when it is due, after
        any backing off another process published. One coroutine of this process asks at a time."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            while True:
                wait_us, limit, epoch, now = self._eval(_ACQUIRE, self._keys, self.interval_us)
                if self.adaptive is not None:
                    self.adaptive.update(int(limit), int(epoch))
                if wait_us <= 0:
                    if self.interval_us and log.isEnabledFor(logging.DEBUG):
                        log.debug("start granted at %d us (server clock) for %s", now, self.model)
                    return
                await self._sleep(wait_us / 1e6)

    def throttled(self, retry_after: float | None) -> None:
        """Tell every process that the endpoint said slow down (waiting ``retry_after`` seconds, if
        it said how long)."""
        wait_us = int((retry_after or 0.0) * 1e6)
        if wait_us > 0:
            self._eval(_THROTTLED, self._keys[1:2], wait_us)


class SharedTokenLimiter:
    """At most ``tpm`` tokens per rolling minute to the endpoint ``model`` at ``api_base`` from every
    process together; a call starts only while the minute's tokens are below the cap (as
    :class:`TokenLimiter`)."""

    def __init__(self, store: RedisCache, model: str, api_base: str | None, tpm: int) -> None:
        self.store = store
        self.tpm = tpm
        self._key = _key("tokens", endpoint_key(model, api_base))

    async def acquire(self) -> None:
        while True:
            wait_us = self.store.guard(
                "share the token limit", lambda: self.store.client.eval(_TOKENS_WAIT, 1, self._key, self.tpm)
            )
            if wait_us <= 0:
                return
            await asyncio.sleep(min(wait_us / 1e6, 1.0))

    def spend(self, tokens: int) -> None:
        """Count an answer's ``tokens``. A lost Redis is not raised here (the answer in hand must
        still reach the store, or its spool); the store reports the loss at its next command."""
        if self.tpm > 0 and tokens > 0:
            member = f"{uuid.uuid4().hex}:{int(tokens)}"
            try:
                self.store.guard(
                    "share the token limit", lambda: self.store.client.eval(_TOKENS_SPEND, 1, self._key, member)
                )
            except StoreError:
                pass


class EndpointLimits:
    """Per endpoint (a model at an ``api_base``, an application): its adaptive limit, its ``rpm``
    cap and its ``tpm`` cap (none when 0), made on first use and shared by every alias that names
    it; with a team store, the shared ones above, so one quota holds for every process."""

    def __init__(self, concurrency: int, rpm: int, tpm: int) -> None:
        self.concurrency, self.rpm, self.tpm = concurrency, rpm, tpm
        #: the failed attempts of every endpoint's calls, by kind, and the first of each kind
        self.faults = FaultLog()
        #: endpoint (model, api_base) -> its adaptive limit
        self.adaptive: dict[tuple[str, str | None], Any] = {}
        self._caps: dict[tuple[str, str | None], tuple[Any, Any]] = {}

    def of(self, model: str, api_base: str | None, team: RedisCache | None = None) -> tuple[Any, Any, Any]:
        """(adaptive limit, rpm limiter, tpm limiter or None) of the endpoint; ``team``: the team
        store, when the run has one."""
        endpoint = (model, api_base)
        if endpoint not in self.adaptive:
            if team is not None:
                adaptive: Any = SharedAdaptiveLimit(team, model, api_base, self.concurrency)
                self._caps[endpoint] = (
                    SharedRateLimiter(team, model, api_base, self.rpm, adaptive=adaptive),
                    SharedTokenLimiter(team, model, api_base, self.tpm) if self.tpm else None,
                )
            else:
                adaptive = AdaptiveLimit(self.concurrency)
                self._caps[endpoint] = (RateLimiter(self.rpm), TokenLimiter(self.tpm) if self.tpm else None)
            self.adaptive[endpoint] = adaptive
        return (self.adaptive[endpoint], *self._caps[endpoint])

    def note(self) -> str | None:
        """What the adaptive limits have backed off to and why, for the progress line ("rate
        limited: openai/m at 6 of 32 in flight", "timing out: ..."); None while every endpoint runs
        at the configured concurrency."""
        by_reason: dict[str, list[str]] = {}
        for (model, _), a in self.adaptive.items():
            if a.backed_off:
                why = _BACKED_OFF.get(a.reason or "throttled", "backed off")
                by_reason.setdefault(why, []).append(f"{model} at {a.limit} of {a.ceiling} in flight")
        return "; ".join(f"{why}: " + ", ".join(notes) for why, notes in by_reason.items()) or None


#: the progress line's word for an endpoint backed off after each kind of overload
_BACKED_OFF = {"throttled": "rate limited", "timeout": "timing out", "connection": "connections failing"}
