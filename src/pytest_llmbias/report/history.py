"""The run history: every run's gate figures, appended to an embedded SQLite database.

One table, ``gates``: a row per gate and method of a run — when, the git commit, the target, the
release compared against (if any), the test, gate, domain and the domain's content hash, the
verdict, the target's and the comparators' figures, the margin, p, the reliability note and the
number of items. Under pytest-xdist only the controller writes, once per run. A database that is
locked or unreadable never changes a run's verdicts: :func:`append` returns a warning instead.

Standard library only (``sqlite3``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

OFF = "off"
FILENAME = "history.sqlite"
COLUMNS = (
    "run",
    "created",
    "git_commit",
    "target",
    "release",
    "test",
    "gate",
    "domain",
    "domain_hash",
    "method",
    "verdict",
    "passed",
    "target_value",
    "comparator_value",
    "bound",
    "p",
    "reliability",
    "n",
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS gates (run TEXT NOT NULL, created TEXT NOT NULL, git_commit TEXT, target TEXT, "
    "release TEXT, test TEXT NOT NULL, gate TEXT, domain TEXT, domain_hash TEXT, method TEXT, verdict TEXT, "
    "passed INTEGER, target_value REAL, comparator_value REAL, bound REAL, p REAL, reliability TEXT, n INTEGER)"
)


def history_path(value: str | None, store_dir: Path) -> Path | None:
    """Where the history goes: ``value`` (a path), None for ``store_dir/history.sqlite``, or
    ``"off"`` for nowhere."""
    if value is not None and value.strip().lower() == OFF:
        return None
    return Path(value) if value else Path(store_dir) / FILENAME


def domain_hash(questions: Mapping[str, str]) -> str:
    """One short hash of a domain's per-question hashes (a changed question changes it)."""
    blob = json.dumps(dict(sorted(questions.items())), separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def gate_rows(entries: Iterable[Mapping[str, Any]], hashes: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The history rows of a run's gate entries (the JSON document's ``gates``): one per method
    row of each gate (one row for a gate that errored)."""
    hashes = hashes or {}
    out = []
    for entry in entries:
        result = entry.get("result") or {}
        methods = (entry.get("row") or {}).get("methods") or [{}]
        n = result.get("n_questions") or result.get("n_prompts")
        for m in methods:
            out.append(
                {
                    "test": entry.get("test"),
                    "gate": entry.get("gate"),
                    "domain": entry.get("domain"),
                    "domain_hash": hashes.get(str(entry.get("domain"))),
                    "method": m.get("method"),
                    "verdict": m.get("verdict") or entry.get("verdict"),
                    "passed": None if entry.get("passed") is None else int(bool(entry.get("passed"))),
                    "target_value": _number(m.get("target")),
                    "comparator_value": _number(m.get("baselines")),
                    "bound": _number(m.get("bound")),
                    "p": _number(m.get("p")),
                    "reliability": m.get("reliability"),
                    "n": n if isinstance(n, int) else None,
                    # the release a marker named itself (against=) over the run's
                    **({"release": entry["against"]} if entry.get("against") else {}),
                }
            )
    return out


def append(
    path: Path,
    rows: Sequence[Mapping[str, Any]],
    *,
    run: str,
    created: str,
    git_commit: str | None,
    target: str | None,
    release: str | None,
    timeout: float = 5.0,
) -> str | None:
    """Append one run's ``rows`` (see :func:`gate_rows`). Returns None, or a warning when the
    database cannot be written (locked for more than ``timeout`` seconds, not a database, no
    room): the run itself is unaffected."""
    if not rows:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path, timeout=timeout) as db:
            db.execute(_SCHEMA)
            db.executemany(
                f"INSERT INTO gates ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                [
                    tuple(
                        {
                            "run": run,
                            "created": created,
                            "git_commit": git_commit,
                            "target": target,
                            "release": release,
                            **row,
                        }.get(c)
                        for c in COLUMNS
                    )
                    for row in rows
                ],
            )
        return None
    except (sqlite3.Error, OSError) as exc:
        return f"the run history {path} was not updated ({type(exc).__name__}: {exc}); this run's verdicts stand"


def read(
    path: Path, *, gate: str | None = None, domain: str | None = None, last: int | None = None
) -> list[dict[str, Any]]:
    """The recorded rows, oldest first: of ``gate`` and ``domain`` when given, of the ``last`` runs
    when given. Raises ``sqlite3.Error`` for a database that cannot be read."""
    if not Path(path).is_file():
        return []
    where, args = [], []
    for column, value in (("gate", gate), ("domain", domain)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
        db.row_factory = sqlite3.Row
        if last is not None:
            runs = [
                r[0]
                for r in db.execute(
                    f"SELECT run FROM gates{clause} GROUP BY run ORDER BY MAX(created) DESC, MAX(rowid) DESC LIMIT ?",
                    [*args, last],
                )
            ]
            if not runs:
                return []
            clause += (" AND " if where else " WHERE ") + f"run IN ({', '.join('?' * len(runs))})"
            args += runs
        rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM gates{clause} ORDER BY created, rowid", args)
        return [dict(r) for r in rows]


def render(rows: Sequence[Mapping[str, Any]], form: str = "table") -> str:
    """The rows as an aligned table, JSON or CSV."""
    if form == "json":
        return json.dumps(list(rows), indent=2) + "\n"
    if form == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()
    shown = (
        "created",
        "test",
        "method",
        "verdict",
        "target_value",
        "comparator_value",
        "bound",
        "p",
        "release",
        "git_commit",
    )

    def cell(row: Mapping[str, Any], column: str) -> str:
        value = row.get(column)
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)[:12] if column == "git_commit" else str(value)

    table = [list(shown), *[[cell(r, c) for c in shown] for r in rows]]
    widths = [max(len(line[i]) for line in table) for i in range(len(shown))]
    return "".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() + "\n" for line in table)
