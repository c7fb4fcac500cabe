from __future__ import annotations

import asyncio
import random
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from pytest_llmbias.clients import ModelClient, RateLimiter, RetryPolicy, classify, parse_retry_after
from pytest_llmbias.clients.litellm_import import import_litellm
from pytest_llmbias.clients.retry import RETRYABLE_STATUSES
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import ConfigError, ProviderError
from pytest_llmbias.store.calls import ModelCall

# --------------------------------------------------------------------------------------------
# RetryPolicy


@settings(max_examples=100, deadline=None)
@given(
    attempt=st.integers(min_value=0, max_value=60),
    seed=st.integers(min_value=0, max_value=2**32),
    base=st.floats(min_value=0.01, max_value=5.0),
    cap=st.floats(min_value=0.01, max_value=120.0),
)
def test_delay_within_full_jitter_bounds(attempt: int, seed: int, base: float, cap: float) -> None:
    policy = RetryPolicy(base=base, cap=cap)
    delay = policy.delay(attempt, None, random.Random(seed))
    assert 0.0 <= delay <= min(cap, base * 2**attempt)


@settings(max_examples=100, deadline=None)
@given(
    attempt=st.integers(min_value=0, max_value=60),
    seed=st.integers(min_value=0, max_value=2**32),
    retry_after=st.floats(min_value=0.0, max_value=1000.0),
)
def test_delay_never_below_retry_after(attempt: int, seed: int, retry_after: float) -> None:
    policy = RetryPolicy()
    delay = policy.delay(attempt, retry_after, random.Random(seed))
    assert delay >= retry_after
    assert delay <= max(retry_after, min(policy.cap, policy.base * 2**attempt))


def test_delay_is_deterministic_for_a_seeded_rng() -> None:
    policy = RetryPolicy()
    a = [policy.delay(i, None, random.Random(7)) for i in range(6)]
    b = [policy.delay(i, None, random.Random(7)) for i in range(6)]
    assert a == b
    assert len({round(x, 9) for x in a}) > 1  # jittered, not constant


def test_should_retry_stops_at_retries() -> None:
    policy = RetryPolicy(retries=3)
    assert [policy.should_retry(i, retryable=True) for i in range(5)] == [True, True, True, False, False]
    assert RetryPolicy(retries=0).should_retry(0, retryable=True) is False


def test_should_retry_refuses_non_retryable() -> None:
    assert RetryPolicy().should_retry(0, retryable=False) is False
    assert RetryPolicy().should_retry(0, retryable=False, retry_after=1.0) is False


def test_should_retry_refuses_long_retry_after() -> None:
    policy = RetryPolicy(max_retry_after=60.0)
    assert policy.should_retry(0, retryable=True, retry_after=60.0) is True
    assert policy.should_retry(0, retryable=True, retry_after=60.5) is False
    assert policy.should_retry(0, retryable=True, retry_after=None) is True


# --------------------------------------------------------------------------------------------
# parse_retry_after


NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("value", "expected"), [("3", 3.0), ("0.5", 0.5), (" 12 ", 12.0), (4, 4.0), (2.5, 2.5), ("-3", 0.0), (-1, 0.0)]
)
def test_parse_retry_after_seconds(value: Any, expected: float) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_parse_retry_after_http_date_ahead() -> None:
    header = format_datetime(NOW + timedelta(seconds=30), usegmt=True)
    assert header.endswith("GMT")
    assert parse_retry_after(header, now=NOW) == pytest.approx(30.0)


def test_parse_retry_after_past_date_is_zero() -> None:
    header = format_datetime(NOW - timedelta(hours=1), usegmt=True)
    assert parse_retry_after(header, now=NOW) == 0.0


@pytest.mark.parametrize("value", ["soon", "", "   ", "Mon, 99 Foo 2024", None])
def test_parse_retry_after_garbage(value: Any) -> None:
    assert parse_retry_after(value, now=NOW) is None


# --------------------------------------------------------------------------------------------
# classify() on litellm's own exception objects


@pytest.fixture(scope="module")
def litellm() -> Any:
    return import_litellm()


def http_response(status: int) -> Any:
    import httpx

    return httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1"))


def test_classify_rate_limit_with_retry_after(litellm: Any) -> None:
    import httpx

    exc = litellm.RateLimitError(message="x", llm_provider="openai", model="m", response=http_response(429))
    exc.litellm_response_headers = httpx.Headers({"retry-after": "7"})
    assert classify(exc) == (True, 429, 7.0)


def test_classify_retry_after_from_response_headers(litellm: Any) -> None:
    import httpx

    resp = httpx.Response(429, headers={"Retry-After": "2"}, request=httpx.Request("POST", "http://127.0.0.1"))
    exc = litellm.RateLimitError(message="x", llm_provider="openai", model="m", response=resp)
    assert classify(exc) == (True, 429, 2.0)


def test_classify_rate_limit_without_header(litellm: Any) -> None:
    exc = litellm.RateLimitError(message="x", llm_provider="openai", model="m", response=http_response(429))
    assert classify(exc) == (True, 429, None)


@pytest.mark.parametrize(("name", "status"), [("InternalServerError", 500), ("ServiceUnavailableError", 503)])
def test_classify_server_errors_retryable(litellm: Any, name: str, status: int) -> None:
    exc = getattr(litellm, name)(message="boom", llm_provider="openai", model="m", response=http_response(status))
    retryable, got_status, _ = classify(exc)
    assert retryable is True
    assert got_status == status


@pytest.mark.parametrize(
    ("name", "status"), [("BadRequestError", 400), ("AuthenticationError", 401), ("NotFoundError", 404)]
)
def test_classify_client_errors_not_retryable(litellm: Any, name: str, status: int) -> None:
    exc = getattr(litellm, name)(message="nope", llm_provider="openai", model="m", response=http_response(status))
    retryable, got_status, _ = classify(exc)
    assert retryable is False
    assert got_status == status


def test_classify_missing_credentials_not_retryable(litellm: Any) -> None:
    exc = litellm.InternalServerError(
        message="OpenAIException - Missing credentials. Please pass an `api_key`",
        llm_provider="openai",
        model="m",
        response=http_response(500),
    )
    retryable, status, _ = classify(exc)
    assert retryable is False
    assert status == 401


def test_classify_litellm_timeout_and_connection_error(litellm: Any) -> None:
    import httpx

    timeout = litellm.Timeout(message="timed out", model="m", llm_provider="openai")
    assert classify(timeout)[0] is True
    conn = litellm.APIConnectionError(
        message="refused", llm_provider="openai", model="m", request=httpx.Request("POST", "http://127.0.0.1")
    )
    assert classify(conn)[0] is True


@pytest.mark.parametrize("exc", [asyncio.TimeoutError(), TimeoutError("t"), ConnectionResetError("reset")])
def test_classify_timeouts_and_connections_retryable(exc: BaseException) -> None:
    retryable, status, retry_after = classify(exc)
    assert retryable is True
    assert status is None and retry_after is None


def test_classify_plain_exception_without_status_is_retryable() -> None:
    assert classify(ValueError("malformed body")) == (True, None, None)


@pytest.mark.parametrize("status", sorted(RETRYABLE_STATUSES))
def test_classify_every_retryable_status(status: int) -> None:
    exc = Exception("x")
    exc.status_code = status  # type: ignore[attr-defined]
    assert classify(exc)[:2] == (True, status)


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 413, 422])
def test_classify_final_statuses(status: int) -> None:
    exc = Exception("x")
    exc.status_code = status  # type: ignore[attr-defined]
    assert classify(exc)[:2] == (False, status)


# --------------------------------------------------------------------------------------------
# RateLimiter


def test_rate_limiter_spaces_starts() -> None:
    async def run() -> list[float]:
        limiter = RateLimiter(600)  # one start every 0.1 s
        starts = []
        for _ in range(5):
            await limiter.acquire()
            starts.append(time.monotonic())
        return starts

    starts = asyncio.run(run())
    assert starts[4] - starts[0] >= 0.35
    assert starts == sorted(starts)


def test_rate_limiter_spaces_concurrent_starts() -> None:
    async def run() -> list[float]:
        limiter = RateLimiter(600)
        starts: list[float] = []

        async def one() -> None:
            await limiter.acquire()
            starts.append(time.monotonic())

        await asyncio.gather(*(one() for _ in range(5)))
        return sorted(starts)

    starts = asyncio.run(run())
    assert starts[4] - starts[0] >= 0.35


def test_a_blocked_event_loop_widens_the_spacing_and_never_bunches_starts() -> None:
    """The first start blocks the loop for three and a half turns (as a first response's one-time
    work can): the starts queued behind it come one turn apart after it, not together."""

    async def run() -> list[float]:
        limiter = RateLimiter(600)  # one start every 0.1 s
        starts: list[float] = []

        async def one(first: bool) -> None:
            await limiter.acquire()
            starts.append(time.monotonic())
            if first:
                await asyncio.sleep(0.01)  # the others queue for their turns
                time.sleep(0.35)  # then the event loop is blocked

        await asyncio.gather(one(True), *(one(False) for _ in range(4)))
        return starts

    starts = asyncio.run(run())
    # neighbouring starts: the shifted copy is one shorter
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert gaps[0] >= 0.35, gaps
    assert min(gaps) >= 0.09, gaps  # asyncio may wake a sleeper up to a clock tick early


def test_rate_limiter_zero_never_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(delay: float, *args: Any) -> None:
        slept.append(delay)

    monkeypatch.setattr("pytest_llmbias.clients.ratelimit.asyncio.sleep", fake_sleep)

    async def run() -> float:
        limiter = RateLimiter(0)
        t0 = time.monotonic()
        for _ in range(1000):
            await limiter.acquire()
        return time.monotonic() - t0

    elapsed = asyncio.run(run())
    assert slept == []
    assert RateLimiter(0).interval == 0.0
    assert elapsed < 1.0


# --------------------------------------------------------------------------------------------
# ModelClient result handling (fake completion function, no network, recorded sleeps)


def make_call() -> ModelCall:
    return ModelCall.build(ModelSpec(model="openai/m", alias="m"), "q?", GenerationSettings())


def completion_result(text: Any, finish: str = "stop") -> Any:
    message = SimpleNamespace(content=text)
    return SimpleNamespace(
        choices=[SimpleNamespace(message=message, finish_reason=finish)],
        usage=SimpleNamespace(prompt_tokens=4, completion_tokens=9),
    )


def make_client(outcomes: list[Any], *, retries: int = 3, spec: ModelSpec | None = None):
    calls: list[dict[str, Any]] = []
    sleeps: list[float] = []

    async def completion(**kwargs: Any) -> Any:
        calls.append(kwargs)
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def sleep(delay: float) -> None:
        sleeps.append(delay)

    client = ModelClient(
        spec or ModelSpec(model="openai/m", alias="m"),
        timeout=5.0,
        policy=RetryPolicy(retries=retries, base=0.01, cap=0.02),
        completion=completion,
        sleep=sleep,
        rng=random.Random(0),
    )
    return client, calls, sleeps


def test_client_success() -> None:
    client, calls, sleeps = make_client([completion_result("an answer")])
    call = make_call()
    response = asyncio.run(client.complete(call))
    assert response.text == "an answer"
    assert response.call == call
    assert (response.finish_reason, response.prompt_tokens, response.completion_tokens) == ("stop", 4, 9)
    assert response.source == "network"
    assert sleeps == [] and client.attempts == 1
    (kwargs,) = calls
    assert kwargs["model"] == "openai/m"
    assert kwargs["messages"] == [{"role": "user", "content": "q?"}]
    assert kwargs["max_retries"] == 0 and kwargs["num_retries"] == 0
    assert "api_key" not in kwargs and "api_base" not in kwargs


def test_client_passes_api_key_and_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMBIAS_UNIT_KEY", "sk-unit")
    spec = ModelSpec(model="openai/m", alias="m", api_base="http://127.0.0.1:9/v1", api_key_env="LLMBIAS_UNIT_KEY")
    client, calls, _ = make_client([completion_result("ok")], spec=spec)
    call = ModelCall.build(spec, "q?", GenerationSettings())
    asyncio.run(client.complete(call))
    assert calls[0]["api_key"] == "sk-unit"
    assert calls[0]["api_base"] == "http://127.0.0.1:9/v1"


def test_client_missing_key_env_fails_before_calling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMBIAS_UNIT_KEY_UNSET", raising=False)
    spec = ModelSpec(model="openai/m", alias="m", api_key_env="LLMBIAS_UNIT_KEY_UNSET")
    client, calls, _ = make_client([completion_result("ok")], spec=spec)
    with pytest.raises((ConfigError, ProviderError), match="LLMBIAS_UNIT_KEY_UNSET"):
        asyncio.run(client.complete(make_call()))
    assert calls == []


def test_client_missing_key_env_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMBIAS_UNIT_KEY_UNSET", raising=False)
    spec = ModelSpec(model="openai/m", alias="m", api_key_env="LLMBIAS_UNIT_KEY_UNSET")
    client, calls, sleeps = make_client([completion_result("ok")], spec=spec)
    with pytest.raises((ConfigError, ProviderError)) as info:
        asyncio.run(client.complete(make_call()))
    assert sleeps == []
    assert calls == []
    assert client.attempts <= 1
    assert "gave up" not in str(info.value)


@pytest.mark.parametrize(
    "bad", [completion_result(""), completion_result("   "), completion_result(None), SimpleNamespace(choices=[])]
)
def test_client_retries_empty_or_malformed_completion(bad: Any) -> None:
    client, calls, sleeps = make_client([bad, completion_result("second try")])
    response = asyncio.run(client.complete(make_call()))
    assert response.text == "second try"
    assert len(calls) == 2 and len(sleeps) == 1


def test_client_retries_then_gives_up(litellm: Any) -> None:
    errors = [
        litellm.InternalServerError(message="broken", llm_provider="openai", model="m", response=http_response(500))
        for _ in range(3)
    ]
    client, calls, sleeps = make_client(errors, retries=2)
    with pytest.raises(ProviderError) as info:
        asyncio.run(client.complete(make_call()))
    assert len(calls) == 3 and len(sleeps) == 2
    assert info.value.status == 500 and info.value.retryable is True
    assert "gave up after 3 attempts" in str(info.value)
    assert "'m'" in str(info.value)


def test_throttles_are_retried_on_their_own_budget(litellm: Any) -> None:
    """A 429 or 503 asks the run to slow down: it does not spend the error retries, and it halves
    the endpoint's adaptive limit; after ``throttle_retries`` of them the call fails."""
    from pytest_llmbias.clients.ratelimit import AdaptiveLimit

    def busy(status: int) -> Any:
        kind = litellm.RateLimitError if status == 429 else litellm.ServiceUnavailableError
        return kind(message="slow down", llm_provider="openai", model="m", response=http_response(status))

    outcomes = [busy(429), busy(503), busy(429), completion_result("ok")]
    client, calls, sleeps = make_client(outcomes, retries=0)
    client.adaptive = AdaptiveLimit(8)
    assert asyncio.run(client.complete(make_call())).text == "ok"
    assert len(calls) == 4 and len(sleeps) == 3
    assert client.adaptive.limit == 1 and client.adaptive.throttles == 3 and client.adaptive.in_flight == 0

    client, calls, sleeps = make_client([busy(429)] * 4, retries=5)
    client.policy = RetryPolicy(retries=5, base=0.01, cap=0.02, throttle_retries=3)
    with pytest.raises(ProviderError) as info:
        asyncio.run(client.complete(make_call()))
    assert len(calls) == 4 and info.value.status == 429 and "gave up after 4 attempts" in str(info.value)


def test_client_honours_retry_after(litellm: Any) -> None:
    import httpx

    exc = litellm.RateLimitError(message="slow down", llm_provider="openai", model="m", response=http_response(429))
    exc.litellm_response_headers = httpx.Headers({"retry-after": "7"})
    client, calls, sleeps = make_client([exc, completion_result("ok")])
    assert asyncio.run(client.complete(make_call())).text == "ok"
    assert len(sleeps) == 1 and 7.0 <= sleeps[0] <= 7.0 * 1.25  # the wait asked for, and up to a quarter more


def test_client_long_retry_after_ends_retries(litellm: Any) -> None:
    import httpx

    exc = litellm.RateLimitError(message="slow down", llm_provider="openai", model="m", response=http_response(429))
    exc.litellm_response_headers = httpx.Headers({"retry-after": "3600"})
    client, calls, sleeps = make_client([exc, completion_result("ok")])
    with pytest.raises(ProviderError, match="3600s"):
        asyncio.run(client.complete(make_call()))
    assert len(calls) == 1 and sleeps == []


def test_client_non_retryable_fails_at_once(litellm: Any) -> None:
    exc = litellm.AuthenticationError(message="bad key", llm_provider="openai", model="m", response=http_response(401))
    client, calls, sleeps = make_client([exc, completion_result("ok")])
    with pytest.raises(ProviderError) as info:
        asyncio.run(client.complete(make_call()))
    assert info.value.status == 401 and info.value.retryable is False
    assert "not retryable" in str(info.value)
    assert len(calls) == 1 and sleeps == []
