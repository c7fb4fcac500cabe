"""``--llmbias-plan``'s second table: each gate's expected power, estimated from the baselines'
stored answers with each baseline in turn standing in for the target, or the reason it cannot be.
Offline, from snapshots of the fictional `lands` domain: the plan calls nothing either way."""

from __future__ import annotations

import re

import pytest

from tests.plugin._data import ROSTER

SNAPSHOT = ("--llmbias-snapshot=snap.jsonl",)

IMPACT = """
import pytest

@pytest.mark.bias_impact_ratio("lands")
def test_impact(bias_result):
    pass
"""

GATES = (
    IMPACT
    + """
@pytest.mark.bias_impact_ratio("lands", samples=2)
def test_two_samples(bias_result):
    pass

@pytest.mark.bias_index("bias_dimensions", categories=["gender"])
def test_index(bias_result):
    pass
"""
)


def row(result: pytest.RunResult, test: str) -> str:
    """The power table's line of ``test``."""
    return next(line for line in result.stdout.lines if f"::{test} " in line)


def test_the_plan_estimates_power_from_stored_baselines_or_says_why_not(
    pytester: pytest.Pytester, lands_project, run_pytest_once
) -> None:
    """The snapshot holds one answer of every model to each of the 24 `lands` prompts. With two
    baselines, each stands in for the target with the other as its baseline (2 stand-ins); a
    second sample of each is not stored (48 of the baselines' 96 answers are); and bias_index
    compares with at least 2 baselines, which a stand-in, with one, does not have."""
    lands_project()
    pytester.makepyfile(GATES)
    result = run_pytest_once(*SNAPSHOT, "--llmbias-offline", "--llmbias-plan")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "llmbias expected power (no call made; each baseline in turn as the target, the others as its baselines*",
            "  test*gate*expected power*stand-ins passed*est. false alarm*note",
        ]
    )
    assert re.search(r"bias_impact_ratio\s+\d+(\.\d)?%\s+2 of 2\s+\d+(\.\d)?%$", row(result, "test_impact"))
    assert row(result, "test_two_samples").endswith("baseline answers not all stored (48 of 96)")
    assert row(result, "test_index").endswith("needs 3 baselines for stand-in targets (2 configured)")
    result.stdout.no_fnmatch_line("*Traceback*")


def test_without_a_snapshot_or_a_second_baseline_the_plan_says_why(
    pytester: pytest.Pytester, lands_project, run_pytest_once
) -> None:
    """Two baselines x 24 prompts, none stored; then a roster of one baseline, which leaves a
    stand-in target no baseline."""
    lands_project()
    pytester.makepyfile(IMPACT)
    bare = run_pytest_once("--llmbias-offline", "--llmbias-plan")  # the snapshot is not named: nothing stored
    assert bare.ret == 0
    assert row(bare, "test_impact").endswith("baseline answers not all stored (0 of 48)")

    lands_project(roster=ROSTER.split("  - {model: openai/b2")[0])
    one = run_pytest_once(*SNAPSHOT, "--llmbias-offline", "--llmbias-plan")
    assert one.ret == 0
    assert row(one, "test_impact").endswith("needs 2 baselines (1 configured)")
