"""Retry timing: exponential backoff with full jitter, honouring the server's Retry-After.

Pure functions, no I/O: the client decides *whether* to retry, this module decides *how long* to wait.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

#: HTTP statuses worth another try: timeouts, conflicts, rate limits and server-side failures.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})

#: HTTP statuses no retry can fix: bad request, auth, payment, permissions, unknown model, too large,
#: unprocessable.
FINAL_STATUSES = frozenset({400, 401, 402, 403, 404, 413, 422})


def retryable_status(status: int) -> bool:
    """Whether an answer with this HTTP status is worth another try (every transport's rule)."""
    return status not in FINAL_STATUSES and (status in RETRYABLE_STATUSES or status >= 500)


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` further tries after the first (``throttle_retries`` more for answers that say
    "slow down", 429 and 503); waits grow as ``base * 2**attempt`` capped at
    ``cap`` seconds, drawn uniformly from [0, that] ("full jitter"), but never shorter than a
    Retry-After the server sent. A Retry-After longer than ``max_retry_after`` ends the retries:
    the call fails with the server's demand in the message rather than stalling a pipeline."""

    retries: int = 5
    base: float = 0.5
    cap: float = 30.0
    max_retry_after: float = 300.0
    #: further tries of a call the server throttled (429 or 503), counted apart from ``retries``:
    #: a provider's rate limit asks a run to slow down, not to fail
    throttle_retries: int = 10

    def delay(self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        backoff = (rng or random).uniform(0.0, min(self.cap, self.base * (2**attempt)))
        if retry_after is not None:
            return max(float(retry_after), backoff)
        return backoff

    def throttle_delay(
        self, throttles: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before retrying a throttled call (its ``throttles``-th throttle,
        0-based): the server's Retry-After and up to a quarter more, so that the calls it turned
        away together do not come back together; exponential backoff when it gave none. Waits do
        not grow with each throttle when the server says how long: the endpoint's adaptive limit,
        not the wait, is what slows the run down."""
        if retry_after is None:
            return self.delay(throttles, None, rng)
        return float(retry_after) * (1.0 + (rng or random).uniform(0.0, 0.25))

    def should_retry_throttled(self, throttles: int, *, retry_after: float | None = None) -> bool:
        """Whether to try again after throttled attempt number ``throttles`` (0-based)."""
        if throttles >= self.throttle_retries:
            return False
        return retry_after is None or retry_after <= self.max_retry_after

    def should_retry(self, attempt: int, *, retryable: bool, retry_after: float | None = None) -> bool:
        """Whether to try again after failed attempt ``attempt`` (0-based)."""
        if not retryable or attempt >= self.retries:
            return False
        return retry_after is None or retry_after <= self.max_retry_after


def parse_retry_after(value: str | float | int | None, *, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date (RFC 9110 §10.2.3).

    Returns None for a missing or unparsable value; a date in the past gives 0.
    """
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return max(0.0, float(value))
    text = str(value).strip()
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return max(0.0, (when - now).total_seconds())
