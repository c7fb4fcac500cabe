"""A gate's figures over the recorded runs, for the HTML report: one plot per method, each run
labelled apart from the others, and a plot only where there are two distinct runs to join.

The rows are the run history's (:func:`pytest_llmbias.report.history.read`) of one test, this run's
included, oldest first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _moment(created: Any, precision: int) -> str:
    """``created`` (an ISO 8601 time, ``2026-12-01T14:03:22+00:00``) as ``2026-12-01 14:03``:
    ``precision`` 0 the date, 1 to the minute, 2 to the second."""
    text = str(created or "")
    date, _, clock = text.partition("T")
    return date if precision == 0 or not clock else f"{date} {clock[: 5 if precision == 1 else 8]}"


def run_labels(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One label per row (a run), every label different: the date and the commit, then the time
    (to the minute, then the second) where two runs share them, then the run's place (``#2``)
    where even that is shared (runs of one commit in one second)."""
    labels: list[str] = []
    for precision in (0, 1, 2):
        labels = [f"{_moment(r.get('created'), precision)} {str(r.get('git_commit') or '')[:7]}".strip() for r in rows]
        if len(set(labels)) == len(labels):
            return labels
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(f"{label} #{seen[label]}")
    return out


def distinct_runs(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``rows`` one per run (the last row a run recorded), in their order."""
    last: dict[Any, Mapping[str, Any]] = {}
    for r in rows:
        last.pop(r.get("run"), None)  # keep the run's place at its last row
        last[r.get("run")] = r
    return list(last.values())


def trends(entry: Mapping[str, Any]) -> list[Any]:
    """Per method, the gate's figures over the recorded runs (``entry["history"]``), as
    :func:`pytest_llmbias.report.plots.trend` figures; none for a method with fewer than two
    distinct runs (one run is a point, not a trend)."""
    from pytest_llmbias.report import plots

    rows = list(entry.get("history") or ())
    out = []
    for method in dict.fromkeys(r.get("method") for r in rows):
        mine = distinct_runs([r for r in rows if r.get("method") == method])
        if len(mine) < 2:
            continue
        series = {
            "target": [r.get("target_value") for r in mine],
            "comparators": [r.get("comparator_value") for r in mine],
            "margin": [r.get("bound") for r in mine],
        }
        verdicts = ", ".join(str(r.get("verdict")) for r in mine)
        out.append(
            plots.trend(
                f"{method or 'gate'}: over the last {len(mine)} runs",
                run_labels(mine),
                series,
                caption=f"verdicts, oldest first: {verdicts}",
            )
        )
    return out
