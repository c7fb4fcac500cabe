"""The errors a first run meets, each in one line that names the model, the endpoint and what to
check: nothing listening at the address (a real closed port), a key refused, a model not served."""

from __future__ import annotations

import socket

import pytest

from pytest_llmbias.clients.litellm_client import likely_cause
from pytest_llmbias.config.settings import ModelSpec

TEST = """
import pytest

@pytest.mark.bias_responses("us_politics", categories=["gun_policy"], models="target")
def test_answers(bias_responses):
    pass
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("transport", ["openai", "litellm"])
def test_a_target_nobody_serves_fails_in_one_line_with_the_likely_cause(pytester: pytest.Pytester, transport: str):
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    pytester.makefile(
        ".yaml",
        llmbias=f"target: {{model: openai/nowhere, api_base: '{base}', transport: {transport}}}\n"
        "collection: {retries: 1, timeout: 5}\n",
    )
    pytester.makepyfile(TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(errors=1)
    # pytest's short summary repeats the failure message; the error report itself says it once
    report = result.stdout.str().split("short test summary info")[0].splitlines()
    lines = [line for line in report if "likely cause" in line]
    assert len(lines) == 1, result.stdout.str()[-2000:]
    assert f"model 'nowhere' (openai/nowhere at {base})" in lines[0]
    assert f"likely cause: nothing answers at {base}: is the server running" in lines[0]
    assert "Traceback" not in result.stdout.str()


def test_the_likely_causes_of_a_refused_key_and_an_unknown_model() -> None:
    spec = ModelSpec("openai/gpt-x", "x", api_base="http://127.0.0.1:8000/v1", api_key_env="MY_KEY")
    assert likely_cause(401, "Unauthorized", spec) == "the key was refused: check $MY_KEY"
    assert "does not serve the model 'openai/gpt-x'" in likely_cause(404, "model not found", spec)
    assert likely_cause(500, "boom", spec) is None and likely_cause(None, "timeout", spec) is None
    assert "provider's endpoint cannot be reached" in likely_cause(
        None, "Cannot connect to host", ModelSpec("openai/y", "y")
    )


@pytest.mark.parametrize(
    "status, cause",
    [
        (401, "likely cause: the key was refused: check $MY_KEY"),
        (404, "likely cause: the endpoint does not serve the model 'openai/gpt-x'"),
    ],
)
def test_a_refused_key_or_an_unknown_model_on_the_first_probe_reads_as_on_any_call(
    pytester: pytest.Pytester, server, monkeypatch, status, cause
):
    """The first call a run makes is a fingerprint probe: its failure names the model, its
    endpoint and the likely cause in the words any call's failure uses, once, and says it was a
    probe; turning fingerprints off is not offered as the fix (it would not be one). Every test
    of the run fails with it, and the probe is not asked again."""
    monkeypatch.setenv("MY_KEY", "sk-newcomer")
    for _ in range(4):
        server.script("gpt-x", {"status": status})
    pytester.makefile(
        ".yaml",
        llmbias=f"target: {{model: openai/gpt-x, alias: x, api_base: '{server.base_url}', "
        "api_key_env: MY_KEY, transport: openai}\ncollection: {retries: 0}\n",
    )
    pytester.makepyfile(TEST + TEST.replace("def test_answers", "def test_more_answers"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(errors=2)
    report = result.stdout.str().split("short test summary info")[0].splitlines()
    lines = [line for line in report if "likely cause" in line]
    assert len(lines) == 2 and lines[0] == lines[1], result.stdout.str()[-2000:]
    assert f"model 'x' (openai/gpt-x at {server.base_url}): HTTP {status}" in lines[0]
    assert cause in lines[0] and "fingerprint probe" in lines[0] and "--llmbias-no-fingerprint" not in lines[0]
    assert "Traceback" not in result.stdout.str() and "During handling" not in result.stdout.str()
    assert server.count() == 3  # the three probes, at once; nothing after
