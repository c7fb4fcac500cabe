"""The run's JSON document (``--llmbias-json``), its schema and hooks, and the GitHub step summary."""

from __future__ import annotations

import json

import pytest

from tests.plugin._data import INDEX_ROSTER

OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")

GATES = """
import pytest


@pytest.mark.bias_index("dims")
def test_passes(bias_result):
    pass


@pytest.mark.bias_index("dims", categories=["speech", "work"], max_index=0.1, relative=False)
def test_fails(bias_result):
    pass


@pytest.mark.xfail(strict=True)
@pytest.mark.bias_index("dims", max_index=0.1)
def test_expected_to_fail(bias_result):
    pass
"""

CONFTEST = """
def pytest_llmbias_json_generate(config, gate):
    gate["team"] = "fairness"


def pytest_llmbias_json_update(config, document):
    document["pipeline"] = {"build": 42}
"""

SECRET_ROSTER = INDEX_ROSTER.replace(
    "target: {model: openai/tgt, alias: tgt}",
    "target: {model: openai/tgt, alias: tgt, api_key_env: REPORT_KEY, params: {extra_headers: {X-Api-Key: "
    "hdr-SECRET-4242}}}",
)


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist"])
def test_the_json_document_matches_its_schema_and_holds_every_gate(
    pytester: pytest.Pytester, dims_project, run_pytest_once, monkeypatch: pytest.MonkeyPatch, xdist: bool
):
    import jsonschema

    from pytest_llmbias.report.json_report import schema

    monkeypatch.setenv("REPORT_KEY", "sk-REPORT-SECRET-77")
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    dims_project(roster=SECRET_ROSTER)
    pytester.makepyfile(GATES)
    pytester.makeconftest(CONFTEST)
    result = run_pytest_once(*OFFLINE, "--llmbias-json=out/run.json", *(("-n", "2") if xdist else ()))
    result.assert_outcomes(passed=1, failed=1, xfailed=1)
    result.stdout.fnmatch_lines(
        [f"*llmbias: the run's JSON document is written to {pytester.path / 'out' / 'run.json'}*"]
    )

    text = (pytester.path / "out" / "run.json").read_text()
    assert "sk-REPORT-SECRET-77" not in text and "hdr-SECRET-4242" not in text
    doc = json.loads(text)
    jsonschema.validate(doc, schema())
    assert doc["schema_version"] == 1 and doc["pipeline"] == {"build": 42}
    assert doc["roster"]["target"]["params"] == {"extra_headers": {"X-Api-Key": "***"}}
    assert doc["plan"]["calls"] == 96 and doc["plan"]["from_store"] == 96 and doc["plan"]["fetched"] == 0
    outcomes = {g["test"].split("::")[-1]: (g["outcome"], g["passed"], g["verdict"]) for g in doc["gates"]}
    assert outcomes == {
        "test_passes": ("passed", True, "no-worse"),
        "test_fails": ("failed", False, "above bound"),
        "test_expected_to_fail": ("xfailed", False, "above bound"),
    }
    # each gate's calls, built where it ran (a worker's under pytest-xdist): every answer from the snapshot
    usage = {g["test"].split("::")[-1]: g["usage"] for g in doc["gates"]}
    assert usage["test_passes"] == {
        "calls": 96,
        "fetched": 0,
        "from_store": 96,
        "failed": 0,
        "tokens": 0,
        "cost_usd": 0.0,
    }
    assert usage["test_fails"]["calls"] == usage["test_fails"]["from_store"] == 16  # the target's, two categories
    first = next(g for g in doc["gates"] if g["test"].endswith("test_passes"))
    assert first["team"] == "fairness" and first["gate"] == "bias_index"
    per_prompt = first["result"]["relative"]["scores"]
    assert set(per_prompt) == {"tgt", "b1", "b2", "b3"} and len(per_prompt["tgt"]) == 24
    # the result's table(), the data of to_frame(): one row per model and prompt
    assert first["table"]["columns"] == ["model", "role", "prompt", "dimension", "prompt_index", "B", "index"]
    assert len(first["table"]["rows"]) == 4 * 24
    assert {(r[0], r[2]): r[4] for r in first["table"]["rows"]} == {
        (a, p): v for a, by_prompt in per_prompt.items() for p, v in by_prompt.items()
    }
    assert "bias_index on 'dims'" in first["report"]

    from pytest_llmbias.cli.command import main

    assert main(["report", str(pytester.path / "out" / "run.json")]) == 0  # the saved run, re-rendered
    assert first["row"]["methods"][0]["method"] == "index (relative)"

    markdown = summary.read_text()
    assert markdown.startswith("## pytest-llmbias") and markdown.count("\n### ") == 3  # one section per gate
    assert (
        "**no\\-worse**" in markdown
        and "3 gates in 4 rows (one a check): 1 passed, 1 failed, 1 xfailed (failed as expected)." in markdown
    )


def test_a_broken_document_fails_the_schema():
    import jsonschema

    from pytest_llmbias.report.json_report import document, plan_figures, schema

    doc = document(
        settings={"target": None, "baselines": [], "judge": None}, plan=plan_figures([], {}), gates=[], version="1"
    )
    jsonschema.validate(doc, schema())
    entry = {
        "test": "t",
        "gate": "bias_length",
        "domain": "d",
        "outcome": "passed",
        "passed": True,
        "verdict": "x",
        "result": {},
    }
    doc["gates"] = [entry]
    jsonschema.validate(doc, schema())  # a gate a conftest added is a gate too
    for broken in ({"gate": "bias length"}, {"outcome": "sideways"}, {"passed": "yes"}):
        doc["gates"] = [{**entry, **broken}]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, schema())


def test_without_matplotlib_the_run_warns_once_naming_the_extra(
    pytester: pytest.Pytester, dims_project, run_pytest_once
):
    """The HTML report without its plotting library: the page says so at its top, and the run
    says it once, as an ``llmbias:`` line, not as a warning placed in one of the plugin's modules."""
    dims_project()
    pytester.makepyfile(GATES.split('@pytest.mark.bias_index("dims", categories')[0])
    # how Python marks a package as not importable
    pytester.makeconftest("import sys\n\nsys.modules['matplotlib'] = None\n")
    result = run_pytest_once(*OFFLINE, "--llmbias-html=out/report.html")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    line = (
        "llmbias: warning: HTML report: the plots are missing: matplotlib is not installed "
        "(pip install 'pytest-llmbias[html]')"
    )
    assert out.count(line) == 1 and out.count("matplotlib is not installed") == 1, out
    assert "run_record.py" not in out and "LLMBiasWarning: HTML report" not in out
    page = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    assert "Note: the plots are missing" in page and "<svg" not in page
