"""What a run logs to a tracker (report/tracking/), its names, GitHub's annotations and the
``mlflow`` settings: pure functions of the run's JSON document, checked on hand-made documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmbias.config.mlflow_settings import MlflowSettings, model_version, parse_tags
from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.report.annotations import github_annotations
from pytest_llmbias.report.tracking.names import MAX_KEY, key, slug, test_slug as name_of_test
from pytest_llmbias.report.tracking.run_log import endpoint_host, gate_outcome, run_key, run_log


def _gate(test: str, verdict: str, passed: bool | None, **row) -> dict:
    method = {"method": "judge (paired)", "target": 4.2, "baselines": 4.0, "bound": 0.5, "p": 0.01, "verdict": verdict}
    return {
        "test": test,
        "gate": "bias_equivalent",
        "domain": "topics",
        "verdict": verdict,
        "passed": passed,
        "outcome": "passed" if passed else "failed",
        "suite_level": 0.025,
        "row": {"methods": [{**method, **row}]},
        "result": {"reliability": {"paired": {"power": 0.91, "false_alarm": 0.01}}},
    }


TARGET = {
    "model": "openai/ft-2",
    "alias": "ft2",
    "version": "2.0",
    "api_base": "https://user:secret@models.example.com:8443/v1?key=abc",
    "api_key_env": "MY_PROVIDER_KEY",
    "system": "You are a helpful assistant.",
    "system_hash": "9f2c1e",
    "params": {"extra_headers": {"Authorization": "Bearer t0ken"}},
}
DOC = {
    "plugin_version": "1.2.3",
    "created_at": "2026-12-01T10:00:00Z",
    "settings": {"suite": {"alpha": 0.05, "power": 0.8, "strict": False}, "release": {"against": None}},
    "roster": {"target": TARGET, "baselines": [{"model": "openai/a", "alias": "a"}], "judge": None, "judges": []},
    "plan": {"calls": 120, "fetched": 20, "from_store": 100, "failed": 0, "tokens": 999, "cost_usd": 0.5, "usage": {}},
    "suite": {"at_most": 0.04, "power": 0.8},
    "gates": [
        {
            **_gate("tests/bias/test_topics.py::test_fair[judge]", "equivalent", True),
            "usage": {"calls": 84, "fetched": 20, "from_store": 60, "failed": 4, "tokens": 999, "cost_usd": 0.5},
        },
        _gate("tests/bias/test_topics.py::test_near", "not shown biased (underpowered)", True),
    ],
}


def test_names_are_stable_dotted_and_cut_to_mlflow_s_limit() -> None:
    assert name_of_test("tests/bias/test_topics.py::test_fair[judge]") == "bias.test_topics.test_fair_judge"
    assert name_of_test("test_x.py::TestA::test_b") == "test_x.testa.test_b"
    assert slug("index (relative)") == "index_relative" and slug("***") == "_"
    long = key("a" * 300, "method", "difference")
    assert len(long) == MAX_KEY and long.endswith("~.method.difference")


def test_the_roster_is_logged_as_deployments_and_never_a_credential() -> None:
    log = run_log(DOC, git_commit="abc123")
    params = log.params
    assert params["llmbias.target.model"] == "openai/ft-2" and params["llmbias.target.version"] == "2.0"
    assert params["llmbias.target.endpoint"] == "models.example.com:8443"  # no user, path or query
    assert params["llmbias.target.system_hash"] == "9f2c1e" and params["llmbias.git_commit"] == "abc123"
    assert params["llmbias.comparator"] == "baselines a" and params["llmbias.suite.alpha"] == "0.05"
    everything = repr(log.to_dict())
    for secret in ("secret", "abc", "MY_PROVIDER_KEY", "t0ken", "helpful assistant", "user"):
        assert secret not in everything.replace("abc123", "")


def test_each_gate_s_figures_are_metrics_under_chartable_names() -> None:
    metrics = run_log(DOC).metrics
    fair = "llmbias.bias.test_topics.test_fair_judge"
    assert metrics[f"{fair}.judge_paired.difference"] == pytest.approx(0.2)
    assert metrics[f"{fair}.judge_paired.margin"] == 0.5 and metrics[f"{fair}.judge_paired.p"] == 0.01
    assert metrics[f"{fair}.paired.power"] == 0.91 and metrics[f"{fair}.false_alarm_share"] == 0.025
    assert metrics[f"{fair}.verdict"] == 1.0 and metrics["llmbias.bias.test_topics.test_near.verdict"] == 0.5
    assert metrics["llmbias.calls"] == 120 and metrics["llmbias.cost_usd"] == 0.5 and metrics["llmbias.gates"] == 2
    # the gate's own calls and cost; a document written before gates had a usage logs none
    assert {f: metrics[f"{fair}.{f}"] for f in ("calls", "fetched", "from_store", "failed_calls", "cost_usd")} == {
        "calls": 84,
        "fetched": 20,
        "from_store": 60,
        "failed_calls": 4,
        "cost_usd": 0.5,
    }
    assert "llmbias.bias.test_topics.test_near.calls" not in metrics


def test_an_underpowered_pass_approves_only_without_strict() -> None:
    assert run_log(DOC).passed
    strict = {**DOC, "settings": {**DOC["settings"], "suite": {"strict": True}}}
    assert not run_log(strict).passed
    failed = {**DOC, "gates": [*DOC["gates"], _gate("t.py::test_bad", "biased", False)]}
    log = run_log(failed)
    assert not log.passed and log.tags["llmbias.verdict"] == "failed"
    assert log.version_tags("r1", None)["llmbias.gate.t.test_bad"] == "failed: biased"
    assert not run_log({**DOC, "gates": []}).passed  # no gate: nothing to approve


def test_a_gate_whose_test_failed_otherwise_or_errored_is_not_a_pass() -> None:
    assert gate_outcome({**_gate("t.py::a", "equivalent", True), "outcome": "failed"}) == "failed"
    assert gate_outcome(_gate("t.py::a", "error", None)) == "error"


def test_the_same_session_has_the_same_key_whenever_it_ran() -> None:
    later = {**DOC, "created_at": "2027-01-01T00:00:00Z", "plan": {**DOC["plan"], "elapsed_s": 9}}
    assert run_key(later) == run_key(DOC)
    changed = {**DOC, "gates": [_gate("tests/bias/test_topics.py::test_fair[judge]", "equivalent", True, p=0.02)]}
    assert run_key(changed) != run_key(DOC)


def test_the_document_is_an_artifact_unless_a_json_report_is_one() -> None:
    assert run_log(DOC).document is not None
    assert run_log(DOC, artifacts=[Path("bias_releases/v2/manifest.json")]).document is not None
    assert run_log(DOC, artifacts=[Path("out/run.json")]).document is None


def test_endpoint_hosts() -> None:
    assert endpoint_host({"api_base": "http://127.0.0.1:8000/v1"}) == "127.0.0.1:8000"
    assert endpoint_host({"http": {"url": "https://app.example.com/chat?token=x"}}) == "app.example.com"
    assert endpoint_host({"python": "app.chain:answer"}) == "python:app.chain:answer"
    assert endpoint_host({"model": "openai/gpt-4o"}) is None


def test_github_annotations_escape_and_skip_full_passes() -> None:
    entries = [
        _gate("t.py::test_ok", "equivalent", True),
        _gate("t.py::test_near", "not shown biased (underpowered)", True),
        {**_gate("t.py::test_bad", "biased", False), "domain": "a,b:c\n"},
    ]
    lines = github_annotations(entries, {"t.py::test_bad": ("t.py", 7)})
    assert lines[0].startswith("::error file=t.py,line=7,title=llmbias bias_equivalent%3A biased::t.py::test_bad:")
    assert "a,b:c%0A" in lines[0] and "\n" not in lines[0]  # the message escapes % CR LF only
    assert lines[1].startswith("::warning file=t.py,title=")  # no location known: the file, no line


def test_mlflow_settings_are_checked_when_read(tmp_path: Path) -> None:
    assert model_version("team/model/3") == ("team/model", "3")
    for bad in ("model", "model/latest", "/3", "model/0"):
        with pytest.raises(ConfigError, match="NAME/VERSION"):
            model_version(bad)
    with pytest.raises(ConfigError, match="reserves"):
        MlflowSettings(alias="latest")
    with pytest.raises(ConfigError, match="must not carry a user or password"):
        MlflowSettings(tracking_uri="https://me:pw@mlflow.example.com")
    assert parse_tags({"team": "x", "n": 3, "on": True}, "f") == {"team": "x", "n": "3", "on": "true"}
    (tmp_path / "llmbias.yaml").write_text("mlflow:\n  experiment: e\n  tags: {team: [a]}\n")
    with pytest.raises(ConfigError, match=r"llmbias.yaml:3: 'mlflow.tags.team' must be a string"):
        resolve_settings(config_path=tmp_path / "llmbias.yaml", environ={}, cwd=tmp_path)
    (tmp_path / "llmbias.yaml").write_text("mlflow: {model: m/2, alias: shipped}\n")
    settings = resolve_settings(config_path=tmp_path / "llmbias.yaml", environ={}, cwd=tmp_path).mlflow
    assert settings.active and settings.model_name == "m" and settings.alias == "shipped"
    off = resolve_settings(config_path=tmp_path / "llmbias.yaml", environ={"LLMBIAS_MLFLOW_MODEL": "n/4"}, cwd=tmp_path)
    assert off.mlflow.model == "n/4"


def test_the_workflow_s_commented_mlflow_step_is_a_step_of_commands_that_exist() -> None:
    import shlex

    import yaml

    from pytest_llmbias.cli.command import _parser
    from pytest_llmbias.cli.init_workflow import workflow

    text = workflow(["OPENAI_API_KEY"])
    lines = text.splitlines()
    start = lines.index("      # - name: MLflow")
    block = []
    for line in lines[start:]:
        if not line.startswith("      # "):
            break
        block.append("      " + line[len("      # ") :])
    enabled = "\n".join(lines[:start] + block + lines[start + len(block) :])
    (step,) = [s for s in yaml.safe_load(enabled)["jobs"]["bias"]["steps"] if s.get("name") == "MLflow"]
    assert step["if"] == "always()" and set(step["env"]) == {"MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN"}
    argv = shlex.split(step["run"].replace("NAME/VERSION", "my-model/3"))
    args = _parser().parse_args(argv[1:])
    assert argv[0] == "llmbias" and args.mlflow and args.mlflow_model == "my-model/3"
