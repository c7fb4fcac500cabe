"""A bounded memo keyed by objects' identities, for the values the hot paths work out once per
parameters, settings or headers object that many calls share.

A key holds ``id(a)`` (and ``id(b)``) of the one or two objects a value was made for, and the
entry keeps the objects themselves: alive, so that no other object can take their ids while the
entry is kept, and to be checked with ``is`` on a hit, so that a key built for other objects
never serves their value. Threads may share a cache: a lookup or an eviction that races another
thread's is at worst a miss.

A lookup costs one call: the hot paths take the entry with :attr:`IdentityCache.find` (the
dictionary's own ``get``, no Python frame) and check it where they are, as :meth:`~IdentityCache.get`
does::

    kept = cache.find(key)
    if kept is not None and kept[0] is a and kept[1] is b:
        return kept[2]
    return cache.put(key, work_it_out(), a, b)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["IdentityCache", "drop_oldest"]

V = TypeVar("V")


def drop_oldest(kept: dict[Any, Any]) -> None:
    """Forget the oldest entry of ``kept`` (a miss, where another thread changed it meanwhile)."""
    try:
        kept.pop(next(iter(kept)))
    except (KeyError, RuntimeError, StopIteration):
        pass


class IdentityCache(Generic[V]):
    """Values by a hashable key that holds the ids of the objects ``a`` and ``b`` they were made
    for (``b`` None where there is one), at most ``bound`` of them: when full, a new value first
    makes room by forgetting them all, or with ``oldest_first`` only the oldest one."""

    __slots__ = ("_entries", "bound", "find", "oldest_first")

    def __init__(self, bound: int, *, oldest_first: bool = False) -> None:
        if bound < 1:
            raise ValueError(f"an IdentityCache keeps at least one value, not {bound}")
        self.bound = bound
        self.oldest_first = oldest_first
        self._entries: dict[Hashable, tuple[Any, Any, V]] = {}
        #: the entry ``(a, b, value)`` kept for a key, or None; its objects still to be checked
        self.find: Callable[[Hashable], tuple[Any, Any, V] | None] = self._entries.get

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, a: Any, b: Any = None) -> V | None:
        """The value kept for ``key`` with these very objects ``a`` and ``b``, or None (a cache
        whose values may be None checks :attr:`find`'s entry instead). Raises :class:`TypeError`
        where ``key`` is not hashable."""
        kept = self._entries.get(key)
        if kept is not None and kept[0] is a and kept[1] is b:
            return kept[2]
        return None

    def put(self, key: Hashable, value: V, a: Any, b: Any = None) -> V:
        """Keep ``value`` for ``key`` (which holds ``id(a)`` and ``id(b)``) with the objects ``a``
        and ``b``, kept alive with it, making room first when full; ``value``. Raises
        :class:`TypeError` where ``key`` is not hashable."""
        entries = self._entries
        if len(entries) >= self.bound:
            if self.oldest_first:
                try:
                    entries.pop(next(iter(entries)))
                except (KeyError, RuntimeError, StopIteration):  # another thread's eviction came first
                    pass
            else:
                entries.clear()
        entries[key] = (a, b, value)
        return value

    def clear(self) -> None:
        """Forget every value."""
        self._entries.clear()
