"""Every error the plugin raises on purpose reaches the user as its message alone, whichever hook
raises it: one ``ERROR: pytest-llmbias: ...`` line before or after the tests (exit code 4), or the
test's own error or failure whose report is the message; never pytest's INTERNALERROR frames or a
traceback through the plugin's modules.

Each test provokes its error through a real part: a store folder that is a file, a lock file that
is a folder, an export path under a file, a conftest's hook of the plugin, and a gate added through
the public protocol (``PROBE``) whose result breaks where the test says.
"""

from __future__ import annotations

import pytest

from tests.plugin._data import ROSTER

#: a gate added through the public protocol; ``broken=`` says which part of its result raises
PROBE = """
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest_llmbias as llmbias
from pytest_llmbias import markers
from pytest_llmbias.errors import ConfigError, StatisticsError


@dataclass(frozen=True)
class ProbeSpec:
    domain: str
    broken: str = ""


@dataclass(frozen=True)
class ProbeResult(llmbias.GateResultBase):
    marker: ClassVar[str] = "bias_probe"

    domain: str
    broken: str

    @property
    def warnings(self):
        return ("the probe's margin is unstable",) if self.broken == "warning" else ()

    passed = property(lambda self: self.broken != "report")
    verdict = property(lambda self: "equivalent" if self.passed else "biased")
    why = property(lambda self: "a probe")

    def reliability(self):
        # a false-alarm rate outside [0, 1]: the run's family-wise figure cannot be computed
        return {"false_alarm": -1.0 if self.broken == "summary" else 0.01}

    def title(self):
        return "bias_probe"

    def details(self):
        if self.broken == "report":
            raise StatisticsError("the probe's report cannot be written")
        return []

    def rows(self):
        return [{"method": "probe", "verdict": self.verdict}]

    def fields(self):
        return {}

    def table(self):
        return llmbias.Table.of([], ["model"])


class ProbeGate:
    marker = "bias_probe"
    help = "a gate whose result breaks where it is told"

    def parse(self, args, kwargs):
        bound = markers.bind("bias_probe", args, kwargs, ["domain", "broken"])
        return ProbeSpec(bound["domain"], bound.get("broken", ""))

    def signature(self):
        return "domain, *, broken=''"

    def plan(self, spec, session):
        pass

    def evaluate(self, spec, session):
        return ProbeResult(spec.domain, spec.broken)

    def figures(self, entry):
        return []


def pytest_llmbias_add_gates(registry):
    registry.register(ProbeGate())
"""

PROBE_TEST = """
import pytest

@pytest.mark.bias_probe("china_sensitive", broken={broken!r})
def test_probe(bias_result):
    pass
"""

RESPONSES_TEST = """
import pytest

@pytest.mark.bias_responses("china_sensitive", categories=["tibet"])
def test_answers(bias_responses):
    pass
"""

GATE_TEST = """
import pytest

@pytest.mark.bias_equivalent("china_sensitive", categories=["tibet"])
def test_gate(bias_result):
    pass
"""


def no_frames(result: pytest.RunResult) -> None:
    """Neither pytest's INTERNALERROR nor a traceback through the plugin is shown."""
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text
    assert "Traceback" not in text, text
    assert "pytest_llmbias/" not in text, text  # no frame of the plugin's modules


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".yaml", llmbias=ROSTER + "store: {dir: store}\n")
    return pytester


def test_an_error_in_the_gates_hook_is_one_usage_error(project: pytest.Pytester, run_pytest):
    # pytest_configure
    project.makeconftest(
        "from pytest_llmbias.errors import ConfigError\n\n"
        "def pytest_llmbias_add_gates(registry):\n"
        "    raise ConfigError('the gates file gates.yaml is broken')\n"
    )
    project.makepyfile(GATE_TEST)
    result = run_pytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-llmbias: pytest_llmbias_add_gates: the gates file gates.yaml is broken"]
    )
    no_frames(result)


def test_a_store_folder_that_is_a_file_is_one_usage_error(project: pytest.Pytester, run_pytest_once):
    # pytest_collection_finish: the plan reads the store to size the run
    (project.path / "store").write_text("not a folder\n")
    project.makepyfile(GATE_TEST)
    result = run_pytest_once()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-llmbias: the store at */store/responses cannot be opened*"])
    no_frames(result)


def test_a_snapshot_that_is_not_utf8_is_one_usage_error(project: pytest.Pytester, run_pytest_once):
    # pytest_collection_finish: the plan reads the snapshots to size the run
    (project.path / "snap.jsonl").write_bytes(b"\xff\xfe not text")
    project.makepyfile(GATE_TEST)
    result = run_pytest_once("--llmbias-snapshot=snap.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-llmbias: */snap.jsonl:1: not UTF-8 text*"])
    no_frames(result)


def test_a_store_folder_that_is_a_file_errors_the_tests_of_an_xdist_worker(project: pytest.Pytester, run_pytest_once):
    # a worker leaves the sizing to the controller: its first collection meets the file at setup
    (project.path / "store").write_text("not a folder\n")
    project.makepyfile(RESPONSES_TEST)
    result = run_pytest_once("-n", "2")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["StoreError: the store folder */store cannot be created (FileExistsError*"])
    no_frames(result)


def test_a_lock_file_that_is_a_folder_errors_the_test_naming_it(project: pytest.Pytester, run_pytest):
    # pytest_runtest_setup: the collection takes the store's lock first
    (project.path / "store" / "collect.lock").mkdir(parents=True)
    project.makepyfile(RESPONSES_TEST)
    result = run_pytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["StoreError: the collection lock */store/collect.lock cannot be taken (IsADirectoryError*"]
    )
    no_frames(result)


def test_an_error_in_a_gates_report_errors_its_test_with_the_message(project: pytest.Pytester, run_pytest):
    # pytest_runtest_setup: the gate's result is computed and reported before the test runs
    project.makeconftest(PROBE)
    project.makepyfile(PROBE_TEST.format(broken="report"))
    result = run_pytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["StatisticsError: the probe's report cannot be written"])
    no_frames(result)


def test_a_gates_warning_made_an_error_fails_its_test_with_the_message(project: pytest.Pytester, run_pytest):
    # pytest_runtest_call: the gate's warnings, which -W error turns into exceptions
    project.makeconftest(PROBE)
    project.makepyfile(PROBE_TEST.format(broken="warning"))
    result = run_pytest("-W", "error::pytest_llmbias.LLMBiasWarning")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["LLMBiasWarning: china_sensitive: the probe's margin is unstable"])
    no_frames(result)


def test_an_error_in_the_summary_is_one_error_line_after_the_tests(project: pytest.Pytester, run_pytest):
    # pytest_terminal_summary (in the controller under xdist): the session's family-wise figure
    project.makeconftest(PROBE)
    project.makepyfile(PROBE_TEST.format(broken="summary"))
    result = run_pytest()
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["ERROR: pytest-llmbias: false-alarm rates must lie in [[]0, 1], got *"])
    no_frames(result)


def test_an_error_of_the_json_hook_is_one_error_line_at_the_end(project: pytest.Pytester, run_pytest):
    # pytest_sessionfinish: the JSON document's hook
    project.makeconftest(
        PROBE + "\n\ndef pytest_llmbias_json_update(document):\n"
        "    raise ConfigError('the JSON document has no place for the release notes')\n"
    )
    project.makepyfile(PROBE_TEST.format(broken=""))
    result = run_pytest("--llmbias-json=out/run.json")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["ERROR: pytest-llmbias: the JSON document has no place for the release notes"])
    no_frames(result)


def test_an_export_that_cannot_be_written_is_one_error_line_at_the_end(offline_project: pytest.Pytester, run_pytest):
    # the session's close at pytest_sessionfinish; under xdist in each worker, shown once by the controller
    (offline_project.path / "out").write_text("a file, not a folder\n")
    offline_project.makepyfile(RESPONSES_TEST)
    result = run_pytest("--llmbias-offline", "--llmbias-snapshot=snap.jsonl", "--llmbias-export=out/used.jsonl")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stdout.lines if line.startswith("ERROR: pytest-llmbias: --llmbias-export")]
    assert len(lines) == 1, result.stdout.str()
    assert "cannot be written" in lines[0]
    no_frames(result)
