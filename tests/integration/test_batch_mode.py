"""Batch mode (``--llmbias-batch``) against the scripted server's OpenAI Batch API: the verdicts of
ordinary mode on the same answers, nothing submitted by a warm re-run, a run that stops waiting
resumed by the next without any line run twice, every line's fate read (a 4xx inside a completed
batch, an expired batch's lines sent again), and two machines on one Redis store running each line
once."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.integration._data import QUIET, entry as entry_for
from tests.openai_server import OpenAIServer, _anchor_scores, _rated_answer

JUDGE = "batch-judge"
BASELINES = {"base_a": "base-a-model", "base_b": "base-b-model", "base_c": "base-c-model"}

TESTS = """
import pytest


@pytest.mark.bias_equivalent("us_politics", method="judge", categories=["gun_policy", "immigration"])
def test_guns(bias_result):
    pass


@pytest.mark.bias_equivalent("china_sensitive", method="judge", categories=["tibet", "taiwan_status"])
def test_tibet(bias_result):
    pass
"""


def judge(prompt: str, payload: dict) -> str:
    """5 ± 2 by a draw fixed by the rated answer; the domains' anchors as their rubric says."""
    answer = _rated_answer(prompt) or ""
    anchor = _anchor_scores().get(answer)
    if anchor is not None:
        return f"Bias Score: {anchor}\nExplanation: the anchor."
    draw = int(hashlib.sha256(answer.encode()).hexdigest()[:8], 16) % 5 - 2
    return f"Bias Score: {5 + draw}\nExplanation: a scripted rating."


@pytest.fixture
def server():
    with OpenAIServer(latency=0.0, responders={JUDGE: judge}) as s:
        s.batches.step = 0.02
        yield s


def _write(pytester: pytest.Pytester, server: OpenAIServer, **collection: object) -> None:
    def model(alias: str, name: str) -> dict:
        return entry_for(alias, name, server.base_url)

    config = {
        "target": model("tgt", "tgt-model"),
        "judge": model("judge", JUDGE),
        "baselines": [model(a, n) for a, n in BASELINES.items()],
        "collection": {"fingerprint": False, "max_samples": 1, **collection},
        "report": {"json": "out/run.json"},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_suite.py").write_text(TESTS, encoding="utf-8")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*QUIET, "-rA", *args)


def _verdicts(pytester: pytest.Pytester) -> dict[str, str]:
    gates = json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))["gates"]
    return {g["test"].rsplit("::", 1)[1]: g["verdict"] for g in gates}


def _chat_requests(server: OpenAIServer) -> list[dict]:
    return [r for r in server.requests if not r.get("batch")]


def test_batch_mode_reaches_ordinary_mode_s_verdicts_and_a_warm_rerun_submits_nothing(pytester, server):
    """Ordinary mode serially, then batch mode on a new store under pytest-xdist, then warm."""
    _write(pytester, server)
    ordinary = _run(pytester)
    ordinary.assert_outcomes(passed=2)
    expected = _verdicts(pytester)
    asked = len(server.requests)
    assert server.batches.counters()["batches_created"] == 0

    # the same answers, a new store, in batch mode
    server.reset()
    (pytester.path / "llmbias.yaml").unlink()
    import shutil

    shutil.rmtree(pytester.path / ".llmbias")
    _write(pytester, server, batch=True)
    batched = _run(pytester, "-n", "2")  # each worker batches its own gates' calls
    batched.assert_outcomes(passed=2)
    assert _verdicts(pytester) == expected
    counts = server.batches.counters()
    # every call went by batch, each line once: the answers in one round, the judge's ratings in the next
    assert _chat_requests(server) == []
    assert counts["lines_executed"] == asked and max(counts["executed_by_custom_id"].values()) == 1
    assert counts["batches_created"] >= 2

    warm = _run(pytester)
    warm.assert_outcomes(passed=2)
    assert server.batches.counters()["batches_created"] == counts["batches_created"]  # nothing submitted
    assert server.batches.counters()["lines_executed"] == asked


def test_a_run_that_stops_waiting_is_resumed_by_the_next_without_running_a_line_twice(pytester, server):
    server.batches.step = 0.5  # a slow batch: the first run gives up before it ends
    _write(pytester, server, batch=True, batch_wait=0.3)
    first = _run(pytester)
    assert first.ret != 0  # its gates have no answers yet
    first.stdout.fnmatch_lines(["*collection.batch_wait*"])
    created = server.batches.counters()["batches_created"]
    assert created >= 1

    server.batches.step = 0.02
    _write(pytester, server, batch=True)
    second = _run(pytester)
    second.assert_outcomes(passed=2)
    counts = server.batches.counters()
    assert max(counts["executed_by_custom_id"].values()) == 1, "a line was run twice"
    assert _chat_requests(server) == []


def test_every_line_s_fate_is_read(pytester, server):
    """A 400 inside a completed batch fails its call as an ordinary call would (the gate has no
    answer for it); an expired batch's lines are sent again in the next round."""
    server.script("tgt-model", {"status": 400, "body": {"error": {"message": "the prompt was refused"}}})
    server.batches.expire_after = 5  # the first batch expires after five lines
    _write(pytester, server, batch=True, retries=2)
    result = _run(pytester)
    counts = server.batches.counters()
    assert counts["batches_created"] >= 3  # the answers, their expired rest again, the ratings
    assert max(counts["executed_by_custom_id"].values()) == 1
    out = result.stdout.str()
    assert "HTTP 400" in out and "the prompt was refused" in out


def test_a_create_whose_answer_was_lost_is_found_not_made_twice(pytester, server):
    """And the fingerprint probes stay ordinary calls: every chat request is a probe."""
    from pytest_llmbias.planning.probes import PROBES

    server.batches.drop_creates = 1  # the batch is made, the connection cut before its id arrives
    _write(pytester, server, batch=True, fingerprint=True)
    _run(pytester).assert_outcomes(passed=2)
    chats = _chat_requests(server)
    assert chats and {r["messages"][-1]["content"] for r in chats} <= set(PROBES)
    counts = server.batches.counters()
    assert counts["lists"] >= 1  # looked for the batch of its file before creating another
    assert max(counts["executed_by_custom_id"].values()) == 1


def _start(folder, *args: str):
    import os
    import subprocess
    import sys

    from tests.integration._data import KEY_ENV

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMBIAS_", "PYTEST_"))}
    env[KEY_ENV] = "sk-batch-test"
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, "-p", "no:randomly", *args],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_killed_run_s_batch_is_polled_by_the_next_not_sent_again(pytester, server):
    import signal
    import time

    server.batches.step = 0.4
    _write(pytester, server, batch=True)
    first = _start(pytester.path)
    try:
        deadline = time.monotonic() + 60
        while server.batches.counters()["batches_created"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # journaled, polling
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    created = server.batches.counters()["batches_created"]
    assert created >= 1
    server.batches.step = 0.02
    _run(pytester).assert_outcomes(passed=2)
    counts = server.batches.counters()
    assert max(counts["executed_by_custom_id"].values()) == 1, "a line of the killed run's batch was sent again"


def test_two_machines_on_one_redis_submit_each_line_once(tmp_path, server):
    pytest.importorskip("redis", reason="the team store needs redis-py (pytest-llmbias[redis])")
    from tests.redis_server import RedisServer

    with RedisServer(tmp_path / "redis") as redis:
        folders = []
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            config = {
                "target": entry_for("tgt", "tgt-model", server.base_url),
                "judge": entry_for("judge", JUDGE, server.base_url),
                "baselines": [entry_for(a, n, server.base_url) for a, n in BASELINES.items()],
                "store": {"url": redis.url},
                "collection": {"fingerprint": False, "max_samples": 1, "batch": True},
            }
            (folder / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
            (folder / "test_suite.py").write_text(TESTS, encoding="utf-8")
            folders.append(folder)
        runs = [_start(f) for f in folders]
        outputs = [r.communicate(timeout=180)[0] for r in runs]
    for out in outputs:
        assert " 2 passed" in out, out[-3000:]
    counts = server.batches.counters()
    assert max(counts["executed_by_custom_id"].values()) == 1, "two machines ran one line"
    assert _chat_requests(server) == []


def test_store_batches_lists_and_cancels_a_run_s_open_batches(pytester, server, monkeypatch):
    from pytest_llmbias.cli.command import main

    server.batches.step = 1.0
    _write(pytester, server, batch=True, batch_wait=0.2)
    _run(pytester)
    monkeypatch.chdir(pytester.path)
    import io

    listed = io.StringIO()
    assert main(["store", "batches"], out=listed) == 0
    lines = listed.getvalue().splitlines()
    assert lines and all(" calls " in line for line in lines), lines
    batch_id = lines[0].split()[0]
    assert server.batches.batch(batch_id) is not None
    cancelled = io.StringIO()
    assert main(["store", "batches", "--cancel-all"], out=cancelled) == 0
    assert "cancelled (cancelling)" in cancelled.getvalue() or "cancelled (cancelled)" in cancelled.getvalue()
    after = io.StringIO()
    assert main(["store", "batches"], out=after) == 0
    assert "no open batch" in after.getvalue()
    assert main(["store", "batches", "--cancel", "batch_nope"], out=io.StringIO()) == 0  # nothing open: nothing to do


def test_an_endpoint_with_no_batch_api_is_called_one_by_one(pytester, server):
    server.batches.absent = True  # POST /v1/files answers 404, as vLLM's server does
    _write(pytester, server, batch=True)
    result = _run(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*has no Batch API (POST /files answered HTTP 404)*one by one*"])
    assert server.batches.counters()["batches_created"] == 0
    assert len(_chat_requests(server)) == len(server.requests) > 0
