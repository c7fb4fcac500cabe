"""Where the resamplings of a run are also kept between runs (see
:func:`pytest_llmbias.stats.resampling.keep_between_runs`).

A session names the shelf when it opens (its store's ``resampled/`` folder) and takes it back when
it closes; without one (a session with ``cache: off``, code that uses the statistics alone) a
resampling is kept in its process only. Standard library only: naming the shelf imports no numpy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Protocol


class Shelf(Protocol):
    """Bytes under string keys: ``get`` gives None for a key it does not hold (or cannot read);
    ``set`` keeps a value, or does nothing where it cannot."""

    def get(self, key: str) -> bytes | None: ...

    def set(self, key: str, value: bytes) -> None: ...


_SHELF: Shelf | None = None


def current() -> Shelf | None:
    """The shelf resamplings are kept on, or None."""
    return _SHELF


def keep_between_runs(shelf: Shelf | None) -> Shelf | None:
    """Keep resamplings on ``shelf`` from now on (None: in this process only); the shelf it replaces."""
    global _SHELF
    previous, _SHELF = _SHELF, shelf
    return previous


def name(layout: str, *parts: object) -> str:
    """The shelf's name of a result: a SHA-256 of ``layout`` (what the result is and how it is
    computed, with the versions of the libraries that compute it) and of every part of its inputs
    (bytes as they are, the rest as their repr: exact for floats, strings and frozen records)."""
    digest = hashlib.sha256(layout.encode())
    for part in parts:
        blob = part if isinstance(part, bytes) else repr(part).encode("utf-8")
        digest.update(len(blob).to_bytes(8, "little"))
        digest.update(blob)
    return digest.hexdigest()


def kept(
    key: Callable[[], str | None],
    compute: Callable[[], object],
    encode: Callable[[object], bytes],
    decode: Callable[[bytes], object],
) -> object:
    """``compute()``, or what the current shelf keeps under the name ``key()`` gives (asked only
    when there is a shelf; None: not kept, as without one). ``decode`` gives None for bytes it
    cannot read, which are computed and kept again."""
    on = current()
    name = key() if on is not None else None
    if on is None or name is None:
        return compute()
    raw = on.get(name)
    value = decode(raw) if raw is not None else None
    if value is None:
        value = compute()
        on.set(name, encode(value))
    return value


__all__ = ["Shelf", "current", "keep_between_runs", "kept", "name"]
