"""What a collection tells while it runs (:class:`Progress`) and when it is done
(:class:`CollectionReport`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmbias.clients.faults import FaultLog, count_line


@dataclass
class Progress:
    """Live counts during a batch (passed to the progress callback)."""

    total: int
    done: int = 0
    from_store: int = 0
    #: the calls the batch is expected to make in all, its follow-ups told in advance (see
    #: :func:`expected_follow_ups`; optional ones left out); ``total`` counts those known so far
    expected: int = 0
    fetched: int = 0
    errors: int = 0
    missing: int = 0
    started: float = field(default_factory=time.perf_counter)
    #: of ``errors``, the calls that failed for good by kind of their last attempt ("timeout",
    #: "connection": :class:`~pytest_llmbias.clients.faults.FaultKind` values)
    error_kinds: dict[str, int] = field(default_factory=dict)
    #: the run's failed attempts (the first of each kind is printed at once: see ``FaultLog.untold``)
    faults: FaultLog | None = None

    def failed(self, kind: str | None) -> None:
        """Count a call that failed for good, its last attempt of ``kind`` (None: unknown)."""
        self.errors += 1
        word = kind or "other"
        self.error_kinds[word] = self.error_kinds.get(word, 0) + 1

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @property
    def calls_per_s(self) -> float:
        return self.fetched / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def shown_total(self) -> int:
        """The calls to count towards: those expected in all, or more once calls told by no
        follow-up in advance are added (a rating's re-ask, a benchmark's next batch)."""
        return max(self.total, self.expected)

    def line(self, note: str | None = None) -> str:
        """The live progress line, with ``note`` (a backed-off rate limit, say) after it."""
        missing = f", {self.missing} missing" if self.missing else ""
        kinds = f": {count_line(self.error_kinds)}" if self.errors and self.error_kinds else ""
        line = (
            f"llmbias: {self.done}/{self.shown_total} calls ({self.from_store} from store, {self.fetched} fetched, "
            f"{self.errors} errors{kinds}{missing}) {self.calls_per_s:.1f} calls/s"
        )
        return f"{line}; {note}" if note else line


@dataclass(frozen=True)
class CollectionReport:
    """What a batch did. ``errors`` and ``missing`` hold the keys that have no response."""

    total: int
    from_store: int
    fetched: int
    errors: Mapping[str, str]
    missing: tuple[str, ...]
    elapsed_s: float
    #: of ``total``, the calls asked after the first look (a gate whose verdict was still open asked them)
    later: int = 0

    @property
    def calls_per_s(self) -> float:
        return self.fetched / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "from_store": self.from_store,
            "fetched": self.fetched,
            "errors": dict(self.errors),
            "missing": list(self.missing),
            "elapsed_s": self.elapsed_s,
            "calls_per_s": self.calls_per_s,
            "later": self.later,
        }

    def merged(self, later: CollectionReport) -> CollectionReport:
        """This batch and a ``later`` one of the same process (a group-sequential gate's next batch)."""
        return CollectionReport(
            total=self.total + later.total,
            from_store=self.from_store + later.from_store,
            fetched=self.fetched + later.fetched,
            errors={**self.errors, **later.errors},
            missing=tuple(dict.fromkeys((*self.missing, *later.missing))),
            elapsed_s=self.elapsed_s + later.elapsed_s,
            later=self.later + later.total,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CollectionReport:
        return cls(
            total=int(data["total"]),
            from_store=int(data["from_store"]),
            fetched=int(data["fetched"]),
            errors=dict(data["errors"]),
            missing=tuple(data["missing"]),
            elapsed_s=float(data["elapsed_s"]),
            later=int(data.get("later", 0)),
        )


def merge_worker_reports(reports: Sequence[CollectionReport]) -> CollectionReport:
    """One report for a session whose pytest-xdist workers each ran the same plan on a shared
    store: the calls of the plan (the largest worker total), every call any worker made, every
    error and miss once, and the longest collection time. The rest came from the store."""
    if not reports:
        return CollectionReport(total=0, from_store=0, fetched=0, errors={}, missing=(), elapsed_s=0.0)
    total = max(r.total for r in reports)
    fetched = sum(r.fetched for r in reports)
    errors = {k: v for r in reports for k, v in r.errors.items()}
    missing = tuple(dict.fromkeys(k for r in reports for k in r.missing))
    return CollectionReport(
        total=total,
        from_store=max(0, total - fetched - len(errors) - len(missing)),
        fetched=fetched,
        errors=errors,
        missing=missing,
        elapsed_s=max(r.elapsed_s for r in reports),
        later=max(r.later for r in reports),
    )
