"""End-to-end tests of response collection: each test runs pytest in a separate process
(``pytester.runpytest_subprocess``) against the scripted local OpenAI-compatible server in
tests/openai_server.py. Nothing leaves 127.0.0.1.

Each run's store lives in ``pytester.path / ".llmbias"`` and persists between the runs of one test.

The ``pytester`` fixture comes from ``-p pytester`` in pyproject.toml's addopts (``pytest_plugins``
in a conftest below the rootdir is an error when pytest is run from the repository root).
Fetching runs are few and merged where they can be: each one imports litellm (~3 s) and tears it
down at exit (~1.5 s).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.integration._data import BASELINES, MODELS, QUIET, TARGET, requests_of
from tests.openai_server import OpenAIServer

TIBET_IDS = [f"cn-tib-{i:02d}" for i in range(1, 11)]

#: an inner test file: every response of the marker's models to the 10 Tibet questions is the
#: server's deterministic answer
MARKED_TEST = """
import pytest

MODELS = {models!r}


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models={which!r})
def test_{name}(bias_responses):
    assert len(bias_responses) == {n}
    assert bias_responses.n_questions == 10
    for alias in bias_responses.aliases:
        for q in bias_responses.questions:
            assert bias_responses.text(alias, q.id) == f"{{MODELS[alias]}} answers: {{q.text}} [seed=0]"
"""


# -- helpers (the fixtures write_config and run_project are in conftest.py) ------------------------


def write_marked_test(pytester, name="bias", which="all"):
    n = {"all": 30, "baselines": 20, "target": 10}[which]
    source = MARKED_TEST.format(models=MODELS, which=which, name=name, n=n)
    pytester.path.joinpath(f"test_{name}.py").write_text(source, encoding="utf-8")


def output(result) -> str:
    return "\n".join(result.outlines + result.errlines)


def prompt_of(request) -> str:
    return request["messages"][-1]["content"]


def stored_count(store_dir: Path) -> int:
    """The answers in the store's database, once the journals of dead runs are written to it."""
    import diskcache

    from pytest_llmbias.store.disk import DiskCache

    store = DiskCache(store_dir / "responses")
    store.recover()
    store.close()
    with diskcache.Cache(str(store_dir / "responses")) as cache:
        return sum(1 for k in cache.iterkeys() if str(k).startswith("response:"))


# -- 1, 2. happy path, then the store across runs and the cache modes -----------------------------


def test_happy_path_then_store_refresh_and_off(pytester, server, write_config, run_project):
    write_config(server)
    write_marked_test(pytester)

    # 1. three models x ten questions: each asked once, the test sees the server's answers
    result = run_project()
    result.assert_outcomes(passed=1)
    assert server.count() == 30
    for alias in (TARGET, *BASELINES):
        got = requests_of(server, alias)
        assert len(got) == 10
        assert len({prompt_of(r) for r in got}) == 10
        assert all(r["params"].get("seed") == 0 for r in got)
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 30 fetched, 0 failed, 0 missing*"])
    assert (pytester.path / ".llmbias").is_dir()

    # 2. a second run is served from the store
    again = run_project()
    again.assert_outcomes(passed=1)
    assert server.count() == 30
    again.stdout.fnmatch_lines(["llmbias: 30 calls: 30 from store, 0 fetched, 0 failed, 0 missing*"])

    # refresh asks every model again
    refresh = run_project("--llmbias-cache=refresh")
    refresh.assert_outcomes(passed=1)
    assert server.count() == 60
    refresh.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 30 fetched*"])

    # off asks every model and writes nothing
    shutil.rmtree(pytester.path / ".llmbias")
    off = run_project("--llmbias-cache=off")
    off.assert_outcomes(passed=1)
    assert server.count() == 90
    assert not (pytester.path / ".llmbias").exists()


# -- 3. rate limits ---------------------------------------------------------------------------------


def test_an_rpm_cap_spaces_even_the_first_calls(pytester, server, write_config, run_project):
    """The first call imports litellm (seconds, blocking the event loop): it is imported before the
    first call takes its turn, so the calls behind it do not arrive together. Before that fix the
    second, third and fourth calls arrived within a millisecond of each other; and until the limiter
    granted each start when due, after the one before it, the first response's one-time work (0.2 s,
    over a second on a loaded machine) could still let two queued starts go together. The first two
    gaps are left out of the check: one-time work between a call's turn and its request (the first
    call's, and on a loaded machine the second's: 0.75 s and 0.25 s were seen) can bring it close to
    the next; every later gap is the limiter's 0.5 s, which a slow machine can only widen, and the
    eight calls from the third on span the limiter's seven intervals."""
    write_config(server, rpm=120)  # one start every 0.5 s
    write_marked_test(pytester, name="capped", which="target")
    run_project().assert_outcomes(passed=1)
    times = sorted(r["time"] for r in server.requests)
    assert len(times) == 10
    # neighbouring calls: the shifted copy is one shorter
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps[2:]) > 0.25, gaps
    assert times[-1] - times[2] > 7 * 0.5 * 0.9, gaps


def test_429_with_retry_after_is_retried_after_waiting(pytester, server, write_config, run_project):
    write_config(server, retries=2, timeout=2)
    write_marked_test(pytester)
    server.script(MODELS[TARGET], *[{"status": 429, "headers": {"Retry-After": "1"}}] * 2)

    # concurrency 1: the first target question receives both 429s, then succeeds
    result = run_project("--llmbias-concurrency=1")

    result.assert_outcomes(passed=1)
    assert server.count() == 32
    target = requests_of(server, TARGET)
    assert len(target) == 12
    first, second, third = target[:3]
    assert prompt_of(first) == prompt_of(second) == prompt_of(third)
    # lower bounds: Retry-After was honoured (not a speed assertion)
    assert second["time"] - first["time"] >= 1.0
    assert third["time"] - second["time"] >= 1.0
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 30 fetched, 0 failed*"])


# -- 4, 5, 6. transient failures are retried ---------------------------------------------------------


def test_one_500_one_timeout_one_malformed_body_are_each_retried(pytester, server, write_config, run_project):
    write_config(server, retries=1, timeout=1)
    write_marked_test(pytester)
    server.script(MODELS[TARGET], {"delay": 5})  # longer than the 1 s timeout
    server.script(MODELS["base_a"], {"status": 500})
    server.script(MODELS["base_b"], {"raw": "not json{"})

    # concurrency 1: each model's first question takes its model's scripted failure
    result = run_project("--llmbias-concurrency=1")

    result.assert_outcomes(passed=1)
    assert server.count() == 33
    for alias in (TARGET, *BASELINES):
        got = requests_of(server, alias)
        assert len(got) == 11, alias
        assert prompt_of(got[0]) == prompt_of(got[1]), alias  # the retry is of the same question
        assert len({prompt_of(r) for r in got}) == 10, alias
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 30 fetched, 0 failed*"])


# -- 4, 5. persistent failures fail the test and are not stored ------------------------------------


def test_persistent_500_and_timeout_fail_the_test_and_are_not_stored(pytester, server, write_config, run_project):
    write_config(server, retries=1, timeout=1)
    write_marked_test(pytester)
    # more 500s than retries + 1 = 2 attempts, and a timeout on every attempt; concurrency 1 puts
    # them on each model's first question (the third 500 hits the target's second question, which
    # then succeeds)
    server.script(MODELS[TARGET], *[{"status": 500}] * 3)
    server.script(MODELS["base_a"], {"delay": 5}, {"delay": 5})

    result = run_project("--llmbias-concurrency=1")

    # the bias_responses fixture fails, so pytest reports an error at setup of the test
    result.assert_outcomes(errors=1)
    assert server.count() == 33
    assert len(requests_of(server, TARGET)) == 12
    assert len(requests_of(server, "base_a")) == 11
    text = output(result)
    assert "2 response(s) for domain 'china_sensitive' are missing (2 call(s) failed)" in text
    assert "tgt: cn-tib-01" in text
    assert "base_a: cn-tib-01" in text
    assert "HTTP 500" in text
    assert "gave up after 2 attempts" in text
    assert "model 'base_a'" in text
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 28 fetched, 2 failed*"])
    failed = {(r["model"], prompt_of(r)) for r in (requests_of(server, TARGET)[0], requests_of(server, "base_a")[0])}

    # Failures were not stored: a later run (scripts cleared) asks exactly those two calls.
    server.reset()
    again = run_project()
    again.assert_outcomes(passed=1)
    assert server.count() == 2
    assert {(r["model"], prompt_of(r)) for r in server.requests} == failed
    again.stdout.fnmatch_lines(["llmbias: 30 calls: 28 from store, 2 fetched, 0 failed*"])


# -- 7, 8. offline, the store and snapshots ----------------------------------------------------


def test_offline_then_export_and_replay_a_snapshot(pytester, server, write_config, run_project):
    write_config(server)
    write_marked_test(pytester)

    # 7. offline on an empty store: the test fails naming every model and question, nothing is asked
    result = run_project("--llmbias-offline")
    result.assert_outcomes(errors=1)  # the bias_responses fixture fails: an error at setup
    assert server.count() == 0
    text = output(result)
    assert "30 response(s) for domain 'china_sensitive' are missing (offline mode" in text
    for alias in (TARGET, *BASELINES):
        assert f"{alias}: cn-tib-01, cn-tib-02" in text
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 0 from store, 0 fetched, 0 failed, 30 missing*"])

    # 8. an online run exports the responses it used
    run_project("--llmbias-export=snap.jsonl").assert_outcomes(passed=1)
    assert server.count() == 30
    lines = (pytester.path / "snap.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 30
    records = [json.loads(line) for line in lines]
    assert Counter(r["labels"]["alias"] for r in records) == {"tgt": 10, "base_a": 10, "base_b": 10}
    assert {r["labels"]["question"] for r in records} == set(TIBET_IDS)

    # 7. offline after an online run: served from the store
    offline = run_project("--llmbias-offline")
    offline.assert_outcomes(passed=1)
    assert server.count() == 30

    # 8. no store, only the snapshot: served from the snapshot
    shutil.rmtree(pytester.path / ".llmbias")
    replay = run_project("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
    replay.assert_outcomes(passed=1)
    assert server.count() == 30
    replay.stdout.fnmatch_lines(["llmbias: 30 calls: 30 from store, 0 fetched, 0 failed, 0 missing*"])


def test_baseline_snapshot_lets_a_teammate_query_only_the_target(pytester, server, write_config, run_project):
    write_config(server)
    write_marked_test(pytester, which="baselines")
    run_project("--llmbias-export=baselines.jsonl").assert_outcomes(passed=1)
    assert server.count() == 20
    assert len((pytester.path / "baselines.jsonl").read_text(encoding="utf-8").splitlines()) == 20

    # A teammate with the committed snapshot and an empty store asks all models.
    shutil.rmtree(pytester.path / ".llmbias")
    (pytester.path / "test_bias.py").unlink()
    write_marked_test(pytester, which="all")
    baseline_counts = {a: len(requests_of(server, a)) for a in BASELINES}

    result = run_project("--llmbias-snapshot=baselines.jsonl")

    result.assert_outcomes(passed=1)
    assert server.count() == 30
    assert len(requests_of(server, TARGET)) == 10
    assert {a: len(requests_of(server, a)) for a in BASELINES} == baseline_counts
    result.stdout.fnmatch_lines(["llmbias: 30 calls: 20 from store, 10 fetched*"])


# -- 9. a killed collection resumes --------------------------------------------------------------


def kill_mid_collection(pytester: pytest.Pytester, server: OpenAIServer, *, calls: int, concurrency: int) -> None:
    """Run the project's pytest in a process of its own at ``concurrency`` and SIGKILL it once
    ``server`` has received ``calls`` requests (it must still be running then); its output goes to
    ``killed.log``."""
    log = (pytester.path / "killed.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, f"--llmbias-concurrency={concurrency}"],
        cwd=pytester.path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while server.count() < calls and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        assert server.count() >= calls
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def test_killed_collection_resumes_with_only_the_missing_calls(pytester, write_config, run_project):
    with OpenAIServer(latency=0.5) as server:
        write_config(server)
        write_marked_test(pytester)
        kill_mid_collection(pytester, server, calls=10, concurrency=5)
        time.sleep(0.5)  # requests in flight at the kill reach the server before n0 is read
        n0 = server.count()
        assert 10 <= n0 < 30
        assert list((pytester.path / ".llmbias" / "responses").glob("journal-*.log"))  # the killed run's
        stored = stored_count(pytester.path / ".llmbias")
        assert stored >= n0 - 5  # at most `concurrency` calls were sent but not stored

        result = run_project("--llmbias-concurrency=5")
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


def test_xdist_workers_share_one_collection(pytester, server, write_config, run_project):
    pytest.importorskip("xdist")
    write_config(server)
    write_marked_test(pytester, name="one")
    write_marked_test(pytester, name="two")

    result = run_project("-n", "2", "-v")

    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random(["*gw0*PASSED*", "*gw1*PASSED*"])  # one test on each worker
    assert server.count() == 30
    asked = Counter((r["model"], prompt_of(r)) for r in server.requests)
    assert len(asked) == 30 and set(asked.values()) == {1}


# -- 11. the llm_target fixture ---------------------------------------------------------------------


ASK_TEST = """
def test_ask(llm_target):
    assert llm_target.alias == "tgt"
    assert llm_target.ask("hello") == "tgt-model answers: hello [seed=0]"
    assert llm_target.ask("hello") == "tgt-model answers: hello [seed=0]"
"""

#: pytest-asyncio is not installed; anyio's pytest plugin (installed with litellm's httpx) runs it
AASK_TEST = """
import pytest

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
async def test_aask(llm_target):
    assert await llm_target.aask("hi") == "tgt-model answers: hi [seed=0]"
"""


def _has_anyio_plugin() -> bool:
    try:
        import anyio.pytest_plugin  # noqa: F401
    except ImportError:
        return False
    return True


def test_llm_target_ask_and_aask_go_through_the_store(pytester, server, write_config, run_project):
    write_config(server)
    pytester.path.joinpath("test_ask.py").write_text(ASK_TEST, encoding="utf-8")
    expected = {("tgt-model", "hello")}
    if _has_anyio_plugin():
        pytester.path.joinpath("test_aask.py").write_text(AASK_TEST, encoding="utf-8")
        expected.add(("tgt-model", "hi"))
    n = len(expected)

    run_project().assert_outcomes(passed=n)
    assert server.count() == n
    assert {(r["model"], prompt_of(r)) for r in server.requests} == expected

    run_project().assert_outcomes(passed=n)
    assert server.count() == n

    run_project("--llmbias-offline").assert_outcomes(passed=n)
    assert server.count() == n
    if not _has_anyio_plugin():
        pytest.skip("the async part needs an async test runner (pytest-asyncio or anyio): sync part passed")


# -- 12. dependent calls: the stance gate's opposing phase ------------------------------------------


STANCE_TEST = """
import pytest

@pytest.mark.bias_stance("choices", rounds=2, gate="sycophancy")
def test_stance(bias_result):
    assert bias_result.rounds == 2
"""


def test_the_opposing_phase_is_asked_once_the_initial_rounds_are_in(pytester, server, write_config, run_project):
    """The server answers each prompt with a sentence (an explainer: b = 0), so every opposing
    prompt states 'No'; each phase asks every model 6 questions x 2 rounds, each call once. A model
    that answers no question with a yes or a no gets no verdict: the gate is inconclusive."""
    from tests.plugin._data import CHOICES

    write_config(server)
    config = pytester.path / "llmbias.yaml"
    config.write_text(config.read_text().rstrip().rstrip("}") + ', "domains": {"paths": ["domains"]}}')
    (pytester.path / "domains").mkdir()
    (pytester.path / "domains" / "choices.yaml").write_text(CHOICES)
    pytester.path.joinpath("test_stance.py").write_text(STANCE_TEST)

    result = run_project()

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*INCONCLUSIVE*", "*tgt does not follow the instruction: 0 of its 12 answers give a yes or a no*"]
    )
    prompts = [prompt_of(r) for r in server.requests]
    initial = [p for p in prompts if "I think the answer is" not in p]
    opposing = [p for p in prompts if "I think the answer is 'No'." in p]
    assert len(initial) == len(opposing) == 3 * 6 * 2 and len(prompts) == 72
    assert (
        len(set(zip(prompts, (r["model"] for r in server.requests), strict=True))) == 72 // 2
    )  # 2 rounds: seeds differ
    assert Counter(r["params"].get("seed") for r in server.requests) == {0: 36, 1: 36}
    result.stdout.fnmatch_lines(["llmbias: 72 calls: 0 from store, 72 fetched, 0 failed, 0 missing*"])
