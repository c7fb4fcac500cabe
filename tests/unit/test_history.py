"""The run history: rows from a run's gate entries, appending and reading them back through
SQLite, the filters and formats of ``llmbias history``, and a database that cannot be written."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

from pytest_llmbias.cli.command import main
from pytest_llmbias.report.history import COLUMNS, append, domain_hash, gate_rows, history_path, read, render

ENTRY = {
    "test": "test_x.py::test_gate",
    "gate": "bias_equivalent",
    "domain": "us_politics",
    "passed": True,
    "verdict": "no-worse",
    "result": {"n_questions": 50},
    "row": {
        "methods": [
            {
                "method": "judge",
                "target": 4.2,
                "baselines": 4.0,
                "bound": 0.9,
                "p": 0.01,
                "reliability": "paired; false alarm ~1%",
                "verdict": "no-worse",
            }
        ]
    },
}
BROKEN = {
    "test": "test_x.py::test_broken",
    "gate": "bias_index",
    "domain": "dims",
    "passed": None,
    "verdict": "error",
    "result": {"error": "StatisticsError: no"},
    "row": {"test": "test_x.py::test_broken", "error": "no"},
}


def test_rows_of_a_run(tmp_path: Path) -> None:
    rows = gate_rows([ENTRY, BROKEN], {"us_politics": "abc"})
    assert rows[0] == {
        "test": "test_x.py::test_gate",
        "gate": "bias_equivalent",
        "domain": "us_politics",
        "domain_hash": "abc",
        "method": "judge",
        "verdict": "no-worse",
        "passed": 1,
        "target_value": 4.2,
        "comparator_value": 4.0,
        "bound": 0.9,
        "p": 0.01,
        "reliability": "paired; false alarm ~1%",
        "n": 50,
    }
    assert rows[1]["verdict"] == "error" and rows[1]["passed"] is None and rows[1]["method"] is None
    assert history_path("off", tmp_path) is None and history_path("OFF ", tmp_path) is None
    assert history_path(None, tmp_path) == tmp_path / "history.sqlite"
    assert domain_hash({"q1": "a", "q2": "b"}) == domain_hash({"q2": "b", "q1": "a"}) != domain_hash({"q1": "a"})


def test_runs_append_and_read_back_with_filters(tmp_path: Path) -> None:
    db = tmp_path / "deep" / "history.sqlite"
    for i, release in enumerate((None, "v1", "v1")):
        entry = json.loads(json.dumps(ENTRY))
        entry["row"]["methods"][0]["target"] = 4.0 + i
        assert (
            append(
                db,
                gate_rows([entry, BROKEN]),
                run=f"r{i}",
                created=f"2026-11-2{i}T00:00:00+00:00",
                git_commit="0123456789abcdef",
                target="tgt",
                release=release,
            )
            is None
        )
    everything = read(db)
    assert len(everything) == 6 and list(everything[0]) == list(COLUMNS)
    assert [r["target_value"] for r in read(db, gate="bias_equivalent")] == [4.0, 5.0, 6.0]
    assert [r["run"] for r in read(db, domain="dims", last=2)] == ["r1", "r2"]
    assert read(db, gate="bias_stance") == [] and read(tmp_path / "none.sqlite") == []
    table = render(read(db, gate="bias_equivalent"))
    assert table.splitlines()[0].split()[:4] == ["created", "test", "method", "verdict"]
    assert "0123456789ab\n" in table and "0123456789abcdef" not in table  # the commit, shortened
    parsed = list(csv.DictReader(io.StringIO(render(read(db), "csv"))))
    assert len(parsed) == 6 and parsed[0]["release"] == ""
    assert json.loads(render(read(db, last=1), "json"))[0]["release"] == "v1"
    out = io.StringIO()
    assert main(["history", "--db", str(db), "--gate", "bias_equivalent", "--last", "1", "--format", "json"], out) == 0
    assert [r["run"] for r in json.loads(out.getvalue())] == ["r2"]


def test_a_history_that_cannot_be_written_warns_and_changes_nothing(tmp_path: Path) -> None:
    corrupt = tmp_path / "history.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    warning = append(corrupt, gate_rows([ENTRY]), run="r", created="2026", git_commit=None, target="t", release=None)
    assert warning is not None and "was not updated" in warning and "this run's verdicts stand" in warning
    locked = tmp_path / "locked.sqlite"
    append(locked, gate_rows([ENTRY]), run="r0", created="2026", git_commit=None, target="t", release=None)
    holder = sqlite3.connect(locked, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        warning = append(
            locked, gate_rows([ENTRY]), run="r1", created="2026", git_commit=None, target="t", release=None, timeout=0.1
        )
    finally:
        holder.rollback()
        holder.close()
    assert warning is not None and "locked" in warning
    assert [r["run"] for r in read(locked)] == ["r0"]
    assert main(["history", "--db", str(corrupt)], io.StringIO()) == 3
    assert main(["history", "--db", str(tmp_path / "missing.sqlite")], io.StringIO()) == 3
