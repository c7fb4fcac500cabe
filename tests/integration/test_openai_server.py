"""Fast tests of tests/openai_server.py, driven through the real litellm client.

Everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# Must be set BEFORE importing litellm, otherwise it fetches its model price
# list from the internet at import time.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import litellm  # noqa: E402
import pytest  # noqa: E402

from tests.openai_server import OpenAIServer  # noqa: E402

MODEL = "fake-model"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there world"}]


@pytest.fixture(scope="module")
def _server_instance():
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def server(_server_instance):
    _server_instance.reset()
    _server_instance.latency = 0.0
    yield _server_instance
    _server_instance.reset()
    _server_instance.latency = 0.0


def complete(server, model=MODEL, **kwargs):
    return litellm.completion(
        model=f"openai/{model}",
        api_base=server.base_url,
        api_key="sk-test",
        messages=kwargs.pop("messages", MESSAGES),
        max_retries=0,
        num_retries=0,
        **kwargs,
    )


def _get_json(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_default_completion_is_deterministic(server):
    resp = complete(server)
    assert resp.choices[0].message.content == f"{MODEL} answers: hello there world"
    assert resp.choices[0].finish_reason == "stop"
    # token counts are word counts: prompt = "be brief" + "hello there world"
    assert resp.usage.prompt_tokens == 5
    assert resp.usage.completion_tokens == 5
    assert resp.usage.total_tokens == 10

    resp = complete(server, seed=7, temperature=0.5)
    assert resp.choices[0].message.content == f"{MODEL} answers: hello there world [seed=7]"

    assert server.count() == 2
    req = server.requests[-1]
    assert req["model"] == MODEL
    assert req["messages"] == MESSAGES
    assert req["params"]["seed"] == 7
    assert req["params"]["temperature"] == 0.5
    assert isinstance(req["time"], float)


def test_scripted_content_then_default(server):
    server.script(MODEL, {"content": "scripted!"})
    assert complete(server).choices[0].message.content == "scripted!"
    assert complete(server).choices[0].message.content.startswith(f"{MODEL} answers:")


def test_rate_limit_429_exposes_retry_after(server):
    server.script(MODEL, {"status": 429, "headers": {"Retry-After": "1"}})
    with pytest.raises(litellm.RateLimitError) as info:
        complete(server)
    exc = info.value
    assert exc.status_code == 429
    # The real HTTP response headers are on exc.litellm_response_headers (an httpx.Headers,
    # case-insensitive), which the client reads. Whether exc.response (a synthetic
    # httpx.Response) carries them too depends on the litellm release (empty in 1.106, filled
    # in 1.110), so the client does not rely on it.
    assert exc.litellm_response_headers["retry-after"] == "1"


def test_503_exposes_retry_after(server):
    server.script(MODEL, {"status": 503, "headers": {"Retry-After": "2"}})
    with pytest.raises(litellm.ServiceUnavailableError) as info:
        complete(server)
    # Same attribute as for 429: exc.litellm_response_headers.
    assert info.value.litellm_response_headers["Retry-After"] == "2"


def test_500_raises_internal_server_error(server):
    server.script(MODEL, {"status": 500})
    with pytest.raises(litellm.InternalServerError) as info:
        complete(server)
    assert info.value.status_code == 500


def test_malformed_body_raises(server):
    server.script(MODEL, {"raw": "not json{"})
    # litellm 1.106.2 maps a 200 with an unparseable body to InternalServerError
    # (status_code 500; litellm_response_headers is None).
    with pytest.raises(litellm.InternalServerError):
        complete(server)


def test_delay_causes_client_timeout(server):
    server.script(MODEL, {"delay": 3})
    start = time.monotonic()
    with pytest.raises(litellm.Timeout):
        complete(server, timeout=0.5)
    assert time.monotonic() - start < 2.5


def test_connection_refused():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on `port` now. Note: litellm 1.106.2 maps this to
    # InternalServerError (status_code 500, message "Connection error."),
    # NOT to APIConnectionError.
    with pytest.raises(litellm.InternalServerError) as info:
        litellm.completion(
            model=f"openai/{MODEL}",
            api_base=f"http://127.0.0.1:{port}/v1",
            api_key="sk-test",
            messages=MESSAGES,
            max_retries=0,
            num_retries=0,
        )
    assert "Connection error" in str(info.value)


def test_count_per_model_and_reset(server):
    complete(server, model="a")
    complete(server, model="a")
    complete(server, model="b")
    assert server.count() == 3
    assert server.count("a") == 2
    assert server.count("b") == 1
    assert server.count("c") == 0
    server.script("a", {"content": "x"})
    server.reset()
    assert server.count() == 0
    assert complete(server, model="a").choices[0].message.content.startswith("a answers:")


def test_models_admin_and_404(server):
    complete(server, model="m1")
    complete(server, model="m2")
    root = server.base_url[: -len("/v1")]
    status, body = _get_json(f"{server.base_url}/models")
    assert status == 200
    assert {m["id"] for m in body["data"]} >= {"m1", "m2"}
    status, body = _get_json(f"{root}/_admin/stats")
    assert status == 200
    assert body == {"requests": 2, "by_model": {"m1": 1, "m2": 1}}
    status, body = _get_json(f"{root}/v1/nope")
    assert status == 404
    assert "message" in body["error"]


def test_concurrent_acompletion(server):
    server.latency = 0.5
    n = 64

    async def run():
        return await asyncio.gather(
            *(
                litellm.acompletion(
                    model=f"openai/{MODEL}",
                    api_base=server.base_url,
                    api_key="sk-test",
                    messages=[{"role": "user", "content": f"prompt {i}"}],
                    max_retries=0,
                    num_retries=0,
                )
                for i in range(n)
            )
        )

    start = time.monotonic()
    results = asyncio.run(run())
    elapsed = time.monotonic() - start
    # Only proves the requests overlap (serial would take 64 * 0.5 = 32 s).
    assert elapsed < 10, elapsed
    assert sorted(r.choices[0].message.content for r in results) == sorted(
        f"{MODEL} answers: prompt {i}" for i in range(n)
    )
    assert server.count(MODEL) == n


def test_cli_ready_line_and_sigterm():
    script = Path(__file__).resolve().parents[1] / "openai_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--latency", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:") and line.endswith("/v1"), line
        base_url = line.split()[1]
        status, body = _get_json(base_url[: -len("/v1")] + "/_admin/stats")
        assert (status, body) == (200, {"requests": 0, "by_model": {}})
    finally:
        proc.terminate()
        rc = proc.wait(timeout=10)
    assert rc == 0
    assert proc.stderr.read() == ""
