"""Where the resamplings of a run are also kept between runs (see
:func:`pytest_llmbias.stats.resampling.keep_between_runs`).

A session names the shelf when it opens (its store's ``resampled/`` folder) and takes it back when
it closes; without one (a session with ``cache: off``, code that uses the statistics alone) a
resampling is kept in its process only. Standard library only: naming the shelf imports no numpy.
"""

from __future__ import annotations

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


__all__ = ["Shelf", "current", "keep_between_runs"]
