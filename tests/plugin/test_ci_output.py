"""What a CI pipeline reads of a run: GitHub's workflow commands (one ``::error`` per failing gate,
one ``::warning`` per underpowered pass, at the test's file and line) and JUnit XML that validates
under pytest's default ``xunit2`` family (pytest's own schema, tests/plugin/junit-10.xsd), with the
run's properties on the test suite."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.plugin._data import loaded_on

OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
SCHEMA = Path(__file__).with_name("junit-10.xsd")

# the target's index is about 1.50, its 95% interval about [1.36, 1.64] over 24 prompts: a bound of
# 5.0 is shown kept, 1.55 is not shown broken (underpowered), 0.4 is shown broken
GATES = """
import pytest


@pytest.mark.bias_index("dims", relative=False, max_index=5.0)
def test_far(bias_result):
    pass


@pytest.mark.bias_index("dims", relative=False, max_index=1.55)
def test_near(bias_result):
    pass


@pytest.mark.bias_index("dims", relative=False, max_index=0.4)
def test_broken(bias_result):
    pass
"""


@pytest.fixture
def three_gates(pytester: pytest.Pytester, dims_project) -> None:
    dims_project(loaded_on("work"), roster="target: {model: openai/tgt, alias: tgt}\n")
    pytester.makepyfile(test_gates=GATES)


def _line(pytester: pytest.Pytester, test: str) -> int:
    """The 1-based line of the test's marker in test_gates.py (the line pytest reports for a
    decorated test: the gate's own line)."""
    lines = (pytester.path / "test_gates.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(f"def {test}(")) - 1


def _annotations(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("::")]


def test_github_gets_an_error_per_failing_gate_and_a_warning_per_underpowered_one(
    pytester: pytest.Pytester, three_gates, run_pytest_once, monkeypatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(passed=2, failed=1)
    error, warning = _annotations(result)
    broken, near = _line(pytester, "test_broken"), _line(pytester, "test_near")
    # in a property GitHub's ':' is written %3A (its toolkit's escaping)
    assert error.startswith(f"::error file=test_gates.py,line={broken},title=llmbias bias_index%3A above bound::")
    assert error.endswith(
        "::test_broken: bias_index dims: above bound; index (absolute): above bound, target 1.496, bound 0.4"
    )
    assert warning.startswith(
        f"::warning file=test_gates.py,line={near},title=llmbias bias_index%3A not shown biased (underpowered)::"
    )


def test_no_annotation_outside_github_actions(pytester: pytest.Pytester, three_gates, run_pytest_once, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(passed=2, failed=1)
    assert _annotations(result) == []


def test_strict_makes_the_underpowered_warning_an_error(
    pytester: pytest.Pytester, three_gates, run_pytest_once, monkeypatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = run_pytest_once(*OFFLINE, "--llmbias-strict")
    result.assert_outcomes(passed=1, failed=2)
    lines = [f"line={_line(pytester, t)}" for t in ("test_broken", "test_near")]
    assert [a.split(",")[1] for a in _annotations(result)] == lines
    assert all(a.startswith("::error ") for a in _annotations(result))


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_the_junit_xml_is_valid_xunit2_with_the_run_s_properties(
    pytester: pytest.Pytester, three_gates, run_pytest_once, monkeypatch, workers
) -> None:
    import xmlschema

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = run_pytest_once(*OFFLINE, "--junitxml=junit.xml", *workers)
    result.assert_outcomes(passed=2, failed=1)
    # the controller annotates, once, with the workers' tests' lines
    lines = [f"line={_line(pytester, t)}" for t in ("test_broken", "test_near")]
    assert [a.split(",")[1] for a in _annotations(result)] == lines
    path = pytester.path / "junit.xml"
    xmlschema.XMLSchema(str(SCHEMA)).validate(str(path))  # raises when invalid
    root = ET.parse(path).getroot()
    assert root.find(".//testcase/properties") is None  # xunit2 has none
    suite = [(p.get("name"), p.get("value")) for p in root.find(".//testsuite/properties")]
    named = dict(suite)
    assert named["llmbias.target"] == "tgt" and named["llmbias.verdict"] == "failed"
    assert named["llmbias.suite.alpha"] == "0.05" and named["llmbias.plugin_version"]
    assert named["llmbias.comparator"] == "baselines "  # no baselines: the absolute bound only
    rows = [json.loads(v) for k, v in suite if k == "llmbias"]
    assert sorted(r["test"].split("::")[1] for r in rows) == ["test_broken", "test_far", "test_near"]


def test_xunit1_keeps_each_gate_s_row_on_its_test_case(pytester: pytest.Pytester, three_gates, run_pytest_once):
    run_pytest_once(*OFFLINE, "--junitxml=junit.xml", "-o", "junit_family=xunit1").assert_outcomes(passed=2, failed=1)
    root = ET.parse(pytester.path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    row = json.loads(cases["test_broken"].find("properties/property").get("value"))
    assert row["methods"][0]["verdict"] == "above bound"
    assert [p.get("name") for p in root.find(".//testsuite/properties")].count("llmbias") == 0
