"""What went wrong with a model's calls, by kind: the first failed attempt of each kind is told at
once (its reason and what to change), and the calls that failed for good are counted by kind on
the progress line ("63 errors: 60 timeout, 3 connection").

A kind is what a user can act on: a *timeout* (no complete answer within ``collection.timeout``:
a slow or busy server), a *connection* error (nothing answers, or the connection was cut), a
*throttle* (429, or 503: the server said slow down), a *server* error (another 5xx), a *refusal*
(a 4xx no retry can fix) and a *malformed* answer. Timeouts and connection errors slow the
endpoint's calls down as throttles do (see :class:`~pytest_llmbias.clients.ratelimit.AdaptiveLimit`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class FaultKind(str, Enum):
    """The kinds a failed attempt is counted under; the value is the word the progress line uses."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    THROTTLED = "throttled"
    SERVER = "server error"
    REFUSED = "refused"
    MALFORMED = "malformed"
    OTHER = "other"


#: the kinds that say the endpoint is overloaded: they shrink its adaptive limit
OVERLOAD_KINDS = frozenset({FaultKind.TIMEOUT, FaultKind.CONNECTION, FaultKind.THROTTLED})

_CONNECTION_WORDS = (
    "connection error",
    "cannot connect",
    "connection refused",
    "connect call failed",
    "connection reset",
    "server disconnected",
    "serverdisconnected",
    "clientconnector",
    "clientoserror",
    "remotedisconnected",
)


def fault_kind(exc: BaseException, status: int | None) -> FaultKind:
    """The kind of a failed attempt that raised ``exc`` with HTTP ``status`` (None: no status).

    A timeout is ours (asyncio's, litellm's ``Timeout``, the direct transport's "Timeout:") or the
    server's (408, or a gateway's 504); a connection error is a refused, reset or dropped
    connection (litellm reports one as a 500 "Connection error.")."""
    name = type(exc).__name__.lower()
    text = str(exc).lower()
    if status in (408, 504) or isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or "timeout" in name:
        return FaultKind.TIMEOUT
    if text.startswith("timeout:") or "timed out" in text:
        return FaultKind.TIMEOUT
    if isinstance(exc, ConnectionError) or "connection" in name or any(w in text for w in _CONNECTION_WORDS):
        return FaultKind.CONNECTION
    if status in (429, 503):
        return FaultKind.THROTTLED
    if status is not None and status >= 500:
        return FaultKind.SERVER
    if status is not None and status >= 400:
        return FaultKind.REFUSED
    if "malformed" in text or "empty completion" in text:
        return FaultKind.MALFORMED
    return FaultKind.OTHER


def advice(kind: FaultKind, *, timeout: float, concurrency: int, max_tokens: Any = None) -> str | None:
    """What to change for a fault of ``kind``, naming the settings (``collection.timeout``,
    ``collection.concurrency``, ``generation.max_tokens``) and their values in this run."""
    tokens = f" (this call asks up to {max_tokens})" if isinstance(max_tokens, int) else ""
    if kind is FaultKind.TIMEOUT:
        return (
            f"the server is slower than collection.timeout ({timeout:g}s) allows: raise collection.timeout, "
            f"lower collection.concurrency ({concurrency}; the run halves it meanwhile) or lower "
            f"generation.max_tokens{tokens}: a CPU model writes a long answer slowly"
        )
    if kind is FaultKind.CONNECTION:
        return (
            "is the server running and the address right? A server that drops connections under load needs "
            f"a lower collection.concurrency ({concurrency}; the run halves it meanwhile)"
        )
    if kind is FaultKind.THROTTLED:
        return (
            f"the server asks the run to slow down: the run halves its calls in flight; set a lower "
            f"collection.concurrency ({concurrency}) or collection.rpm to start there"
        )
    if kind is FaultKind.SERVER:
        return "the server failed on its side: its own log says why; the call is retried"
    return None


@dataclass(frozen=True)
class Fault:
    """The first failed attempt of a kind at a model: ``detail`` the error's first line (credentials
    masked), ``advice`` what to change, ``retried`` whether the call is tried again."""

    kind: FaultKind
    alias: str
    endpoint: str
    detail: str
    advice: str | None
    retried: bool

    @property
    def message(self) -> str:
        """The line a run prints at once."""
        then = "retrying" if self.retried else "not retried"
        text = f"llmbias: first {self.kind.value} error: model {self.alias!r} ({self.endpoint}): {self.detail} ({then})"
        return f"{text}; {self.advice}" if self.advice else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "alias": self.alias,
            "endpoint": self.endpoint,
            "detail": self.detail,
            "advice": self.advice,
            "retried": self.retried,
        }


class FaultLog:
    """A run's failed attempts by kind, and the first of each kind (:class:`Fault`), told once to
    ``listener`` as it happens (the terminal prints it at once). Safe to use from the session's
    loop and the thread that reads it for the progress line."""

    def __init__(self, listener: Callable[[Fault], None] | None = None) -> None:
        self.listener = listener
        #: failed attempts (retried or not) by kind
        self.attempts: Counter[FaultKind] = Counter()
        self.first: dict[FaultKind, Fault] = {}
        self._untold: list[Fault] = []
        self._lock = threading.Lock()

    def record(self, fault: Fault) -> None:
        """Count ``fault``'s attempt; the first of its kind is kept, and told to the listener."""
        with self._lock:
            self.attempts[fault.kind] += 1
            if fault.kind in self.first:
                return
            self.first[fault.kind] = fault
            self._untold.append(fault)
        if self.listener is not None:
            try:
                self.listener(fault)
            except Exception:  # a terminal that cannot be written must not fail the call in hand
                pass

    def attempt(
        self,
        kind: FaultKind,
        *,
        alias: str,
        endpoint: str,
        text: str,
        timeout: float,
        concurrency: int,
        max_tokens: Any = None,
        retried: bool,
    ) -> None:
        """:meth:`record` a failed attempt of ``kind`` at ``alias`` (``text``: its error, credentials
        masked; its first line is kept), with the :func:`advice` for this run's settings."""
        detail = text.splitlines()[0] if text else kind.value
        if len(detail) > 200:
            detail = detail[:197] + "..."
        how = advice(kind, timeout=timeout, concurrency=concurrency, max_tokens=max_tokens)
        self.record(Fault(kind, alias, endpoint, detail, how, retried))

    def untold(self) -> list[Fault]:
        """The first faults of their kinds not yet taken by this call (each is given once)."""
        with self._lock:
            taken, self._untold = self._untold, []
        return taken


def count_line(by_kind: Mapping[FaultKind | str, int]) -> str:
    """``"60 timeout, 3 connection"``: the counts, largest first (empty for none)."""
    items = [(k.value if isinstance(k, FaultKind) else str(k), n) for k, n in by_kind.items() if n]
    return ", ".join(f"{n} {word}" for word, n in sorted(items, key=lambda kv: (-kv[1], kv[0])))
