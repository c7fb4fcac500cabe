"""The MLflow run and the registry gate against a real ``mlflow server`` (tests/mlflow_server.py:
SQLite, artifacts in a temporary folder, basic auth, 127.0.0.1), read back through ``MlflowClient``:
params, metrics, artifacts, status, the model version's tags, the alias on a passing version and
never on a failing one, a nested run, one run under pytest-xdist, a refused credential and a server
killed mid-session (the verdicts stand; ``--llmbias-mlflow-strict`` fails the run).

The server takes up to a minute to start on a loaded machine: it starts once per test session, and
these tests share one pytest-xdist worker (``xdist_group``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("mlflow", reason="the tracking tests need the full mlflow package (the test extra)")

import mlflow  # noqa: E402  (imported before pytester's runs, which keep what is loaded already)
from mlflow.tracking import MlflowClient  # noqa: E402

from pytest_llmbias.config.settings_sources import resolve_settings  # noqa: E402
from pytest_llmbias.domains import load_domain  # noqa: E402
from pytest_llmbias.store.calls import ModelCall, Response  # noqa: E402
from pytest_llmbias.store.snapshot import write_snapshot  # noqa: E402
from tests.inline import QUIET  # noqa: E402
from tests.mlflow_server import MlflowServer  # noqa: E402
from tests.plugin._data import DIMS, loaded_on  # noqa: E402

pytestmark = pytest.mark.xdist_group("mlflow")

OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
# the target's index is about 1.50 over 24 prompts: shown within 5.0, shown above 0.4
PASSING = """
import pytest


@pytest.mark.bias_index("dims", relative=False, max_index=5.0)
def test_far(bias_result):
    pass
"""
FAILING = """
@pytest.mark.bias_index("dims", relative=False, max_index=0.4)
def test_broken(bias_result):
    pass
"""
KILLING = """
import os, signal


def test_the_server_goes_away():
    os.killpg(int(os.environ["LLMBIAS_TEST_MLFLOW_PID"]), signal.SIGKILL)  # the server and its workers
"""

_SERVER: list[MlflowServer] = []


@pytest.fixture(scope="session")
def _server_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mlflow")


@pytest.fixture
def server(request: pytest.FixtureRequest, _server_dir: Path, monkeypatch: pytest.MonkeyPatch) -> MlflowServer:
    """The session's MLflow server (started again if a test killed it), its client variables set."""
    if not _SERVER or _SERVER[0].process is None or _SERVER[0].process.poll() is not None:
        if _SERVER:
            _SERVER.pop().stop()
        started = MlflowServer(_server_dir / f"s{len(os.listdir(_server_dir))}").start()
        _SERVER.append(started)
        request.config.add_cleanup(started.stop)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    for name, value in _SERVER[0].environ().items():
        monkeypatch.setenv(name, value)
    return _SERVER[0]


@pytest.fixture
def client(server: MlflowServer) -> MlflowClient:
    return MlflowClient(tracking_uri=server.uri, registry_uri=server.uri)


@pytest.fixture
def project(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> Callable[..., None]:
    """``project(*tests)``: the dims domain, a target only, its answers loaded on work (snap.jsonl),
    the tests' sources in test_gates.py, and an experiment of this test's own."""
    experiment = request.node.name

    def make(*tests: str, extra: str = "") -> None:
        pytester.makefile(
            ".yaml",
            llmbias="target: {model: openai/tgt, alias: tgt}\ndomains: {paths: [domains]}\n"
            f"mlflow: {{experiment: '{experiment}', tags: {{team: fairness}}}}\n" + extra,
        )
        (pytester.path / "domains").mkdir(exist_ok=True)
        (pytester.path / "domains" / "dims.yaml").write_text(DIMS)
        settings = resolve_settings(config_path=pytester.path / "llmbias.yaml", environ={}, cwd=pytester.path)
        domain = load_domain("dims", settings.domains.paths)
        answer = loaded_on("work")
        write_snapshot(
            pytester.path / "snap.jsonl",
            [
                Response(call=ModelCall.build(spec, q.text, settings.generation), text=answer(spec.alias, q.id))
                for spec in settings.roster
                for q in domain.questions
            ],
        )
        pytester.makepyfile(test_gates="\n".join(tests))

    return make


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*QUIET, *OFFLINE, *args)


def runs_of(client: MlflowClient, experiment: str) -> list:
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id]) if found is not None else []


def model_version(client: MlflowClient, name: str, versions: int = 1) -> None:
    """A registered model ``name`` with ``versions`` versions, each belonging to a run of its own."""
    client.create_registered_model(name)
    experiment = client.create_experiment(f"{name}-training")
    for _ in range(versions):
        run_id = client.create_run(experiment).info.run_id
        client.create_model_version(name, f"runs:/{run_id}/model", run_id=run_id)


def the_line(result: pytest.RunResult) -> str:
    (line,) = [line for line in result.stdout.lines if "MLflow at " in line]
    return line


def test_a_passing_run_logs_everything_and_moves_the_alias(pytester, project, server, client, request) -> None:
    model_version(client, "approved-model")
    project(PASSING)
    result = run(pytester, "--llmbias-mlflow-model", "approved-model/1", "--llmbias-json=out/run.json")
    result.assert_outcomes(passed=1)
    line = the_line(result)
    assert line.startswith(f"llmbias: MLflow at {server.uri}: logged run ")
    assert line.endswith("; approved-model/1 tagged, alias 'bias-approved' moved to it")
    (logged,) = runs_of(client, request.node.name)
    run_id = logged.info.run_id
    assert logged.info.status == "FINISHED" and run_id in line
    params, metrics, tags = logged.data.params, logged.data.metrics, logged.data.tags
    assert params["llmbias.target.model"] == "openai/tgt" and params["llmbias.target.alias"] == "tgt"
    assert params["llmbias.comparator"] == "none" and params["llmbias.plugin_version"]
    assert not any("key" in k.lower() or "token" in k.lower() for k in params)  # no credential's name
    assert metrics["llmbias.gates"] == 1 and metrics["llmbias.gates_passed"] == 1 and metrics["llmbias.calls"] == 24
    assert metrics["llmbias.test_gates.test_far.index_absolute.margin"] == 5.0
    assert 1.3 < metrics["llmbias.test_gates.test_far.index_absolute.target"] < 1.7
    assert metrics["llmbias.test_gates.test_far.verdict"] == 1.0
    # the gate's own calls: the target's 24 answers, every one from the snapshot
    gate_usage = {f: metrics[f"llmbias.test_gates.test_far.{f}"] for f in ("calls", "from_store", "fetched")}
    assert gate_usage == {"calls": 24, "from_store": 24, "fetched": 0}
    for figure in ("failed_calls", "tokens", "cost_usd"):  # nothing failed, fetched or paid for
        assert metrics[f"llmbias.test_gates.test_far.{figure}"] == 0.0
    assert tags["llmbias.verdict"] == "passed" and tags["team"] == "fairness" and tags["llmbias.target"] == "tgt"
    assert [a.path for a in client.list_artifacts(run_id, "llmbias")] == ["llmbias/run.json"]
    version = client.get_model_version("approved-model", "1")
    assert version.tags["llmbias.verdict"] == "passed" and version.tags["llmbias.run_id"] == run_id
    assert version.tags["llmbias.gate.test_gates.test_far"] == "passed: within bound"
    assert version.tags["llmbias.report"] == f"{server.uri}/#/experiments/{logged.info.experiment_id}/runs/{run_id}"
    assert client.get_model_version_by_alias("approved-model", "bias-approved").version == "1"
    # the same session again: nothing logged twice, the registry as it was
    again = run(pytester, "--llmbias-mlflow-model", "approved-model/1", "--llmbias-json=out/run.json")
    again.assert_outcomes(passed=1)
    assert f"already logged as run {run_id}" in the_line(again)
    assert len(runs_of(client, request.node.name)) == 1


def test_a_failing_run_is_failed_and_never_moves_the_alias(pytester, project, server, client, request) -> None:
    model_version(client, "candidate", versions=2)
    project(PASSING)
    recorded = run(pytester, "--llmbias-mlflow-model", "candidate/1", "--llmbias-record-release", "v1")
    recorded.assert_outcomes(passed=1)
    first = next(r for r in runs_of(client, request.node.name))
    paths = [a.path for a in client.list_artifacts(first.info.run_id, "llmbias")]
    assert paths == ["llmbias/llmbias-run.json", "llmbias/manifest.json"]  # the release's manifest too
    project(PASSING, FAILING)
    result = run(pytester, "--llmbias-mlflow-model", "candidate/2")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # as without MLflow
    assert the_line(result).endswith("; candidate/2 tagged, alias 'bias-approved' not moved (a gate did not pass)")
    failed = next(r for r in runs_of(client, request.node.name) if r.data.tags["llmbias.verdict"] == "failed")
    assert failed.info.status == "FAILED"
    assert failed.data.metrics["llmbias.test_gates.test_broken.verdict"] == 0.0
    assert [a.path for a in client.list_artifacts(failed.info.run_id, "llmbias")] == ["llmbias/llmbias-run.json"]
    version = client.get_model_version("candidate", "2")
    assert version.tags["llmbias.verdict"] == "failed"
    assert version.tags["llmbias.gate.test_gates.test_broken"] == "failed: above bound"
    # the alias stays where the passing run put it
    assert client.get_model_version_by_alias("candidate", "bias-approved").version == "1"


def test_a_run_the_pipeline_opened_gets_the_session_nested(pytester, project, server, client, request) -> None:
    project(PASSING)
    mlflow.set_tracking_uri(server.uri)
    parent_experiment = client.create_experiment(f"{request.node.name}-pipeline")
    with mlflow.start_run(experiment_id=parent_experiment) as parent:
        run(pytester, "--llmbias-mlflow").assert_outcomes(passed=1)
    (child,) = runs_of(client, request.node.name)
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id


def test_under_xdist_the_controller_logs_one_run(pytester, project, server, client, request) -> None:
    project(PASSING, FAILING)
    result = run(pytester, "--llmbias-mlflow", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    (logged,) = runs_of(client, request.node.name)
    assert logged.data.metrics["llmbias.gates"] == 2 and logged.info.status == "FAILED"
    # each worker's gate counts the 24 answers both gates share
    for test in ("test_far", "test_broken"):
        assert logged.data.metrics[f"llmbias.test_gates.{test}.calls"] == 24
        assert logged.data.metrics[f"llmbias.test_gates.{test}.cost_usd"] == 0.0


@pytest.mark.parametrize("credential", ["password", "token"])
def test_a_refused_credential_is_one_line_and_the_verdicts_stand(
    pytester, project, server, monkeypatch, credential
) -> None:
    project(PASSING)
    if credential == "password":
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "not-the-password")
    else:
        monkeypatch.delenv("MLFLOW_TRACKING_USERNAME"), monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "not-a-token")
    result = run(pytester, "--llmbias-mlflow")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    line = the_line(result)
    assert line.startswith(f"llmbias: MLflow at {server.uri}: experiment failed (MlflowException ")
    assert line.endswith("; nothing was written; the verdicts stand")
    # a wrong password is refused as such; a bearer token the basic-auth server cannot read, after retries
    assert ("401" in line) == (credential == "password")
    assert "not-the-password" not in result.stdout.str() and "not-a-token" not in result.stdout.str()
    strict = run(pytester, "--llmbias-mlflow", "--llmbias-mlflow-strict")
    strict.assert_outcomes(passed=1)
    assert strict.ret == pytest.ExitCode.USAGE_ERROR
    strict.stdout.fnmatch_lines([f"ERROR: pytest-llmbias: MLflow at {server.uri}: experiment failed (*"])


def test_a_saved_run_is_logged_later_by_the_report_command(pytester, project, server, client, monkeypatch, request):
    import io

    from pytest_llmbias.cli.command import main

    model_version(client, "gated-later")
    project(PASSING)
    run(pytester, "--llmbias-json=run.json").assert_outcomes(passed=1)  # no MLflow in the test step
    assert runs_of(client, request.node.name) == []
    monkeypatch.chdir(pytester.path)
    out = io.StringIO()
    assert main(["report", "run.json", "--mlflow-model", "gated-later/1"], out=out) == 0
    assert out.getvalue().startswith(f"llmbias: MLflow at {server.uri}: logged run ")
    (logged,) = runs_of(client, request.node.name)
    assert [a.path for a in client.list_artifacts(logged.info.run_id, "llmbias")] == ["llmbias/run.json"]
    assert client.get_model_version_by_alias("gated-later", "bias-approved").version == "1"
    again = io.StringIO()
    assert main(["report", "run.json", "--mlflow"], out=again) == 0
    assert f"already logged as run {logged.info.run_id}" in again.getvalue()
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "wrong")
    refused = io.StringIO()
    assert main(["report", "run.json", "--mlflow"], out=refused) == 3
    assert "failed (MlflowException" in refused.getvalue()


def test_a_missing_model_version_says_what_was_written(pytester, project, server, client, request) -> None:
    project(PASSING)
    result = run(pytester, "--llmbias-mlflow-model", "no-such-model/1")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    line = the_line(result)
    assert line.startswith(f"llmbias: MLflow at {server.uri}: model version no-such-model/1 failed (")
    (logged,) = runs_of(client, request.node.name)
    assert line.endswith(
        f"; written: run, params, metrics, artifacts, status (run {logged.info.run_id}); the verdicts stand"
    )
    assert logged.info.status == "FINISHED"  # the run itself is whole


def test_a_server_killed_mid_session_is_said_and_the_verdicts_stand(
    pytester, project, server, monkeypatch, request
) -> None:
    # last of the module: the next test that needs the server starts it again
    project(PASSING, KILLING)
    monkeypatch.setenv("LLMBIAS_TEST_MLFLOW_PID", str(server.process.pid))
    result = run(pytester, "--llmbias-mlflow")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    line = the_line(result)
    assert line.startswith(f"llmbias: MLflow at {server.uri}: experiment failed (")
    assert line.endswith("; nothing was written; the verdicts stand")
