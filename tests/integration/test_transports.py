"""The two transports side by side, and the limits every transport shares: an answer stored through
one is served to the other, the adaptive limit settles under a provider's quota, and ``tpm`` holds a
call back until the minute's tokens allow it. (Every test of ``test_collection.py`` also runs over
both transports, through the ``transport`` fixture.)"""

from __future__ import annotations

import asyncio
import json

import pytest

from pytest_llmbias.clients import ModelClient, RetryPolicy
from pytest_llmbias.clients.ratelimit import TokenLimiter
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.store.calls import ModelCall
from tests.integration._data import BASELINES, KEY_ENV, MODELS, TARGET
from tests.openai_server import OpenAIServer

SAMPLED_TEST = """
import pytest


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], samples={samples}, models={models!r})
def test_collected(bias_responses):
    assert len(bias_responses) == {n}
"""


def write(
    pytester: pytest.Pytester,
    server: OpenAIServer,
    transport: str,
    *,
    samples: int = 1,
    models: str = "all",
    **collection,
) -> None:
    def model(alias):
        return {
            "model": f"openai/{MODELS[alias]}",
            "alias": alias,
            "api_base": server.base_url,
            "api_key_env": KEY_ENV,
            "transport": transport,
        }

    # no fingerprint probes: these tests count and script each model's calls
    config = {
        "target": model(TARGET),
        "baselines": [model(a) for a in BASELINES],
        "collection": {"fingerprint": False, **collection},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    n = (10 if models == "target" else 30) * samples
    (pytester.path / "test_collected.py").write_text(SAMPLED_TEST.format(samples=samples, n=n, models=models))


@pytest.mark.parametrize("first, then", [("litellm", "openai"), ("openai", "litellm")])
def test_an_answer_stored_through_one_transport_is_served_to_the_other(pytester, server, run_project, first, then):
    write(pytester, server, first)
    run_project().assert_outcomes(passed=1)
    assert len(server.requests) == 30
    write(pytester, server, then)
    result = run_project()
    result.assert_outcomes(passed=1)
    assert len(server.requests) == 30  # every answer came from the store
    result.stdout.fnmatch_lines(["*30 calls: 30 from store, 0 fetched*"])


def test_both_transports_send_the_same_request(pytester, server, run_project):
    """The same call through either transport reaches the server as the same model, messages and
    parameters, with the same key."""
    bodies = {}
    for transport in ("litellm", "openai"):
        server.reset()
        write(pytester, server, transport, timeout=5)
        run_project("--llmbias-cache=refresh").assert_outcomes(passed=1)
        bodies[transport] = sorted(
            (
                r["model"],
                json.dumps(r["messages"]),
                json.dumps(r["params"], sort_keys=True),
                r["headers"].get("Authorization"),
            )
            for r in server.requests
        )
    assert len(bodies["openai"]) == 30
    assert bodies["openai"] == bodies["litellm"]


def test_a_dropped_connection_is_retried_and_nothing_asks_for_a_stream(pytester, server, run_project, transport):
    """The server cuts the connection of the target's first call before any answer: the call is
    retried (the same question) and the run passes; no request asks for a streamed answer."""
    write(pytester, server, transport, retries=1, timeout=5, concurrency=1)
    server.script(MODELS[TARGET], {"drop": True})
    result = run_project()
    result.assert_outcomes(passed=1)
    target = [r for r in server.requests if r["model"] == MODELS[TARGET]]
    assert len(server.requests) == 31 and len(target) == 11
    assert target[0]["messages"] == target[1]["messages"]
    assert not any(r["params"].get("stream") for r in server.requests)
    result.stdout.fnmatch_lines(["*30 calls: 0 from store, 30 fetched, 0 failed*"])


def test_the_adaptive_limit_settles_under_a_providers_quota(pytester, run_project, transport):
    """A provider that takes 36 calls in any second (latency 0.1 s: 3 calls in flight fit, 4 do
    not) and answers 429 with Retry-After: 1 beyond: 120 calls to one model at concurrency 32 all
    complete, and once the limit has settled the calls the server sees per second stay near the
    quota."""
    with OpenAIServer(latency=0.1, rate_limit=36) as server:
        write(pytester, server, transport, samples=12, models="target", concurrency=32, retries=2)
        result = run_project()
        requests = server.requests
        counters = server.counters()
    result.assert_outcomes(passed=1)
    assert counters["ok"] == 120 and counters["throttled"] > 0  # it was throttled, and nothing failed
    times = sorted(r["time"] for r in requests)
    span = times[-1] - times[0]
    settled = [t for t in times if t >= times[0] + span / 2]
    rate = len(settled) / (times[-1] - settled[0])
    assert rate < 36 * 1.3, f"{rate:.1f} requests/s in the second half"
    assert len(requests) < 120 * 1.5  # the throttled requests were a burst, not a steady share


def test_tpm_holds_a_call_until_the_minute_has_room(server):
    """tokens per minute, counted from usage: once the minute's tokens reach the cap, the next
    call does not start until the oldest leave the window (the clock is the test's)."""
    now = [1000.0]
    tokens = TokenLimiter(60, clock=lambda: now[0])
    spec = ModelSpec(model="openai/tgt-model", alias="tgt", api_base=server.base_url)
    # each call about 25 tokens (prompt and answer, in words): two fit in the minute, three do not
    calls = [ModelCall.build(spec, f"question {i} " + "word " * 10, GenerationSettings()) for i in range(4)]

    async def scenario() -> list[int]:
        client = ModelClient(spec, timeout=5, policy=RetryPolicy(retries=0), tokens=tokens)
        seen = []
        try:
            for call in calls[:3]:
                await client.complete(call)
                seen.append(len(server.requests))
            assert tokens.used() >= 60  # the usage of three answers fills this minute
            waiting = asyncio.ensure_future(client.complete(calls[3]))
            await asyncio.sleep(0.5)
            seen.append(len(server.requests))  # held back
            now[0] += 61.0  # a minute later
            await asyncio.wait_for(waiting, timeout=10)
            seen.append(len(server.requests))
        finally:
            await client.aclose()  # the client made its own HTTP session, and closes it
        assert not client._direct.open
        return seen

    assert asyncio.run(scenario()) == [1, 2, 3, 3, 4]
