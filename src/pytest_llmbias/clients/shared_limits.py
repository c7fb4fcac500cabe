"""The limits of :mod:`pytest_llmbias.clients.ratelimit`, shared by every process that uses one team
store (see :mod:`pytest_llmbias.store.redis_store`): four CI jobs on one provider quota stay inside
what one job was given.

- :class:`SharedRateLimiter`: the ``rpm`` cap as one schedule of call starts for all processes (a
  start is granted when it is due, ``60/rpm`` seconds after the last one, in one atomic Lua script
  on the Redis server's clock, so machines' clocks do not matter), and the *backing off* after a
  429 or 503: a process that is told to slow down publishes it; every other process halves its
  own adaptive limit once for that overload and waits out the ``Retry-After`` the provider gave.
- :class:`SharedTokenLimiter`: the ``tpm`` cap over one rolling minute of every process's tokens.

Both are used from a session's one event loop; each Redis round trip is one short script.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pytest_llmbias.clients.ratelimit import AdaptiveLimit
from pytest_llmbias.store.redis_store import NAMESPACE, RedisCache

# KEYS: the theoretical time of the next start, backoff end, throttle epoch (microseconds on the
# server's clock). ARGV[1]: the interval between starts (0: no cap). A start is granted only when
# it is due (at most half an interval early), and the next one is then due an interval after the
# later of now and this one's due time: the grants are spaced by the clock at which they are
# taken, so a process that wakes late never starts two calls together (the GCRA of ATM networks).
# Returns {wait (0: granted), epoch}.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local epoch = tonumber(redis.call('GET', KEYS[3]) or '0')
local backoff = tonumber(redis.call('GET', KEYS[2]) or '0')
if backoff > now then return {math.floor(backoff - now), epoch} end
local interval = tonumber(ARGV[1])
if interval <= 0 then return {0, epoch} end
local due = tonumber(redis.call('GET', KEYS[1]) or '0')
local early = due - interval / 2 - now
if early > 0 then return {math.floor(early), epoch} end
local nxt = math.max(now, due) + interval
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', math.floor((nxt - now) / 1000) + 60000)
return {0, epoch}
"""

# KEYS: backoff end, throttle epoch. ARGV[1]: the wait the provider asked for, in microseconds.
_THROTTLED = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local wait = tonumber(ARGV[1])
if wait > 0 then
  local until_ = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now + wait)
  redis.call('SET', KEYS[1], string.format('%.0f', until_), 'PX', math.floor((until_ - now) / 1000) + 60000)
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], 3600000)
return epoch
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


def _key(kind: str, model: str) -> str:
    return f"{NAMESPACE}limit:{kind}:{model}"


class SharedRateLimiter:
    """The ``rpm`` cap and the backing off of ``model``'s calls, shared through ``store``;
    ``rpm=0`` shares only the backing off. ``adaptive`` is this process's limit of the endpoint,
    halved once for each overload another process reports."""

    def __init__(self, store: RedisCache, model: str, rpm: int, *, adaptive: AdaptiveLimit | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.store = store
        self.model = model
        self.interval_us = int(60_000_000 / rpm) if rpm > 0 else 0
        self.adaptive = adaptive
        self._sleep = sleep
        self._keys = [_key("next", model), _key("backoff", model), _key("epoch", model)]
        self._seen: int | None = None  # the last throttle epoch this process knows of
        self._own: set[int] = set()  # the epochs this process's own throttles made
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
                wait_us, epoch = self._eval(_ACQUIRE, self._keys, self.interval_us)
                self._news(int(epoch))
                if wait_us <= 0:
                    return
                await self._sleep(wait_us / 1e6)

    def _news(self, epoch: int) -> None:
        if self._seen is None:
            self._seen = epoch  # overloads before this process started are not its news
        elif epoch > self._seen:
            news = any(e not in self._own for e in range(self._seen + 1, epoch + 1))
            self._seen = epoch
            if news and self.adaptive is not None:
                self.adaptive.slow_down()

    def throttled(self, retry_after: float | None) -> None:
        """Tell every process that ``model``'s provider said slow down (waiting ``retry_after``
        seconds, if it said how long)."""
        wait_us = int((retry_after or 0.0) * 1e6)
        self._own.add(int(self._eval(_THROTTLED, self._keys[1:], wait_us)))


class SharedTokenLimiter:
    """At most ``tpm`` tokens per rolling minute to ``model`` from every process together; a call
    starts only while the minute's tokens are below the cap (as :class:`TokenLimiter`)."""

    def __init__(self, store: RedisCache, model: str, tpm: int) -> None:
        self.store = store
        self.tpm = tpm
        self._key = _key("tokens", model)

    async def acquire(self) -> None:
        while True:
            wait_us = self.store.guard("share the token limit", lambda: self.store.client.eval(
                _TOKENS_WAIT, 1, self._key, self.tpm))
            if wait_us <= 0:
                return
            await asyncio.sleep(min(wait_us / 1e6, 1.0))

    def spend(self, tokens: int) -> None:
        if self.tpm > 0 and tokens > 0:
            member = f"{uuid.uuid4().hex}:{int(tokens)}"
            self.store.guard("share the token limit", lambda: self.store.client.eval(_TOKENS_SPEND, 1, self._key, member))
