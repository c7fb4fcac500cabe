"""The adaptive concurrency limit, the tokens-per-minute cap, and the choice of transport."""

from __future__ import annotations

import asyncio

import pytest

from pytest_llmbias.choices import Transport
from pytest_llmbias.clients.openai_transport import parse_completion, resolve_transport, wire_model
from pytest_llmbias.clients.ratelimit import AdaptiveLimit, TokenLimiter
from pytest_llmbias.errors import ProviderError


def _throttle(limit: AdaptiveLimit, epoch: int) -> None:
    """An attempt started at ``epoch`` is throttled, then (after its wait) hands its place back."""
    limit.throttled(epoch)
    limit.release(epoch)


def _succeed(limit: AdaptiveLimit, n: int) -> None:
    for _ in range(n):
        limit.in_flight += 1
        limit.release(limit._epoch, ok=True)


def test_a_healthy_endpoint_keeps_the_configured_concurrency():
    limit = AdaptiveLimit(32)
    _succeed(limit, 1000)
    assert limit.limit == 32 and not limit.backed_off


def test_one_wave_of_throttles_halves_the_limit_once():
    limit = AdaptiveLimit(64)
    epochs = [limit._epoch] * 40  # 40 attempts started before any answer came back
    limit.in_flight = 40
    for epoch in epochs:
        _throttle(limit, epoch)
    assert limit.limit == 32 and limit.decreases == 1 and limit.throttles == 40 and limit.in_flight == 0
    # an attempt started after the decrease that is throttled halves it again
    limit.in_flight = 1
    _throttle(limit, limit._epoch)
    assert limit.limit == 16 and limit.decreases == 2


def test_the_limit_climbs_back_to_below_the_throttled_level_then_probes_slowly():
    limit = AdaptiveLimit(64, probe_rounds=10)
    limit.in_flight = 1
    limit.limit = 8
    _throttle(limit, limit._epoch)  # throttled at 8: halves to 4
    assert limit.limit == 4
    _succeed(limit, 4 + 5 + 6)  # one round at each of 4, 5, 6
    assert limit.limit == 7  # one below the level that was throttled
    _succeed(limit, 7 * 9)
    assert limit.limit == 7  # nine clean rounds: still holding
    _succeed(limit, 7)
    assert limit.limit == 8  # the tenth: one probe higher
    _succeed(limit, 8)  # a whole round held at 8: the quota is higher than it was
    _succeed(limit, 8 * 10)
    assert limit.limit == 9  # so it probes on
    limit.in_flight = 1
    limit.release(limit._epoch)  # an error that is not a throttle neither grows nor shrinks it
    assert limit.limit == 9


def test_a_failed_probe_steps_back_and_waits_twice_as_long_before_the_next():
    limit = AdaptiveLimit(64, probe_rounds=2)
    limit.in_flight = 1
    limit.limit = 8
    _throttle(limit, limit._epoch)  # 8 throttled: halves to 4, 7 is the plateau
    _succeed(limit, 4 + 5 + 6)
    assert limit.limit == 7
    _succeed(limit, 7 * 2)
    assert limit.limit == 8  # probes after 2 clean rounds
    _succeed(limit, 7)  # not yet a whole round at 8
    limit.in_flight = 1
    _throttle(limit, limit._epoch)  # the probe fails: back to 7, not halved to 4
    assert limit.limit == 7
    _succeed(limit, 7 * 3)
    assert limit.limit == 7  # the next probe waits 4 rounds
    _succeed(limit, 7)
    assert limit.limit == 8


def test_a_throttle_at_the_level_that_held_steps_one_below_it():
    limit = AdaptiveLimit(64)
    limit.in_flight = 1
    limit.limit = 8
    _throttle(limit, limit._epoch)
    _succeed(limit, 4 + 5 + 6)
    assert limit.limit == 7  # the plateau
    limit.in_flight = 1
    _throttle(limit, limit._epoch)
    assert limit.limit == 6  # one below, not 3
    limit.in_flight = 1
    _throttle(limit, limit._epoch)  # and again: the quota is lower still, one more step
    assert limit.limit == 5


def test_a_place_is_kept_through_the_wait_after_a_throttle():
    limit = AdaptiveLimit(4)
    limit.in_flight = 2
    epoch = limit._epoch
    limit.throttled(epoch)  # counted and halved, the place kept
    assert (limit.limit, limit.in_flight, limit.throttles) == (2, 2, 1)
    limit.release(epoch)
    assert limit.in_flight == 1 and limit.limit == 2


def test_never_below_one_nor_above_the_ceiling():
    limit = AdaptiveLimit(2)
    for _ in range(5):
        limit.in_flight = 1
        _throttle(limit, limit._epoch)
    assert limit.limit == 1
    _succeed(limit, 1000)
    assert limit.limit == 2
    with pytest.raises(ValueError):
        AdaptiveLimit(0)


def test_acquire_holds_attempts_beyond_the_limit_until_a_place_frees():
    async def scenario() -> list[str]:
        limit = AdaptiveLimit(2)
        log: list[str] = []

        async def attempt(name: str, hold: float) -> None:
            epoch = await limit.acquire()
            log.append(f"start {name} ({limit.in_flight} in flight)")
            await asyncio.sleep(hold)
            limit.release(epoch, ok=True)

        await asyncio.gather(attempt("a", 0.05), attempt("b", 0.2), attempt("c", 0.0))
        return log

    log = asyncio.run(scenario())
    assert log == ["start a (1 in flight)", "start b (2 in flight)", "start c (2 in flight)"]


def test_the_token_cap_waits_for_the_oldest_tokens_to_leave_the_minute():
    now = [100.0]
    tokens = TokenLimiter(1000, clock=lambda: now[0])
    assert tokens.wait_time() == 0.0
    tokens.spend(600)
    now[0] = 110.0
    tokens.spend(500)  # 1,100 in the minute: over the cap
    assert tokens.used() == 1100
    assert tokens.wait_time() == pytest.approx(50.0)  # the 600 of t=100 leave at t=160
    now[0] = 160.0
    assert tokens.wait_time() == 0.0 and tokens.used() == 500
    assert TokenLimiter(0).wait_time() == 0.0


@pytest.mark.parametrize(
    "model, api_base, transport, expected",
    [
        ("openai/gpt-4o-mini", None, "auto", Transport.OPENAI),
        ("openai/llama3", "http://127.0.0.1:8000/v1", "auto", Transport.OPENAI),
        ("hosted_vllm/qwen", "http://127.0.0.1:8000/v1", "auto", Transport.OPENAI),
        ("hosted_vllm/qwen", None, "auto", Transport.LITELLM),
        ("anthropic/claude-3-5-haiku-20241022", None, "auto", Transport.LITELLM),
        ("ollama/llama3", "http://127.0.0.1:11434", "auto", Transport.LITELLM),
        ("gpt-4o", None, "auto", Transport.LITELLM),
        ("openai/gpt-4o", None, "litellm", Transport.LITELLM),
        ("my-model", "http://127.0.0.1:8000/v1", "openai", Transport.OPENAI),
    ],
)
def test_auto_takes_the_direct_path_for_openai_compatible_endpoints(model, api_base, transport, expected):
    assert resolve_transport(model, api_base, transport) is expected


def test_an_unknown_transport_lists_the_accepted_ones():
    with pytest.raises(ValueError, match="must be one of auto | litellm | openai, got 'http'"):
        resolve_transport("openai/x", None, "http")


def test_the_wire_model_drops_the_provider_prefix():
    assert wire_model("openai/gpt-4o") == "gpt-4o" and wire_model("hosted_vllm/org/m") == "org/m"
    assert wire_model("plain") == "plain"


def test_a_chat_completion_body_is_read_and_a_malformed_one_is_retryable():
    done = parse_completion(
        b'{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":3,"completion_tokens":1}}'
    )
    assert (done.text, done.finish_reason, done.prompt_tokens, done.completion_tokens) == ("hi", "stop", 3, 1)
    assert parse_completion(b'{"choices":[{"message":{"content":"x"}}]}').prompt_tokens is None
    for body in (b"<html>", b'{"choices": []}', b'{"object": "error"}', b"[1]"):
        with pytest.raises(ProviderError, match="malformed completion") as info:
            parse_completion(body)
        assert info.value.retryable
