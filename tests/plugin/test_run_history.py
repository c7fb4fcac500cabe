"""Every run with a gate appends its figures to the run history, once per run (under
pytest-xdist, the controller alone), and a history that cannot be written never changes a verdict."""

from __future__ import annotations

import pytest

from pytest_llmbias.report.history import read

OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")

INDEX = """
import pytest


@pytest.mark.bias_index("dims")
def test_index(bias_result):
    pass


def test_plain():
    pass
"""


def test_each_run_appends_its_gates_once(pytester: pytest.Pytester, dims_project, run_pytest_once):
    dims_project()
    pytester.makepyfile(INDEX)
    run_pytest_once(*OFFLINE).assert_outcomes(passed=2)
    run_pytest_once(*OFFLINE, "-n", "2").assert_outcomes(passed=2)
    rows = read(pytester.path / ".llmbias" / "history.sqlite")
    assert len(rows) == 2 and len({r["run"] for r in rows}) == 2  # one row per run and gate method
    assert {r["gate"] for r in rows} == {"bias_index"} and all(r["verdict"] == "no-worse" for r in rows)
    assert all(r["target"] == "tgt" and r["n"] == 24 and r["domain_hash"] for r in rows)
    # the session's loaded domain (in-process) and the controller's reload (pytest-xdist) agree
    assert len({r["domain_hash"] for r in rows}) == 1
    run_pytest_once(*OFFLINE, "--llmbias-history", "off").assert_outcomes(passed=2)
    run_pytest_once(*OFFLINE, "--llmbias-history", "runs.sqlite").assert_outcomes(passed=2)
    assert len(read(pytester.path / ".llmbias" / "history.sqlite")) == 2
    assert len(read(pytester.path / "runs.sqlite")) == 1


def test_a_project_without_gates_writes_no_history(pytester: pytest.Pytester, run_pytest_once):
    pytester.makepyfile("def test_plain():\n    pass\n")
    run_pytest_once().assert_outcomes(passed=1)
    assert not (pytester.path / ".llmbias").exists()


def test_a_corrupt_history_warns_and_the_verdict_stands(pytester: pytest.Pytester, dims_project, run_pytest_once):
    dims_project()
    pytester.makepyfile(INDEX)
    (pytester.path / "runs.sqlite").write_bytes(b"not a database at all" * 50)
    result = run_pytest_once(*OFFLINE, "--llmbias-history", "runs.sqlite")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*llmbias: warning: the run history *runs.sqlite was not updated (DatabaseError: *); "
            "this run's verdicts stand*"
        ]
    )


def test_the_html_report_draws_the_trend_from_the_second_run(pytester: pytest.Pytester, dims_project, run_pytest_once):
    import json

    dims_project()
    pytester.makepyfile(INDEX)
    run_pytest_once(*OFFLINE, "--llmbias-html=one.html").assert_outcomes(passed=2)
    assert "over the last" not in (pytester.path / "one.html").read_text(encoding="utf-8")
    run_pytest_once(*OFFLINE, "--llmbias-html=two.html", "--llmbias-json=two.json").assert_outcomes(passed=2)
    page = (pytester.path / "two.html").read_text(encoding="utf-8")
    assert (
        'data-title="index (relative): over the last 2 runs"' in page
        and "verdicts, oldest first: no-worse, no-worse" in page
    )
    (gate,) = json.loads((pytester.path / "two.json").read_text(encoding="utf-8"))["gates"]
    assert len(gate["history"]) == 2 and gate["history"][-1]["verdict"] == "no-worse"
