"""One definition of the gates' rows and counts, shared by every report (terminal, Markdown, JSON,
HTML), so that no two of them count a run differently.

A *gate* is one test's gate marker: it is counted once, whatever its checks. Each of its checks
(a method, a comparison, a release it is compared with) is one *row* of the reports' tables. A
gate's *outcome* is its test's (``passed``, ``failed``, ``xfailed``, ``xpassed``, ``error``,
``skipped``); a row's *verdict* is its check's. A gate with several checks fails when any of
them does, so a check that passed may sit in a gate that failed: its row says so
(:attr:`CheckRow.note`), and never reads as if the check itself had failed. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the outcomes in the order the reports list them
OUTCOMES = ("passed", "failed", "xfailed", "xpassed", "error", "skipped")
#: how a count of each outcome reads
OUTCOME_WORDS = {
    "passed": "passed",
    "failed": "failed",
    "xfailed": "xfailed (failed as expected)",
    "xpassed": "xpassed (passed though expected to fail)",
    "error": "stopped by an error",
    "skipped": "skipped",
}


def outcome_of(entry: Mapping[str, Any], outcomes: Mapping[str, str] | None = None) -> str:
    """The outcome of a gate's entry (a JSON document's gate entry or an end-of-run row): its
    ``outcome``, else the test's in ``outcomes`` (test id -> outcome), else what its ``passed``
    says (True: passed, False: failed, none: error)."""
    if entry.get("outcome"):
        return str(entry["outcome"])
    if outcomes is not None and str(entry.get("test")) in outcomes:
        return outcomes[str(entry.get("test"))]
    if "error" in entry:
        return "error"
    passed = entry.get("passed")
    return "passed" if passed is True else "failed" if passed is False else "error"


@dataclass(frozen=True)
class CheckRow:
    """One row of a report's gate table: one check of one gate."""

    test: str
    gate: str
    domain: str
    #: the gate's outcome (its test's), the same on every row of the gate
    outcome: str
    #: the check's name (``embedding``, ``judge``, ``IR(sentiment)`` ...); ``-`` for an error
    method: str
    #: the check's own verdict
    verdict: str
    #: the check's figures: target, baselines, bound, p, reliability (None where it has none)
    figures: Mapping[str, Any] = field(default_factory=dict)
    #: whether the check itself passed, where its row says (None: not said)
    passed: bool | None = None
    #: the row's place among its gate's rows, and how many its gate has
    index: int = 0
    checks: int = 1
    #: why the row's verdict and the gate's outcome differ, when they do (else "")
    note: str = ""

    @property
    def first(self) -> bool:
        """The gate's first row (where a table names the test and its outcome once)."""
        return self.index == 0

    @property
    def shown_verdict(self) -> str:
        """The verdict with its :attr:`note`, as a table shows it."""
        return f"{self.verdict}; {self.note}" if self.note else self.verdict


def _failed(outcome: str) -> bool:
    return outcome in ("failed", "xfailed", "error")


def check_rows(entry: Mapping[str, Any], outcomes: Mapping[str, str] | None = None) -> list[CheckRow]:
    """The rows of one gate: ``entry`` is a JSON document's gate entry (its ``row`` holds the
    checks) or an end-of-run row (``methods``, or ``error``). Each check's own ``passed`` is
    taken where its row states it, else the gate's where the gate has one check."""
    given = entry.get("row")
    row: Mapping[str, Any] = given if isinstance(given, Mapping) else entry
    test, outcome = str(entry.get("test") or row.get("test") or ""), outcome_of(entry, outcomes)
    gate, domain = str(entry.get("gate") or ""), str(entry.get("domain") or row.get("domain") or "")
    if "error" in row or "error" in (entry.get("result") or {}):
        return [CheckRow(test, gate, domain, outcome, "-", "error", {}, None)]
    methods = [m for m in row.get("methods") or () if isinstance(m, Mapping)] or [{}]
    out = []
    for i, m in enumerate(methods):
        passed = m.get("passed") if isinstance(m.get("passed"), bool) else None
        if passed is None and len(methods) == 1 and isinstance(entry.get("passed"), bool):
            passed = entry["passed"]
        verdict = str(m.get("verdict") or entry.get("verdict") or "")
        # the checks it failed on: those that say they failed, else those that say nothing
        rest = [o for j, o in enumerate(methods) if j != i]
        others = [str(o.get("method") or "") for o in rest if o.get("passed") is False] or [
            str(o.get("method") or "") for o in rest if o.get("passed") is None
        ]
        note = ""
        if passed is True and _failed(outcome):
            # a gate fails when any check does: this one did not, say which did
            note = f"the gate failed on {', '.join(others)}" if others else "the gate failed on another check"
        figures = {k: m.get(k) for k in ("target", "baselines", "bound", "p", "reliability")}
        out.append(
            CheckRow(
                test,
                gate,
                domain,
                outcome,
                str(m.get("method") or gate or "-"),
                verdict,
                figures,
                passed,
                i,
                len(methods),
                note,
            )
        )
    return out


@dataclass(frozen=True)
class GateCounts:
    """How many gates a run had, how many rows (checks) the reports' tables give them, and how
    many gates ended in each outcome (each gate counted once)."""

    gates: int
    checks: int
    outcomes: Mapping[str, int]

    def sentence(self) -> str:
        """The count as every report says it, say "13 gates in 14 rows (one a check): 7 passed,
        6 xfailed (failed as expected)"."""
        rows = "" if self.checks == self.gates else f" in {self.checks} rows (one a check)"
        said = [f"{n} {OUTCOME_WORDS.get(o, o)}" for o, n in self.outcomes.items() if n]
        return f"{self.gates} gate{'s' if self.gates != 1 else ''}{rows}" + (": " + ", ".join(said) if said else "")

    @property
    def not_passed(self) -> int:
        """The gates whose outcome is not ``passed`` (nor ``xfailed``: an expected failure is
        what its test asks for)."""
        return sum(n for o, n in self.outcomes.items() if o not in ("passed", "xfailed"))

    def to_dict(self) -> dict[str, Any]:
        return {"gates": self.gates, "checks": self.checks, "outcomes": dict(self.outcomes)}


def count(entries: Iterable[Mapping[str, Any]], outcomes: Mapping[str, str] | None = None) -> GateCounts:
    """The :class:`GateCounts` of a run's gate entries (see :func:`check_rows`; one entry a gate,
    the last of a test id kept)."""
    by_test = {str(e.get("test")): e for e in entries}
    tally = dict.fromkeys(OUTCOMES, 0)
    checks = 0
    for entry in by_test.values():
        rows = check_rows(entry, outcomes)
        checks += len(rows)
        tally[rows[0].outcome] = tally.get(rows[0].outcome, 0) + 1
    return GateCounts(len(by_test), checks, {o: n for o, n in tally.items() if n})
