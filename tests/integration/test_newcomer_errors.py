"""The errors a first run meets, each in one line that names the model, the endpoint and what to
check: nothing listening at the address (a real closed port), a key refused, a model not served."""

from __future__ import annotations

import socket

import pytest

from pytest_llmbias.clients.litellm_client import likely_cause
from pytest_llmbias.settings import ModelSpec

TEST = '''
import pytest

@pytest.mark.bias_responses("us_politics", categories=["gun_policy"], models="target")
def test_answers(bias_responses):
    pass
'''


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("transport", ["openai", "litellm"])
def test_a_target_nobody_serves_fails_in_one_line_with_the_likely_cause(pytester: pytest.Pytester, transport: str):
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    pytester.makefile(".yaml", llmbias=f"target: {{model: openai/nowhere, api_base: '{base}', transport: {transport}}}\n"
                                       "collection: {retries: 1, timeout: 5}\n")
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
    assert "provider's endpoint cannot be reached" in likely_cause(None, "Cannot connect to host", ModelSpec("openai/y", "y"))
