"""What the loaders of published benchmark data share (:mod:`~pytest_llmbias.domains.bbq_file`,
:mod:`~pytest_llmbias.domains.discrim_file`): the extra that reads ``hf:`` sources, and the choice of
categories and of a subset of ``limit`` items."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_llmbias.errors import DomainError

EXTRA = "pip install 'pytest-llmbias[datasets]'"

Record = Mapping[str, Any]


def choose(
    records: Sequence[Record],
    *,
    source: object,
    what: str,
    category: Callable[[Record], str],
    categories: Iterable[str] | None,
    limit: int | None,
    subset: Callable[[Sequence[Record], int], tuple[list[Record], str | None]],
) -> tuple[list[Record], tuple[str, ...], list[str]]:
    """The records of ``categories`` (all when None), at most ``limit`` of them drawn by ``subset``
    (which returns the kept records and, when it keeps fewer than asked, what it kept), the
    categories ``source`` holds, and the notices for the user. An unknown category is a
    :class:`DomainError` listing the known ones (``what`` names them: "BBQ category"); a ``limit``
    above the data's size keeps them all, with a notice giving the real size."""
    known = tuple(sorted({category(r) for r in records}))
    notices: list[str] = []
    kept = list(records)
    if categories is not None:
        wanted = list(categories)
        unknown = [c for c in wanted if c not in known]
        if unknown:
            raise DomainError(f"{source}: no {what} {', '.join(map(repr, unknown))}; it holds {', '.join(known)}")
        kept = [r for r in kept if category(r) in wanted]
    if limit is not None:
        if limit < 1:
            raise DomainError(f"limit must be at least 1, got {limit}")
        if limit >= len(kept):
            if limit > len(kept):
                notices.append(f"{source}: limit {limit} is more than the {len(kept)} items asked for: all are used")
        else:
            kept, short = subset(kept, limit)
            if short is not None:
                notices.append(f"{source}: limit {limit}: the largest balanced subset that fits has {short}")
    return kept, known, notices
