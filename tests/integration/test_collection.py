"""End-to-end tests of response collection: each test runs pytest in a separate process
(``pytester.runpytest_subprocess``) against the scripted local OpenAI-compatible server in
tests/openai_server.py. Nothing leaves 127.0.0.1.

Each run's store lives in ``pytester.path / ".llmbias"`` and persists between the runs of one test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.openai_server import OpenAIServer

KEY_ENV = "LLMBIAS_IT_API_KEY"

#: alias -> model name as the server sees it (litellm strips the "openai/" prefix)
TARGET = "tgt"
BASELINES = ("base_a", "base_b")
MODELS = {"tgt": "tgt-model", "base_a": "base-a-model", "base_b": "base-b-model"}
TIBET_IDS = [f"cn-tib-{i:02d}" for i in range(1, 11)]

#: an inner test file: every response of the marker's models to the 10 Tibet questions is the
#: server's deterministic answer
MARKED_TEST = '''
import pytest

MODELS = {models!r}


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models={which!r})
def test_{name}(bias_responses):
    assert len(bias_responses) == {n}
    assert bias_responses.n_questions == 10
    for alias in bias_responses.aliases:
        for q in bias_responses.questions:
            assert bias_responses.text(alias, q.id) == f"{{MODELS[alias]}} answers: {{q.text}} [seed=0]"
'''


# -- fixtures and helpers -----------------------------------------------------------------------


@pytest.fixture
def server():
    with OpenAIServer(latency=0.02) as s:
        yield s


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-integration-test")
    for var in list(os.environ):
        if var.startswith("LLMBIAS_") and var != KEY_ENV:
            monkeypatch.delenv(var)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def write_config(pytester, server, **collection):
    def model(alias):
        return {"model": f"openai/{MODELS[alias]}", "alias": alias, "api_base": server.base_url, "api_key_env": KEY_ENV}

    config = {"target": model(TARGET), "baselines": [model(a) for a in BASELINES]}
    if collection:
        config["collection"] = collection
    # JSON is YAML
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config, indent=2), encoding="utf-8")


def write_marked_test(pytester, name="bias", which="all"):
    n = {"all": 30, "baselines": 20, "target": 10}[which]
    source = MARKED_TEST.format(models=MODELS, which=which, name=name, n=n)
    pytester.path.joinpath(f"test_{name}.py").write_text(source, encoding="utf-8")


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args, timeout=120)


def output(result) -> str:
    return "\n".join(result.outlines + result.errlines)


def requests_of(server, alias):
    return [r for r in server.requests if r["model"] == MODELS[alias]]


def prompt_of(request) -> str:
    return request["messages"][-1]["content"]


def stored_count(store_dir: Path) -> int:
    import diskcache

    with diskcache.Cache(str(store_dir / "responses")) as cache:
        return sum(1 for k in cache.iterkeys() if str(k).startswith("response:"))


# -- 1. happy path --------------------------------------------------------------------------------


def test_happy_path_asks_every_model_every_question_once(pytester, server):
    write_config(pytester, server)
    write_marked_test(pytester)

    result = run(pytester)

    result.assert_outcomes(passed=1)
    assert server.count() == 30
    for alias in (TARGET, *BASELINES):
        got = requests_of(server, alias)
        assert len(got) == 10
        assert len({prompt_of(r) for r in got}) == 10
        assert all(r["params"].get("seed") == 0 for r in got)
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 30 fetched, 0 failed, 0 missing*"])
    assert (pytester.path / ".llmbias").is_dir()


# -- 2. the store across runs and the cache modes -----------------------------------------------


def test_second_run_is_served_from_the_store_and_cache_modes(pytester, server):
    write_config(pytester, server)
    write_marked_test(pytester)
    run(pytester).assert_outcomes(passed=1)
    assert server.count() == 30

    again = run(pytester)
    again.assert_outcomes(passed=1)
    assert server.count() == 30
    again.stdout.fnmatch_lines(["llmbias: 30 calls: 30 from store, 0 fetched, 0 failed, 0 missing*"])

    refresh = run(pytester, "--llmbias-cache=refresh")
    refresh.assert_outcomes(passed=1)
    assert server.count() == 60
    refresh.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 30 fetched*"])

    shutil.rmtree(pytester.path / ".llmbias")
    off = run(pytester, "--llmbias-cache=off")
    off.assert_outcomes(passed=1)
    assert server.count() == 90
    assert not (pytester.path / ".llmbias").exists()


# -- 3. rate limits ---------------------------------------------------------------------------------


def test_429_with_retry_after_is_retried_after_waiting(pytester, server):
    write_config(pytester, server, retries=2, timeout=2)
    write_marked_test(pytester)
    server.script(MODELS[TARGET], *[{"status": 429, "headers": {"Retry-After": "1"}}] * 2)

    # concurrency 1: the first target question receives both 429s, then succeeds
    result = run(pytester, "--llmbias-concurrency=1")

    result.assert_outcomes(passed=1)
    assert server.count() == 32
    target = requests_of(server, TARGET)
    assert len(target) == 12
    first, second, third = target[:3]
    assert prompt_of(first) == prompt_of(second) == prompt_of(third)
    assert second["time"] - first["time"] >= 1.0
    assert third["time"] - second["time"] >= 1.0
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 30 fetched, 0 failed*"])


# -- 4. server errors -------------------------------------------------------------------------------


def test_one_500_is_retried(pytester, server):
    write_config(pytester, server, retries=2, timeout=2)
    write_marked_test(pytester)
    server.script(MODELS["base_a"], {"status": 500})

    result = run(pytester)

    result.assert_outcomes(passed=1)
    assert server.count() == 31
    assert len(requests_of(server, "base_a")) == 11


def test_persistent_500_fails_the_test_and_is_not_stored(pytester, server):
    write_config(pytester, server, retries=2, timeout=2)
    write_marked_test(pytester)
    # more 500s than retries + 1 = 3 attempts; concurrency 1 puts them all on the first question
    server.script(MODELS[TARGET], *[{"status": 500}] * 4)

    result = run(pytester, "--llmbias-concurrency=1")

    # the bias_responses fixture fails, so pytest reports an error at setup of the test
    result.assert_outcomes(errors=1)
    assert server.count() == 32  # 3 attempts for cn-tib-01, 1 for each of the 29 others
    text = output(result)
    assert "tgt: cn-tib-01" in text
    assert "HTTP 500" in text
    assert "gave up after 3 attempts" in text
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 29 fetched, 1 failed*"])
    failed_prompt = prompt_of(requests_of(server, TARGET)[0])

    # The failure was not stored: a later run (the server's last 500 cleared) asks exactly that call.
    server.reset()
    again = run(pytester)
    again.assert_outcomes(passed=1)
    assert server.count() == 1
    (only,) = server.requests
    assert only["model"] == MODELS[TARGET]
    assert prompt_of(only) == failed_prompt


# -- 5. timeouts ------------------------------------------------------------------------------------


def test_timeout_is_retried(pytester, server):
    write_config(pytester, server, retries=1, timeout=1)
    write_marked_test(pytester)
    server.script(MODELS[TARGET], {"delay": 5})

    result = run(pytester, "--llmbias-concurrency=1")

    result.assert_outcomes(passed=1)
    assert server.count() == 31


def test_timeout_on_every_attempt_fails_naming_the_question(pytester, server):
    write_config(pytester, server, retries=1, timeout=1)
    write_marked_test(pytester)
    server.script(MODELS[TARGET], {"delay": 5}, {"delay": 5})

    result = run(pytester, "--llmbias-concurrency=1")

    # the bias_responses fixture fails, so pytest reports an error at setup of the test
    result.assert_outcomes(errors=1)
    assert server.count() == 31
    text = output(result)
    assert "tgt: cn-tib-01" in text
    assert "1 call(s) failed" in text


# -- 6. malformed bodies ----------------------------------------------------------------------------


def test_malformed_body_is_retried(pytester, server):
    write_config(pytester, server, retries=2, timeout=2)
    write_marked_test(pytester)
    server.script(MODELS["base_b"], {"raw": "not json{"})

    result = run(pytester)

    result.assert_outcomes(passed=1)
    assert server.count() == 31
    assert len(requests_of(server, "base_b")) == 11


# -- 7. offline -------------------------------------------------------------------------------------


def test_offline_on_an_empty_store_fails_naming_what_is_missing(pytester, server):
    write_config(pytester, server)
    write_marked_test(pytester)

    result = run(pytester, "--llmbias-offline")

    result.assert_outcomes(errors=1)  # the fixture fails: an error at setup
    assert server.count() == 0
    text = output(result)
    assert "offline" in text
    for alias in (TARGET, *BASELINES):
        assert f"{alias}: cn-tib-01" in text
    assert "30 response(s)" in text
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 0 fetched, 0 failed, 30 missing*"])

    run(pytester).assert_outcomes(passed=1)
    assert server.count() == 30

    offline = run(pytester, "--llmbias-offline")
    offline.assert_outcomes(passed=1)
    assert server.count() == 30


# -- 8. snapshots -----------------------------------------------------------------------------------


def test_export_then_replay_a_snapshot_offline(pytester, server):
    write_config(pytester, server)
    write_marked_test(pytester)

    run(pytester, "--llmbias-export=snap.jsonl").assert_outcomes(passed=1)
    assert server.count() == 30
    lines = (pytester.path / "snap.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 30
    records = [json.loads(line) for line in lines]
    assert Counter(r["labels"]["alias"] for r in records) == {"tgt": 10, "base_a": 10, "base_b": 10}

    shutil.rmtree(pytester.path / ".llmbias")
    result = run(pytester, "--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
    result.assert_outcomes(passed=1)
    assert server.count() == 30


def test_baseline_snapshot_lets_a_teammate_query_only_the_target(pytester, server):
    write_config(pytester, server)
    write_marked_test(pytester, which="baselines")
    run(pytester, "--llmbias-export=baselines.jsonl").assert_outcomes(passed=1)
    assert server.count() == 20
    assert len((pytester.path / "baselines.jsonl").read_text(encoding="utf-8").splitlines()) == 20

    # A teammate with the committed snapshot and an empty store asks all models.
    shutil.rmtree(pytester.path / ".llmbias")
    (pytester.path / "test_bias.py").unlink()
    write_marked_test(pytester, which="all")
    baseline_counts = {a: len(requests_of(server, a)) for a in BASELINES}

    result = run(pytester, "--llmbias-snapshot=baselines.jsonl")

    result.assert_outcomes(passed=1)
    assert server.count() == 30
    assert len(requests_of(server, TARGET)) == 10
    assert {a: len(requests_of(server, a)) for a in BASELINES} == baseline_counts
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 20 from store, 10 fetched*"])


# -- 9. a killed collection resumes --------------------------------------------------------------


def test_killed_collection_resumes_with_only_the_missing_calls(pytester):
    with OpenAIServer(latency=0.5) as server:
        write_config(pytester, server)
        write_marked_test(pytester)
        log = (pytester.path / "killed.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--llmbias-concurrency=5"],
            cwd=pytester.path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while server.count() < 10 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert proc.poll() is None, "the run finished before it could be killed"
            assert server.count() >= 10
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
        time.sleep(1.0)  # requests in flight at the kill reach the server before n0 is read
        n0 = server.count()
        assert 10 <= n0 < 30
        stored = stored_count(pytester.path / ".llmbias")
        assert stored >= n0 - 5  # at most `concurrency` calls were sent but not stored

        result = run(pytester, "--llmbias-concurrency=5")
        result.assert_outcomes(passed=1)
        second = server.count() - n0
        assert second == 30 - stored
        assert second < 30
        assert second <= 30 - (n0 - 5)
        asked = Counter((r["model"], prompt_of(r)) for r in server.requests)
        assert len(asked) == 30
        assert sum(n - 1 for n in asked.values()) <= 5
        result.stdout.fnmatch_lines([f"llmbias: 30 calls: {stored} from store, {second} fetched, 0 failed*"])


# -- 10. pytest-xdist -------------------------------------------------------------------------------


def test_xdist_workers_share_one_collection(pytester, server):
    pytest.importorskip("xdist")
    write_config(pytester, server)
    write_marked_test(pytester, name="one")
    write_marked_test(pytester, name="two")

    result = run(pytester, "-n", "2")

    result.assert_outcomes(passed=2)
    assert server.count() == 30
    asked = Counter((r["model"], prompt_of(r)) for r in server.requests)
    assert len(asked) == 30 and set(asked.values()) == {1}


# -- 11. the llm_target fixture ---------------------------------------------------------------------


def test_llm_target_ask_goes_through_the_store(pytester, server):
    write_config(pytester, server)
    pytester.makepyfile(
        test_ask="""
        def test_ask(llm_target):
            assert llm_target.alias == "tgt"
            assert llm_target.ask("hello") == "tgt-model answers: hello [seed=0]"
        """
    )

    run(pytester).assert_outcomes(passed=1)
    assert server.count() == 1
    (request,) = server.requests
    assert request["model"] == "tgt-model" and prompt_of(request) == "hello"

    run(pytester).assert_outcomes(passed=1)
    assert server.count() == 1

    run(pytester, "--llmbias-offline").assert_outcomes(passed=1)
    assert server.count() == 1


def test_llm_target_aask_in_an_async_test(pytester, server):
    pytest.importorskip("anyio.pytest_plugin", reason="no async test runner (anyio's pytest plugin) installed")
    write_config(pytester, server)
    pytester.makepyfile(
        test_aask="""
        import pytest

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.mark.anyio
        async def test_aask(llm_target):
            assert await llm_target.aask("hi") == "tgt-model answers: hi [seed=0]"
            assert await llm_target.aask("hi") == "tgt-model answers: hi [seed=0]"
        """
    )

    run(pytester).assert_outcomes(passed=1)
    assert server.count() == 1
    run(pytester).assert_outcomes(passed=1)
    assert server.count() == 1
