"""Credentials never leave the process: an API key from the environment, a credential header in
``params.extra_headers`` and a ``user:password@`` in an ``api_base`` are searched for in everything a
run writes (the terminal with ``-l --tb=long`` and debug logs, the JUnit XML, the store, the exported
snapshot), after a success, a provider 401 whose body echoes the request's headers, a timeout and a
refused connection. Each run makes a direct fixture call and a marked test's calls (the fingerprint
probes first: a failure reaches the run through them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration._data import KEY_ENV, QUIET
from tests.openai_server import OpenAIServer

ENV_KEY = "sk-ENVKEY-8a7f6e5d4c"
HEADER_KEY = "hdr-TOKEN-1b2c3d4e5f"
URL_PASSWORD = "urlPASS-9z8y7x"
SECRETS = (ENV_KEY, HEADER_KEY, URL_PASSWORD)
MODEL = "secret-model"

INNER_TEST = """
import pytest


def test_direct(llm_target):
    assert llm_target.ask("Say hello.")


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models="target")
def test_marked(bias_responses):
    assert len(bias_responses) == 10
"""


def write_project(pytester: pytest.Pytester, api_base: str, timeout: float, transport: str) -> None:
    config = {
        "target": {
            "model": f"openai/{MODEL}",
            "alias": "tgt",
            "api_base": api_base,
            "api_key_env": KEY_ENV,
            "params": {"extra_headers": {"X-Api-Key": HEADER_KEY, "X-Trace": "visible-trace"}},
            "transport": transport,
        },
        "collection": {"retries": 0, "timeout": timeout},
        "store": {"export": "out.jsonl"},
    }
    pytester.path.joinpath("llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    pytester.path.joinpath("test_inner.py").write_text(INNER_TEST, encoding="utf-8")


def with_password(base_url: str) -> str:
    return base_url.replace("http://", f"http://probe:{URL_PASSWORD}@")


def written_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.suffix != ".py" and p.name != "llmbias.yaml"]


SCENARIOS = {
    "success": {},
    "401-echo": {"status": 401, "echo_headers": True},
    "timeout": {"delay": 3.0},
    "refused": None,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_no_credential_in_any_output(pytester: pytest.Pytester, monkeypatch, scenario: str, transport: str) -> None:
    monkeypatch.setenv(KEY_ENV, ENV_KEY)
    # litellm's default aiohttp transport refuses a URL with user info beside an Authorization
    # header; httpx sends it (as basic auth), so the success path can carry all three credentials.
    monkeypatch.setenv("DISABLE_AIOHTTP_TRANSPORT", "True")
    with OpenAIServer(latency=0.0) as server:
        step = SCENARIOS[scenario]
        if step:
            server.script(MODEL, *[step] * 11)
        base = with_password(server.base_url if step is not None else "http://127.0.0.1:9/v1")
        write_project(pytester, base, timeout=1.0, transport=transport)
        result = pytester.runpytest_subprocess(
            *QUIET,
            "-l",
            "--tb=long",
            "-rA",
            "--log-level=DEBUG",
            "--log-cli-level=DEBUG",
            "--junitxml=junit.xml",
            timeout=120,
        )
        requests = server.requests

    terminal = "\n".join(result.outlines + result.errlines)
    if scenario == "success":
        result.assert_outcomes(passed=2)
        # the credentials were sent, to the server only
        assert all({k.lower(): v for k, v in r["headers"].items()}.get("x-api-key") == HEADER_KEY for r in requests)
        # the 11 calls and the 3 fingerprint probes (asked once: a new model adopts its first ask),
        # which carry the credentials too and whose answers and fingerprint history the store keeps
        assert len(requests) == 14 and sum(r["params"].get("seed") == 20240917 for r in requests) == 3
    else:
        result.assert_outcomes(failed=1, errors=1)
        assert "ProviderError" in terminal
    if scenario == "401-echo":
        assert "HTTP 401" in terminal and "rejected request with headers" in terminal  # the echoed body, masked
    assert "***" in terminal or scenario in ("success", "refused", "timeout")

    files = written_files(pytester.path)
    assert any(p.name == "junit.xml" for p in files)
    assert any(p.name == "cache.db" for p in files) or scenario != "success"
    for secret in SECRETS:
        assert secret not in terminal, f"{secret} in the terminal output: " + "|".join(
            line[:300] for line in terminal.splitlines() if secret in line
        )
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path.relative_to(pytester.path)}"

    if scenario == "success":
        lines = [json.loads(line) for line in (pytester.path / "out.jsonl").read_text().splitlines()]
        # the 11 answers and the 3 answers of the fingerprint probes, labelled as such
        assert (
            len(lines) == 14
            and sum(line.get("labels", {}).get("domain") == "llmbias-fingerprint" for line in lines) == 3
        )
        for line in lines:
            # what identifies the call stays; the credential header and the URL password do not
            assert line["params"]["extra_headers"] == {"X-Trace": "visible-trace"}
            assert line["api_base"].startswith("http://127.0.0.1:")
