"""One false-alarm rate for the session (``--llmbias-suite-alpha``), end to end, offline: the gates
that can be set to a level share it by Holm's step-down (one look) or Bonferroni (several looks),
on every pytest-xdist worker alike, and the summary, the JSON document and each gate's report say so."""

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
    result.stdout.fnmatch_lines(
        [
            "llmbias: 3 gates at *: a good release fails some gate with probability up to *; "
            "--llmbias-suite-alpha 0.05 is shared by Holm's step-down: 2 gate(s) at 0.025 each, "
            "1 keep their own rate (none they can be set to)*"
        ]
    )
    doc = json.loads((pytester.path / "run.json").read_text(encoding="utf-8"))
    suite = doc["suite"]
    assert suite["alpha"] == 0.05 and suite["method"] == "holm"
    assert sorted(suite["levels"].values(), key=str) == [0.025, 0.025, None]
    assert sorted((g["suite_method"] for g in doc["gates"]), key=str) == [None, "holm", "holm"]


def test_a_shown_gate_leaves_and_a_sequential_one_keeps_its_bonferroni_share(
    pytester: pytest.Pytester, lands_project, run_pytest
) -> None:
    from tests.plugin.test_impact_ratio_gate import against

    lands_project(against("Dorvania"))
    pytester.makepyfile("""
import pytest


@pytest.mark.bias_impact_ratio("lands")
def test_shown(bias_result):
    pass


@pytest.mark.bias_impact_ratio("lands", looks=2)
def test_looks(bias_result):
    pass
""")
    result = run_pytest(*OFFLINE, "--llmbias-suite-alpha", "0.05", "--llmbias-json=run.json")
    result.assert_outcomes(failed=2)
    doc = json.loads((pytester.path / "run.json").read_text(encoding="utf-8"))
    assert doc["suite"]["sentence"].endswith(
        "--llmbias-suite-alpha 0.05 is shared by Holm's step-down: 1 gate(s) at "
        "0.025 each; by Bonferroni (several looks): 1 gate(s) at 0.025 each"
    )
    shares = {
        g["test"].split("::")[-1]: (g["suite_level"], g["suite_method"], g["result"]["alpha"]) for g in doc["gates"]
    }
    assert shares["test_shown"] == (0.025, "holm", 0.025)
    # the sequential gate spends its 0.025 over its looks: the last look's nominal level is below it
    assert shares["test_looks"][:2] == (0.025, "bonferroni") and 0.02 < shares["test_looks"][2] < 0.025


def test_without_it_each_gate_keeps_its_own(pytester: pytest.Pytester, lands_project, run_pytest_once):
    lands_project()
    pytester.makepyfile(GATES.replace("== 0.025", "== 0.05").replace("== 0.975", "== 0.95"))
    result = run_pytest_once(*OFFLINE, "--llmbias-suite-alpha", "off")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["llmbias: 3 gates: a good release fails any at most 100%; 1 underpowered verdict; *"])
    assert "--llmbias-suite-alpha" not in result.stdout.str()
    bad = run_pytest_once(*OFFLINE, "--llmbias-suite-alpha", "0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*a share in (0, 1), or off*"])


def test_the_run_s_looks_make_a_gate_sequential_and_a_test_has_one_gate(
    pytester: pytest.Pytester, lands_project, run_pytest_once
) -> None:
    lands_project()
    test = """
import pytest


@pytest.mark.bias_impact_ratio("lands")
def test_significant(bias_result):
    pass


@pytest.mark.bias_impact_ratio("lands", threshold=0.7)
def test_looser(bias_result):
    pass
"""
    pytester.makepyfile(test)
    result = run_pytest_once(
        *OFFLINE, "--llmbias-looks", "2", "--llmbias-suite-alpha", "0.05", "--llmbias-json=run.json"
    )
    result.assert_outcomes(passed=2)
    gates = json.loads((pytester.path / "run.json").read_text())["gates"]
    # the run's two looks make the impact-ratio gates sequential: Bonferroni, not Holm
    assert {(g["suite_method"], g["suite_level"]) for g in gates} == {("bonferroni", 0.025)}
    # a second gate marker on one test would go unheard (a test gives one verdict): a usage error
    pytester.makepyfile(
        test.replace(
            '@pytest.mark.bias_impact_ratio("lands", threshold=0.7)',
            '@pytest.mark.bias_equivalent("lands")\n@pytest.mark.bias_impact_ratio("lands")',
        )
    )
    two = run_pytest_once(*OFFLINE)
    assert two.ret == pytest.ExitCode.USAGE_ERROR
    two.stderr.fnmatch_lines(
        [
            "*::test_looser carries two gate markers (bias_equivalent and bias_impact_ratio): a test "
            "gives one verdict; give each gate a test of its own*"
        ]
    )
