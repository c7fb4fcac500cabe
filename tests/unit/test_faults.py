"""Failed attempts by kind: what each kind is, the advice printed with the first of each, the
progress line's counts, and the client's answer to a timeout or a dropped connection (the endpoint's
adaptive limit halved once per overload, a timed-out call's retry held back one more timeout)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from pytest_llmbias.clients import ModelClient, RetryPolicy
from pytest_llmbias.clients.faults import Fault, FaultKind, FaultLog, advice, count_line, fault_kind
from pytest_llmbias.clients.ratelimit import AdaptiveLimit
from pytest_llmbias.clients.shared_limits import EndpointLimits
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import ProviderError
from pytest_llmbias.planning.progress import Progress
from pytest_llmbias.store.calls import ModelCall
from tests.unit.test_retry import completion_result


@pytest.mark.parametrize(
    "exc, status, kind",
    [
        (asyncio.TimeoutError(), None, FaultKind.TIMEOUT),
        (ProviderError("Timeout: no complete answer within 60s", retryable=True), None, FaultKind.TIMEOUT),
        (ProviderError("gateway", status=504), 504, FaultKind.TIMEOUT),
        (ConnectionRefusedError("refused"), None, FaultKind.CONNECTION),
        (ProviderError("ClientConnectorError: Cannot connect to host", retryable=True), None, FaultKind.CONNECTION),
        (ProviderError("Connection error.", status=500), 500, FaultKind.CONNECTION),  # litellm's refused connection
        (ProviderError("slow down", status=429), 429, FaultKind.THROTTLED),
        (ProviderError("busy", status=503), 503, FaultKind.THROTTLED),
        (ProviderError("broken", status=500), 500, FaultKind.SERVER),
        (ProviderError("no such model", status=404), 404, FaultKind.REFUSED),
        (ProviderError("malformed completion (KeyError)", retryable=True), None, FaultKind.MALFORMED),
        (ValueError("odd"), None, FaultKind.OTHER),
    ],
)
def test_each_failed_attempt_has_a_kind(exc: BaseException, status: int | None, kind: FaultKind) -> None:
    assert fault_kind(exc, status) is kind


def test_the_advice_names_the_settings_to_change_with_their_values() -> None:
    text = advice(FaultKind.TIMEOUT, timeout=60.0, concurrency=32, max_tokens=300)
    assert text is not None
    for said in ("collection.timeout (60s)", "collection.concurrency (32", "generation.max_tokens", "up to 300"):
        assert said in text
    connection = advice(FaultKind.CONNECTION, timeout=60.0, concurrency=8)
    assert connection is not None and "server running" in connection and "collection.concurrency (8" in connection
    assert advice(FaultKind.REFUSED, timeout=1.0, concurrency=1) is None  # its own message says what to fix


def test_the_first_fault_of_each_kind_is_told_once() -> None:
    told: list[Fault] = []
    log = FaultLog(told.append)
    for kind in (FaultKind.TIMEOUT, FaultKind.TIMEOUT, FaultKind.CONNECTION, FaultKind.TIMEOUT):
        log.attempt(
            kind, alias="m", endpoint="openai/m at http://h/v1", text="boom\nframes", timeout=5, concurrency=4,
            retried=True,
        )  # fmt: skip
    assert [f.kind for f in told] == [FaultKind.TIMEOUT, FaultKind.CONNECTION]
    assert [f.kind for f in log.untold()] == [FaultKind.TIMEOUT, FaultKind.CONNECTION] and log.untold() == []
    assert log.attempts == {FaultKind.TIMEOUT: 3, FaultKind.CONNECTION: 1}
    line = told[0].message
    assert line.startswith("llmbias: first timeout error: model 'm' (openai/m at http://h/v1): boom (retrying); ")
    assert "frames" not in line and "collection.timeout (5s)" in line


def test_the_progress_line_counts_errors_by_kind() -> None:
    p = Progress(total=100, done=79, from_store=8, fetched=8)
    for kind in ["timeout"] * 60 + ["connection"] * 3:
        p.failed(kind)
    assert "(8 from store, 8 fetched, 63 errors: 60 timeout, 3 connection)" in p.line()
    assert "0 errors)" in Progress(total=3).line()
    assert count_line({FaultKind.CONNECTION: 1, "config": 2, FaultKind.TIMEOUT: 0}) == "2 config, 1 connection"


def test_a_timeout_halves_the_limit_once_per_overload_as_a_throttle_does() -> None:
    limit = AdaptiveLimit(32)
    limit.in_flight = 20
    epoch = limit._epoch
    for _ in range(20):  # one overload's burst of timeouts
        limit.overloaded(epoch, "timeout")
        limit.release(epoch)
    assert (limit.limit, limit.decreases, limit.stalls, limit.throttles) == (16, 1, {"timeout": 20}, 0)
    limit.in_flight = 1
    limit.overloaded(limit._epoch, "connection")  # a later overload, one kind or another: halved again
    limit.throttled(limit._epoch)
    assert limit.limit == 4 and limit.reason == "throttled" and limit.throttles == 1
    for _ in range(10):
        limit.overloaded(limit._epoch, "timeout")
    assert limit.limit == 1  # never below one


def test_the_progress_note_says_why_an_endpoint_backed_off() -> None:
    limits = EndpointLimits(32, 0, 0)
    slow, _, _ = limits.of("openai/slow", "http://a/v1")
    busy, _, _ = limits.of("openai/busy", "http://b/v1")
    limits.of("openai/fine", "http://c/v1")
    assert limits.note() is None
    slow.in_flight = busy.in_flight = 1
    slow.overloaded(0, "timeout")
    busy.throttled(0)
    assert (
        limits.note()
        == "timing out: openai/slow at 16 of 32 in flight; rate limited: openai/busy at 16 of 32 in flight"
    )


def _client(outcomes: list[Any], *, timeout: float = 5.0, retries: int = 3) -> tuple[ModelClient, list[float], list]:
    """A client whose completions are ``outcomes`` in turn; its sleeps are recorded, each with the
    places its endpoint had in flight while it slept."""
    sleeps: list[float] = []
    held: list[int] = []
    adaptive = AdaptiveLimit(8)

    async def completion(**kwargs: Any) -> Any:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def sleep(delay: float) -> None:
        sleeps.append(delay)
        held.append(adaptive.in_flight)

    client = ModelClient(
        ModelSpec(model="openai/m", alias="m", api_base="http://127.0.0.1:9/v1"),
        timeout=timeout,
        policy=RetryPolicy(retries=retries, base=0.01, cap=0.02),
        completion=completion,
        sleep=sleep,
        rng=random.Random(0),
        adaptive=adaptive,
        faults=FaultLog(),
    )
    return client, sleeps, held


def _call() -> ModelCall:
    return ModelCall.build(ModelSpec(model="openai/m", alias="m"), "q?", GenerationSettings(max_tokens=300))


def test_a_timed_out_call_is_retried_only_after_one_more_timeout_its_place_kept() -> None:
    """The server may still be decoding the attempt the client gave up on: its retry waits a whole
    timeout (not the backoff's hundredths of a second), and meanwhile the attempt still counts as
    in flight, so no other call takes its place either."""
    client, sleeps, held = _client([asyncio.TimeoutError(), asyncio.TimeoutError(), completion_result("ok")])
    assert asyncio.run(client.complete(_call())).text == "ok"
    assert sleeps == [5.0, 5.0] and held == [1, 1]
    assert client.adaptive is not None and client.adaptive.limit == 2 and client.adaptive.in_flight == 0
    assert client.faults is not None and client.faults.attempts == {FaultKind.TIMEOUT: 2}
    (first,) = client.faults.untold()
    assert first.retried and "up to 300" in (first.advice or "")


def test_a_dropped_connection_halves_the_limit_and_is_retried_after_the_backoff() -> None:
    client, sleeps, held = _client([ConnectionResetError("reset by peer"), completion_result("ok")])
    assert asyncio.run(client.complete(_call())).text == "ok"
    assert len(sleeps) == 1 and sleeps[0] < 0.05 and held == [0]  # its place handed back before the wait
    assert client.adaptive is not None and client.adaptive.limit == 4


def test_a_call_that_fails_for_good_says_the_kind_of_its_last_attempt() -> None:
    client, _, _ = _client([asyncio.TimeoutError()] * 2, retries=1)
    with pytest.raises(ProviderError) as info:
        asyncio.run(client.complete(_call()))
    assert info.value.kind == "timeout" and "gave up after 2 attempts" in str(info.value)
    assert client.faults is not None
    assert [f.retried for f in client.faults.first.values()] == [True]  # the first told was retried
