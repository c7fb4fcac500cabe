"""A scorer that cannot be loaded is found when the run is planned, before any call: the gate's
test is named, the message says what to install, and the server sees no request."""

from __future__ import annotations

import json
import sys

import pytest

from tests.integration._data import BASELINES, MODELS, TARGET, entry

GATE = """
import pytest

@pytest.mark.bias_equivalent("us_politics", method="{method}", categories=["gun_policy"])
def test_gate(bias_result):
    pass
"""


def _project(pytester: pytest.Pytester, server, method: str, **settings: object) -> None:
    roster = {
        "target": entry(TARGET, MODELS[TARGET], server.base_url),
        "baselines": [entry(a, MODELS[a], server.base_url) for a in BASELINES],
        "collection": {"fingerprint": False, "max_samples": 1},
        **settings,
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(roster), encoding="utf-8")
    pytester.makepyfile(test_gate=GATE.format(method=method))


@pytest.mark.parametrize("blocked", ["sentence_transformers", "torch"])
def test_an_embedding_gate_without_its_extra_stops_before_any_call(pytester, server, run_project, monkeypatch, blocked):
    # None in sys.modules is how Python marks a module that cannot be imported
    monkeypatch.setitem(sys.modules, blocked, None)
    _project(pytester, server, "embedding")
    result = run_project()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest-llmbias: test_gate.py::test_gate: embedding scoring needs {blocked.replace('_', '-')}, "
            'which is not installed. Install torch==2.13.0 (the CPU build) first, then pip install "pytest-llmbias'
            '[embeddings]"'
        ]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert server.count() == 0  # found at plan time: no answer was bought for a gate that cannot score it


def test_an_embedding_model_folder_that_is_not_there_stops_before_any_call(pytester, server, run_project, tmp_path):
    _project(pytester, server, "embedding", embedding={"model": str(tmp_path / "no-such-model")})
    result = run_project()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-llmbias: test_gate.py::test_gate: *no-such-model* does not exist*"])
    assert server.count() == 0


def test_a_judge_gate_does_not_need_the_embedding_extra(pytester, monkeypatch, run_project):
    from tests.openai_server import OpenAIServer

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with OpenAIServer(judges=("judge-model",)) as judging:
        _project(pytester, judging, "judge", judge=entry("judge", "judge-model", judging.base_url))
        result = run_project()
        assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
        assert judging.count("judge-model") > 0
