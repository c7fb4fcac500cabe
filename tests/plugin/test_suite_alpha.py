"""One false-alarm rate for the session (``--llmbias-suite-alpha``), end to end, offline: the gates
that can be set to a level share it by Bonferroni, on every pytest-xdist worker alike, and the
summary, the JSON document and each gate's report say so."""

from __future__ import annotations

import json

import pytest

GATES = """
import pytest


@pytest.mark.bias_impact_ratio("lands")
def test_significant(bias_result):
    assert bias_result.alpha == 0.025


@pytest.mark.bias_impact_ratio("lands", fail_on="interval")
def test_interval(bias_result):
    assert bias_result.confidence == 0.975


@pytest.mark.bias_impact_ratio("lands", fail_on="estimate")
def test_estimate(bias_result):
    assert bias_result.alpha == 0.05
"""

OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")


def test_the_gates_share_one_rate(pytester: pytest.Pytester, lands_project, run_pytest):
    lands_project()
    pytester.makepyfile(GATES)
    result = run_pytest(*OFFLINE, "--llmbias-suite-alpha", "0.05", "--llmbias-json=run.json", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["llmbias: 3 gates at *: a good release fails some gate with probability up to *; "
                                 "--llmbias-suite-alpha 0.05 is shared by Bonferroni: 2 gate(s) at 0.025 each, "
                                 "1 keep their own rate (none they can be set to)*"])
    suite = json.loads((pytester.path / "run.json").read_text(encoding="utf-8"))["suite"]
    assert suite["alpha"] == 0.05 and suite["method"] == "bonferroni"
    assert sorted(suite["levels"].values(), key=str) == [0.025, 0.025, None]


def test_without_it_each_gate_keeps_its_own(pytester: pytest.Pytester, lands_project, run_pytest_once):
    lands_project()
    pytester.makepyfile(GATES.replace("== 0.025", "== 0.05").replace("== 0.975", "== 0.95"))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["llmbias: 3 gates at *: a good release fails some gate with probability up to *"])
    assert "--llmbias-suite-alpha" not in result.stdout.str()
    bad = run_pytest_once(*OFFLINE, "--llmbias-suite-alpha", "0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*suite.alpha must lie strictly between 0 and 1, got 0*"])
