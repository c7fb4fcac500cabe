"""Client-side limits on the calls to one endpoint (a model at an ``api_base``).

- :class:`AdaptiveLimit`: how many attempts may be in flight. It starts at the configured
  concurrency, so a healthy run goes at full speed; a rate-limit answer (429, or 503), a timeout
  or a connection error halves it, and it grows back step by step while calls succeed, so a run
  settles just under a provider's quota, or at what a slow server answers within the timeout.
- :class:`RateLimiter`: an explicit cap on attempt starts per minute (``rpm``), off by default.
- :class:`TokenLimiter`: an explicit cap on tokens per minute (``tpm``, counted from each answer's
  usage), off by default.

All three are used from the session's one event loop.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable


class AdaptiveLimit:
    """Attempts in flight to one endpoint, adjusted to what it accepts (additive increase,
    multiplicative decrease, as TCP's congestion window).

    ``limit`` starts at ``ceiling``. A throttled attempt (:meth:`throttled`), or one that timed out
    or lost its connection (:meth:`overloaded`), halves it — once per overload: an attempt that
    started before the last decrease cannot decrease it again, so the burst of 429s (or timeouts)
    one overload produces counts once; and the client keeps such an attempt's place through the
    wait that follows (the Retry-After the endpoint asked for; for a timed-out attempt, one more
    timeout, while the server may still be decoding it), so the calls it turned away do not come
    straight back while its window is still full. Every ``limit`` successful attempts (a round)
    raise it by one, up to one below the lowest level that was throttled; there it holds for
    ``probe_rounds`` clean rounds before it probes one higher. A failed probe (a throttle at or
    above that level) is not a surprise: it steps back to the level that held instead of halving,
    and the next probe waits twice as long (up to 16 times ``probe_rounds``); a throttle at the
    level that held steps one below it. So a run settles at the highest level
    its provider accepts, where halving alone would saw between half of it and it (measured in
    ``benchmarks/collect.py``: 83 % of a 30 calls/s quota halving alone, 87-89 % so). Never below
    1 or above ``ceiling``.
    """

    def __init__(self, ceiling: int, *, probe_rounds: int = 10) -> None:
        if ceiling < 1:
            raise ValueError(f"ceiling must be at least 1, got {ceiling}")
        self.ceiling = ceiling
        self.limit = ceiling
        self.probe_rounds = probe_rounds
        self.in_flight = 0
        self.throttles = 0  # throttled attempts seen
        #: timed-out and cut-off attempts seen, by kind ("timeout", "connection")
        self.stalls: dict[str, int] = {}
        #: what the last overload was ("throttled", "timeout", "connection"; None: none yet)
        self.reason: str | None = None
        self.decreases = 0
        self._epoch = 0  # bumped by each decrease
        self._ceiling_hit: int | None = None  # the limit at the last decrease
        self._credit = 0
        self._clean_rounds = 0
        self._probe_wait = probe_rounds
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def backed_off(self) -> bool:
        return self.limit < self.ceiling

    async def acquire(self) -> int:
        """Wait for a free place; returns the epoch to hand back to :meth:`release`."""
        while self.in_flight >= self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # pass on a wake-up this task can no longer use
                raise
        self.in_flight += 1
        return self._epoch

    def release(self, epoch: int, *, ok: bool = False) -> None:
        """Hand back the place taken at ``epoch``. ``ok``: the attempt succeeded (anything else —
        an error, or a throttle already counted by :meth:`throttled` — neither grows nor shrinks)."""
        self.in_flight -= 1
        if ok:
            self._credit += 1
            if self._credit >= self.limit:
                self._credit = 0
                self._grow()
        self._wake()

    def throttled(self, epoch: int) -> None:
        """Count a throttle of the attempt that took its place at ``epoch`` (and decrease the
        limit if it is the first of an overload), keeping the place: the client holds it through
        the wait the endpoint asked for, so turned-away calls do not come straight back, then
        hands it back with a plain :meth:`release`."""
        self.overloaded(epoch, "throttled")

    def overloaded(self, epoch: int, kind: str = "throttled") -> None:
        """Count an attempt (its place taken at ``epoch``) that says the endpoint has more than it
        can take: a throttle (429, 503), a timeout or a connection error (``kind``, a
        :class:`~pytest_llmbias.clients.faults.FaultKind` value). One mechanism for all three:
        the first of an overload decreases the limit (halves it, or steps back from a probe), the
        place is kept until the client hands it back with a plain :meth:`release`."""
        if kind == "throttled":
            self.throttles += 1
        else:
            self.stalls[kind] = self.stalls.get(kind, 0) + 1
        self.reason = kind
        self._decrease(epoch)

    def _decrease(self, epoch: int) -> None:
        if epoch == self._epoch:
            if self._ceiling_hit is not None and self.limit >= self._ceiling_hit:
                self.limit = max(1, self._ceiling_hit - 1)  # a failed probe: back to what held
                self._probe_wait = min(2 * self._probe_wait, 16 * self.probe_rounds)
            elif self._ceiling_hit is not None and self.limit == self._ceiling_hit - 1:
                # the level that held, throttled once: the quota sits about here; one step down
                self._ceiling_hit = self.limit
                self.limit = max(1, self.limit - 1)
            else:
                self._ceiling_hit = self.limit
                self.limit = max(1, self.limit // 2)
                self._probe_wait = self.probe_rounds
            self._epoch += 1
            self.decreases += 1
            self._credit = self._clean_rounds = 0

    def _grow(self) -> None:
        """One round of successes at ``limit``."""
        if self._ceiling_hit is not None and self.limit >= self._ceiling_hit:
            self._ceiling_hit = self.limit + 1  # a probed level held: the quota is higher than it was
            self._probe_wait = self.probe_rounds
        if self.limit >= self.ceiling:
            return
        plateau = None if self._ceiling_hit is None else self._ceiling_hit - 1
        if plateau is None or self.limit < plateau:
            self.limit += 1
            return
        self._clean_rounds += 1
        if self._clean_rounds >= self._probe_wait:
            self._clean_rounds = 0
            self.limit += 1

    def _wake(self) -> None:
        free = self.limit - self.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1


class RateLimiter:
    """Spaces the start of calls to one endpoint; ``rpm=0`` means no cap. Use from one event loop.

    A start is granted when it is due, ``60/rpm`` seconds after the start granted before it, and
    the next caller's wait begins only then: an event loop blocked past several turns (a first
    response's one-time work, a slow machine) widens the spacing, never bunches the starts behind it.
    """

    def __init__(self, rpm: int) -> None:
        self.interval = 60.0 / rpm if rpm > 0 else 0.0
        self._last = float("-inf")
        self._lock: asyncio.Lock | None = None

    async def acquire(self) -> None:
        if self.interval == 0.0:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            wait = self._last + self.interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._last = time.monotonic()

    def throttled(self, retry_after: float | None) -> None:
        """A throttle of this endpoint's calls: nothing to share in one process (see
        :class:`~pytest_llmbias.clients.shared_limits.SharedRateLimiter`)."""


class TokenLimiter:
    """At most ``tpm`` tokens per rolling minute to one endpoint, counted from the usage of the
    answers (prompt and completion tokens); ``tpm=0`` means no cap. A call starts only while the
    last minute's tokens are below the cap, so one answer may overshoot it, never a second."""

    WINDOW = 60.0

    def __init__(self, tpm: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.tpm = tpm
        self._spent: collections.deque[tuple[float, int]] = collections.deque()
        self._total = 0
        self._clock = clock

    def used(self) -> int:
        """Tokens counted in the last minute."""
        cutoff = self._clock() - self.WINDOW
        while self._spent and self._spent[0][0] <= cutoff:
            self._total -= self._spent.popleft()[1]
        return self._total

    def wait_time(self) -> float:
        """Seconds until a call may start (0: now)."""
        if self.tpm <= 0 or self.used() < self.tpm:
            return 0.0
        # the oldest entries leave the window first: wait until enough have left
        over, now = self._total - self.tpm, self._clock()
        for when, tokens in self._spent:
            over -= tokens
            if over < 0:
                return max(0.0, when + self.WINDOW - now)
        return 0.0  # pragma: no cover - the loop always ends below the cap

    async def acquire(self) -> None:
        # In steps of at most a second, reading the clock again after each: the wait ends as
        # soon as the window has moved on, whatever moved it.
        while (wait := self.wait_time()) > 0:
            await asyncio.sleep(min(wait, 1.0))

    def spend(self, tokens: int) -> None:
        if self.tpm > 0 and tokens > 0:
            self._spent.append((self._clock(), tokens))
            self._total += tokens
