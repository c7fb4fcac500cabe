"""The team store's parts against a real ``redis-server`` (``tests/redis_server.py``): the records
(the same keys and JSON as the disk store), the claims, the spool, TLS, and the shared limits of
``clients/shared_limits.py``, each checked with two clients as two processes would hold them."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time

import pytest

from tests.redis_server import RedisServer, ThrowawayCertificates

pytest.importorskip("redis", reason="the team store needs redis-py (pytest-llmbias[redis])")

from pytest_llmbias.clients.shared_limits import SharedAdaptiveLimit, SharedRateLimiter, SharedTokenLimiter  # noqa: E402
from pytest_llmbias.errors import ConfigError, StoreError, StoreLost  # noqa: E402
from pytest_llmbias.store.redis_store import EXTRA, RedisCache, masked, password_of  # noqa: E402


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    client = redis_server.client()
    client.flushall()
    client.close()
    return redis_server.url


def cache(url: str, tmp_path, name: str = "a") -> RedisCache:
    return RedisCache(url, spool=tmp_path / name / "spool")


def test_records_round_trip_under_the_disk_store_s_keys(url, tmp_path):
    a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
    a.set("response:k1", {"key": "k1", "text": "é ok"})
    assert b.get("response:k1") == {"key": "k1", "text": "é ok"}  # another process reads it
    assert b.get("response:nothing") is None
    assert b.get_many(["response:k1", "response:k2"]) == {"response:k1": {"key": "k1", "text": "é ok"}}
    assert list(b.keys("response:")) == ["response:k1"]
    assert b.set_many({"response:k1": {"key": "k1", "text": "other"}, "response:k2": {}}, overwrite=False) == 1
    assert a.get("response:k1")["text"] == "é ok"  # kept: not overwritten
    a.close(), b.close()


def test_a_claim_is_held_by_one_renewed_by_its_holder_only_and_lapses(url, tmp_path):
    a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
    assert a.claim("k", "a", 0.5) and not b.claim("k", "b", 0.5)
    assert a.claimed(["k", "other"]) == {"k"}
    b.renew(["k"], "b", 10), b.release("k", "b")  # not b's: nothing happens
    time.sleep(0.6)
    assert b.claimed(["k"]) == set() and b.claim("k", "b", 5)  # lapsed: b takes it over
    a.renew(["k"], "a", 0.1)
    time.sleep(0.2)
    assert a.claimed(["k"]) == {"k"}  # a's renewal did not touch b's claim
    b.release("k", "b")
    assert a.claimed(["k"]) == set()


def test_a_lost_server_keeps_the_answer_in_the_spool_and_the_next_run_uploads_it(tmp_path):
    with RedisServer(tmp_path / "r") as server:
        a = cache(server.url, tmp_path)
        a.set("response:before", {"n": 1})
        server.stop()
        with pytest.raises(StoreLost, match="stopped answering while this run was to write an answer"):
            a.set("response:after", {"n": 2})
        with pytest.raises(StoreLost):  # every later command fails at once
            a.get("response:before")
        a.close()
        server.start()
        again = cache(server.url, tmp_path)
        assert again.get("response:after") == {"n": 2}  # uploaded before the first read
        assert any("uploaded 1 answer(s) kept in" in n for n in again.notices)
        assert again.get("response:before") == {"n": 1}
        again.close()
        third = cache(server.url, tmp_path)
        third.get("response:before")
        assert third.notices == []  # the spool was emptied
        third.close()


def test_connection_errors_name_the_url_with_the_password_masked(tmp_path, monkeypatch):
    from tests.redis_server import free_port

    url = f"redis://user:s3cret-pass@127.0.0.1:{free_port()}/0"
    with pytest.raises(StoreError, match=r"redis://\*\*\*@127\.0\.0\.1:\d+/0 cannot be reached") as info:
        cache(url, tmp_path).get("response:x")
    assert "s3cret-pass" not in str(info.value)
    assert masked(url).startswith("redis://***@")
    # the password alone is a secret, not the user name (an ACL URL's is often "default")
    from pytest_llmbias.store.redis_store import url_secrets

    assert url_secrets("redis://default:S3cretPw@h/0") == ["S3cretPw"] and url_secrets("redis://h:6379/0") == []
    # a password in the query, which redis-py reads too
    url = f"redis://127.0.0.1:{free_port()}/0?password=qu3ry-secret&socket_timeout=5"
    assert masked(url) == url.replace("qu3ry-secret", "***")
    with pytest.raises(StoreError, match=r"\?password=\*\*\*&socket_timeout=5 cannot be reached") as info:
        cache(url, tmp_path).get("response:x")
    assert "qu3ry-secret" not in str(info.value)
    monkeypatch.delenv("NO_SUCH_REDIS_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match=r"\$NO_SUCH_REDIS_PASSWORD, which is not set"):
        password_of("NO_SUCH_REDIS_PASSWORD")


def test_a_password_from_the_environment_opens_a_protected_server(tmp_path, monkeypatch):
    with RedisServer(tmp_path / "r", extra={"requirepass": "team-pass-123"}) as server:
        monkeypatch.setenv("TEAM_REDIS_PASSWORD", "team-pass-123")
        ok = RedisCache(server.url, spool=tmp_path / "s", password=password_of("TEAM_REDIS_PASSWORD"))
        ok.set("response:x", {"a": 1})
        assert ok.get("response:x") == {"a": 1}
        ok.close()
        with pytest.raises(StoreError, match="refused the password|cannot be reached"):
            RedisCache(server.url, spool=tmp_path / "s", password="wrong").get("response:x")


def test_an_evicting_server_is_named_in_a_notice(tmp_path):
    with RedisServer(tmp_path / "r", extra={"maxmemory": "64mb", "maxmemory-policy": "allkeys-lru"}) as server:
        c = cache(server.url, tmp_path)
        c.get("response:x")
        assert any("maxmemory-policy allkeys-lru" in n and "noeviction" in n for n in c.notices)
        c.close()


def test_the_rpm_cap_is_one_schedule_for_every_process(url, tmp_path):
    a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
    one, two = SharedRateLimiter(a, "m", None, 1200), SharedRateLimiter(b, "m", None, 1200)  # one start per 50 ms

    async def starts() -> list[float]:
        out: list[float] = []

        async def go(limiter: SharedRateLimiter) -> None:
            for _ in range(10):
                await limiter.acquire()
                out.append(time.monotonic())

        await asyncio.gather(go(one), go(two))
        return sorted(out)

    times = asyncio.run(starts())
    assert times[-1] - times[0] >= 19 * 0.05 * 0.9  # 20 starts, one slot each: not 10 per limiter
    other = SharedRateLimiter(a, "another-model", None, 1200)
    t0 = time.monotonic()
    asyncio.run(other.acquire())
    assert time.monotonic() - t0 < 0.05  # each model has its own schedule


def test_a_throttle_in_one_process_makes_the_others_wait_out_its_retry_after(url, tmp_path):
    a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
    here, there = SharedRateLimiter(a, "m", None, 0), SharedRateLimiter(b, "m", None, 0)
    there.throttled(0.4)
    t0 = time.monotonic()
    asyncio.run(here.acquire())
    assert time.monotonic() - t0 >= 0.35  # waited out the Retry-After the other process was given


def test_the_adaptive_limit_is_one_value_for_every_process(url, tmp_path):
    a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
    mine, theirs = SharedAdaptiveLimit(a, "m", None, 16), SharedAdaptiveLimit(b, "m", None, 16)
    here = SharedRateLimiter(a, "m", None, 0, adaptive=mine)
    there = SharedRateLimiter(b, "m", None, 0, adaptive=theirs)

    async def attempt(limiter: SharedRateLimiter, adaptive: SharedAdaptiveLimit) -> int:
        await limiter.acquire()  # reads the shared value, as the client does before each attempt
        return await adaptive.acquire()

    e_mine, e_theirs = asyncio.run(attempt(here, mine)), asyncio.run(attempt(there, theirs))
    theirs.throttled(e_theirs)  # a 429 in the other process
    assert theirs.limit == 8
    asyncio.run(here.acquire())
    assert mine.limit == 8 and mine.throttles == 0  # read with its next start: not a throttle of its own
    mine.throttled(e_mine)  # this process's attempt of the same overload (started before the decrease)
    assert mine.limit == 8 and mine.throttles == 1 and mine.decreases == 0  # no second halving
    mine.release(e_mine), theirs.release(e_theirs)
    # a round of successes at 8, from both processes, raises the shared value by one
    for _ in range(4):
        for limiter, adaptive in ((here, mine), (there, theirs)):
            adaptive.release(asyncio.run(attempt(limiter, adaptive)), ok=True)
    asyncio.run(here.acquire()), asyncio.run(there.acquire())
    assert mine.limit == theirs.limit == 9
    # a new overload (an attempt started after the decrease) lowers it for both again
    theirs.throttled(asyncio.run(attempt(there, theirs)))
    asyncio.run(here.acquire())
    assert (mine.limit, theirs.limit) == (4, 4)  # halved for both, as a local limit at 9 would be
    assert mine.in_flight == 0 and theirs.in_flight == 1


def test_a_timeout_in_one_process_lowers_the_shared_limit_as_a_throttle_does(url, tmp_path):
    a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
    mine, theirs = SharedAdaptiveLimit(a, "slow-m", None, 16), SharedAdaptiveLimit(b, "slow-m", None, 16)
    here = SharedRateLimiter(a, "slow-m", None, 0, adaptive=mine)
    theirs.in_flight = 1
    theirs.overloaded(0, "timeout")  # a timed-out attempt in the other process
    assert (theirs.limit, theirs.stalls, theirs.throttles, theirs.reason) == (8, {"timeout": 1}, 0, "timeout")
    asyncio.run(here.acquire())
    assert mine.limit == 8  # read with this process's next start


def test_the_shared_limits_are_kept_per_endpoint(url, tmp_path, caplog):
    """Two servers of one model name have a quota each; the aliases of one endpoint (a model at an
    api_base) share it, in the session as in Redis."""
    from pytest_llmbias.config.settings import ModelSpec, Settings, StoreSettings
    from pytest_llmbias.session import BiasSession

    class Waited(Exception):
        pass

    waits: list[float] = []

    async def note(seconds: float) -> None:  # a wait asked for, not waited
        waits.append(seconds)
        raise Waited

    a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
    with caplog.at_level(logging.DEBUG, logger="pytest_llmbias.clients.shared_limits"):
        asyncio.run(SharedRateLimiter(a, "m", "http://one/v1", 1, sleep=note).acquire())  # one start a minute
    assert any(r.getMessage().startswith("start granted at ") for r in caplog.records)
    asyncio.run(SharedRateLimiter(b, "m", "http://two/v1", 1, sleep=note).acquire())  # another endpoint: at once
    assert waits == []
    with pytest.raises(Waited):  # the first endpoint, from another process: the next minute's start
        asyncio.run(SharedRateLimiter(b, "m", "http://one/v1", 1, sleep=note).acquire())
    assert len(waits) == 1 and waits[0] > 20

    one = ModelSpec("openai/m", "one", api_base="http://one/v1")
    session = BiasSession(
        Settings(
            target=one,
            baselines=(
                ModelSpec("openai/m", "alias-of-one", api_base="http://one/v1"),
                ModelSpec("openai/m", "two", api_base="http://two/v1"),
            ),
            store=StoreSettings(dir=tmp_path / "s", url=url),
        )
    )
    try:
        first, alias, other = (session.client(session.settings.model(x)) for x in ("one", "alias-of-one", "two"))
        assert first.limiter is alias.limiter and first.adaptive is alias.adaptive
        assert other.limiter is not first.limiter and other.adaptive.key != first.adaptive.key
        assert isinstance(first.adaptive, SharedAdaptiveLimit) and "http" not in first.adaptive.key
    finally:
        session.close()


def test_the_tpm_cap_counts_every_process_s_tokens(url, tmp_path):
    a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
    one, two = SharedTokenLimiter(a, "m", None, 100), SharedTokenLimiter(b, "m", None, 100)
    asyncio.run(one.acquire())
    one.spend(60)
    asyncio.run(two.acquire())  # 60 of 100: a call may start
    two.spend(60)

    async def blocked() -> bool:
        try:
            await asyncio.wait_for(one.acquire(), 1.2)
        except asyncio.TimeoutError:
            return True
        return False

    assert asyncio.run(blocked())  # 120 of 100 in the minute, spent by two processes


def test_rediss_with_the_team_s_ca_in_the_url_round_trips_the_records(tmp_path):
    certificates = ThrowawayCertificates.make(tmp_path / "tls")
    server = RedisServer(tmp_path / "r", tls=certificates)
    try:
        server.start()
    except RuntimeError as exc:
        if "tls" in str(exc).lower() or "bad directive" in str(exc).lower():
            pytest.skip(f"this redis-server build takes no TLS ({exc})")
        raise
    try:
        url = f"{server.url}?ssl_ca_certs={certificates.ca}"  # as the README tells
        assert url.startswith("rediss://127.0.0.1:")
        a, b = cache(url, tmp_path, "a"), cache(url, tmp_path, "b")
        a.set("response:k1", {"key": "k1", "text": "over TLS"})
        assert b.get("response:k1") == {"key": "k1", "text": "over TLS"}
        assert b.claim("k1", "b", 5) and not a.claim("k1", "a", 5)
        a.close(), b.close()
        # a server whose certificate no CA vouches for is not trusted
        with pytest.raises(StoreError, match="cannot be reached.*CERTIFICATE_VERIFY_FAILED"):
            cache(server.url, tmp_path, "c").get("response:k1")
    finally:
        server.stop()


#: what a process without redis-py meets: an ``import redis`` that fails
WITHOUT_REDIS_PY = "import sys\nsys.modules['redis'] = None\n"


def test_without_redis_py_the_store_and_its_commands_name_the_extra(tmp_path):
    from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
    from pytest_llmbias.store import write_snapshot
    from pytest_llmbias.store.calls import ModelCall, Response
    from tests.redis_server import free_port

    call = ModelCall.build(ModelSpec("openai/m", "m"), "Hello?", GenerationSettings())
    write_snapshot(
        tmp_path / "snap.jsonl",
        [
            Response(
                call=call,
                text="hi",
                finish_reason="stop",
                prompt_tokens=1,
                completion_tokens=1,
                latency_s=0.1,
                created=1.0,
            )
        ],
    )
    url = f"redis://127.0.0.1:{free_port()}/0"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMBIAS_", "PYTEST_"))}

    def python(code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", WITHOUT_REDIS_PY + code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    message = f"store.url names a Redis store, which needs redis-py: {EXTRA}"
    # the run's path: the store read before a call is made
    run = python(f"from pytest_llmbias.store import ResponseStore\nResponseStore('store', url={url!r}).get('k')\n")
    assert run.stderr.strip().splitlines()[-1] == f"pytest_llmbias.errors.ConfigError: {message}", run.stderr
    assert "ModuleNotFoundError" not in run.stderr
    command = python(
        "from pytest_llmbias.cli.command import main\n"
        f"raise SystemExit(main(['store', 'import', '--store', {url!r}, 'snap.jsonl']))\n"
    )
    assert command.returncode == 3 and f"llmbias: {message}" in command.stderr, command.stderr
    assert "Traceback" not in command.stderr
