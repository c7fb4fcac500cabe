"""A slow server is handled, not hammered: a server that answers one request at a time, each in a
fixed time, and decodes a request to its end even when its client has gone (as a CPU model server
that does not watch its sockets), asked more at once than it answers within the timeout. The run
halves its calls in flight on the first timeouts, holds each timed-out call's retry back one more
timeout, prints the first timeout at once with what to change, and finishes; the calls that fail
for good are counted by kind on the progress line. And a 503 with Retry-After, what ``llmbias
serve`` answers when its queue is full, slows the calls down as a 429 does."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from pytest_llmbias.clients import ModelClient, RetryPolicy
from pytest_llmbias.clients.faults import FaultKind, FaultLog
from pytest_llmbias.clients.ratelimit import AdaptiveLimit
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.store.calls import ModelCall
from tests.integration._data import KEY_ENV, MODELS, TARGET
from tests.openai_server import OpenAIServer

TEST = """
import pytest


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models="target")
def test_collected(bias_responses):
    assert len(bias_responses) == 10
"""


def _write(pytester: pytest.Pytester, server: OpenAIServer, **collection: object) -> None:
    target = {
        "model": f"openai/{MODELS[TARGET]}",
        "alias": TARGET,
        "api_base": server.base_url,
        "api_key_env": KEY_ENV,
        "transport": "openai",
    }
    config = {
        "target": target,
        "baselines": [],
        "generation": {"max_tokens": 300},
        "collection": {"fingerprint": False, "max_samples": 1, **collection},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_collected.py").write_text(TEST, encoding="utf-8")


def test_a_slow_server_is_answered_in_full_with_fewer_calls_in_flight(pytester, run_project):
    """10 answers of 0.25 s each, one at a time, at concurrency 16 and a 1.2 s timeout: the last
    five of the first wave cannot be answered in time (they would be at 1.25-2.5 s). They time
    out once, the limit halves, their retries wait until the server has decoded them, and every
    answer arrives; the server decodes each abandoned request once, not once per quick retry."""
    with OpenAIServer(work=0.25, capacity=1) as server:
        _write(pytester, server, concurrency=16, timeout=1.2, retries=5)
        result = run_project()
        counters = server.counters()
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    first = [line for line in out.splitlines() if line.startswith("llmbias: first timeout error:")]
    assert len(first) == 1, out  # printed once, at once, whatever the number of timeouts
    for said in ("(retrying)", "collection.timeout (1.2s)", "collection.concurrency (16", "up to 300"):
        assert said in first[0]
    result.stdout.fnmatch_lines(["*10 calls: 0 from store, 10 fetched, 0 failed*"])
    assert counters["ok"] == 10
    # each request that timed out was decoded to its end once, and its retry once more
    assert counters["decoded"] <= 2 * 10 and counters["requests"] <= 2 * 10, counters


def test_the_calls_that_fail_for_good_are_counted_by_kind_on_the_progress_line(pytester, run_project):
    """No retries, and a timeout that only the first answers meet: the rest fail for good as
    timeouts, and the progress line says so."""
    with OpenAIServer(work=0.3, capacity=1) as server:
        _write(pytester, server, concurrency=16, timeout=1.0, retries=0)
        result = run_project()
    out = result.stdout.str()
    assert "llmbias: first timeout error:" in out and "(not retried)" in out
    progress = [line for line in out.splitlines() if line.startswith("llmbias: ") and "calls/s" in line]
    assert progress and any("errors: 1 timeout)" in line for line in progress), out
    result.stdout.fnmatch_lines(["*10 calls: 0 from store, 3 fetched, 7 failed*"])


def test_a_full_queue_s_503_with_retry_after_is_a_throttle_on_either_transport(transport):
    """What ``llmbias serve`` answers when its queue is full: the client waits the Retry-After,
    halves its calls in flight to the server, and the call is answered; no error retry is spent."""
    with OpenAIServer() as server:
        server.script("busy", {"status": 503, "headers": {"Retry-After": "1"}})
        spec = ModelSpec(model="openai/busy", alias="busy", api_base=server.base_url, transport=transport)
        client = ModelClient(
            spec, timeout=10.0, policy=RetryPolicy(retries=0), adaptive=AdaptiveLimit(8), faults=FaultLog()
        )

        async def ask() -> str:
            try:
                return (await client.complete(ModelCall.build(spec, "q?", GenerationSettings()))).text
            finally:
                await client.aclose()

        started = time.perf_counter()
        text = asyncio.run(ask())
        waited = time.perf_counter() - started
    assert text and waited >= 1.0
    assert client.adaptive is not None and (client.adaptive.limit, client.adaptive.throttles) == (4, 1)
    assert client.faults is not None and client.faults.attempts == {FaultKind.THROTTLED: 1}
