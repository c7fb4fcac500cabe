"""Batch mode (``--llmbias-batch``) against the scripted server's OpenAI Batch API: the verdicts of
ordinary mode on the same answers, nothing submitted by a warm re-run, a run that stops waiting
resumed by the next without any line run twice, every line's fate read (a 4xx inside a completed
batch, an expired batch's lines sent again), and two machines on one Redis store running each line
once."""

from __future__ import annotations

import pytest

from tests.integration._batches import Entry, chat_requests, kill_once_batched, serving, start, verdicts, write_project
from tests.integration._data import entry
from tests.openai_server import OpenAIServer


@pytest.fixture
def server():
    with serving("batches") as s:
        yield s


def _openai(server: OpenAIServer) -> Entry:
    return lambda alias, name: entry(alias, name, server.base_url)


def _write(pytester: pytest.Pytester, server: OpenAIServer, **collection: object) -> None:
    write_project(pytester.path, _openai(server), **collection)


def test_batch_mode_reaches_ordinary_mode_s_verdicts_and_a_warm_rerun_submits_nothing(pytester, server, run_project):
    """Ordinary mode serially, then batch mode on a new store under pytest-xdist, then warm."""
    _write(pytester, server)
    ordinary = run_project()
    ordinary.assert_outcomes(passed=2)
    expected = verdicts(pytester.path)
    asked = len(server.requests)
    assert server.batches.counters()["batches_created"] == 0

    # the same answers, a new store, in batch mode
    server.reset()
    (pytester.path / "llmbias.yaml").unlink()
    import shutil

    shutil.rmtree(pytester.path / ".llmbias")
    _write(pytester, server, batch=True)
    batched = run_project("-n", "2")  # each worker batches its own gates' calls
    batched.assert_outcomes(passed=2)
    assert verdicts(pytester.path) == expected
    counts = server.batches.counters()
    # every call went by batch, each line once: the answers in one round, the judge's ratings in the next
    assert chat_requests(server) == []
    assert counts["lines_executed"] == asked and max(counts["executed_by_custom_id"].values()) == 1
    assert counts["batches_created"] >= 2

    warm = run_project()
    warm.assert_outcomes(passed=2)
    assert server.batches.counters()["batches_created"] == counts["batches_created"]  # nothing submitted
    assert server.batches.counters()["lines_executed"] == asked


def test_a_run_that_stops_waiting_is_resumed_by_the_next_without_running_a_line_twice(pytester, server, run_project):
    server.batches.step = 0.5  # a slow batch: the first run gives up before it ends
    _write(pytester, server, batch=True, batch_wait=0.3)
    first = run_project()
    assert first.ret != 0  # its gates have no answers yet
    first.stdout.fnmatch_lines(["*collection.batch_wait*"])
    created = server.batches.counters()["batches_created"]
    assert created >= 1

    server.batches.step = 0.02
    _write(pytester, server, batch=True)
    second = run_project()
    second.assert_outcomes(passed=2)
    counts = server.batches.counters()
    assert max(counts["executed_by_custom_id"].values()) == 1, "a line was run twice"
    assert chat_requests(server) == []


def test_every_line_s_fate_is_read(pytester, server, run_project):
    """A 400 inside a completed batch fails its call as an ordinary call would (the gate has no
    answer for it); an expired batch's lines are sent again in the next round."""
    server.script("tgt-model", {"status": 400, "body": {"error": {"message": "the prompt was refused"}}})
    server.batches.expire_after = 5  # the first batch expires after five lines
    _write(pytester, server, batch=True, retries=2)
    result = run_project()
    counts = server.batches.counters()
    assert counts["batches_created"] >= 3  # the answers, their expired rest again, the ratings
    assert max(counts["executed_by_custom_id"].values()) == 1
    out = result.stdout.str()
    assert "HTTP 400" in out and "the prompt was refused" in out


def test_a_create_whose_answer_was_lost_is_found_not_made_twice(pytester, server, run_project):
    """And the fingerprint probes stay ordinary calls: every chat request is a probe."""
    from pytest_llmbias.planning.probes import PROBES

    server.batches.drop_creates = 1  # the batch is made, the connection cut before its id arrives
    _write(pytester, server, batch=True, fingerprint=True)
    run_project().assert_outcomes(passed=2)
    chats = chat_requests(server)
    assert chats and {r["messages"][-1]["content"] for r in chats} <= set(PROBES)
    counts = server.batches.counters()
    assert counts["lists"] >= 1  # looked for the batch of its file before creating another
    assert max(counts["executed_by_custom_id"].values()) == 1


def test_a_killed_run_s_batch_is_polled_by_the_next_not_sent_again(pytester, server, run_project):
    server.batches.step = 0.4
    _write(pytester, server, batch=True)
    kill_once_batched(pytester.path, server.batches)
    created = server.batches.counters()["batches_created"]
    assert created >= 1
    server.batches.step = 0.02
    run_project().assert_outcomes(passed=2)
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
            write_project(folder, _openai(server), store_url=redis.url, batch=True)
            folders.append(folder)
        runs = [start(f) for f in folders]
        outputs = [r.communicate(timeout=180)[0] for r in runs]
    for out in outputs:
        assert " 2 passed" in out, out[-3000:]
    counts = server.batches.counters()
    assert max(counts["executed_by_custom_id"].values()) == 1, "two machines ran one line"
    assert chat_requests(server) == []


def test_store_batches_lists_and_cancels_a_run_s_open_batches(pytester, server, monkeypatch, run_project):
    from pytest_llmbias.cli.command import main

    server.batches.step = 1.0
    _write(pytester, server, batch=True, batch_wait=0.2)
    run_project()
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


def test_an_endpoint_with_no_batch_api_is_called_one_by_one(pytester, server, run_project):
    server.batches.absent = True  # POST /v1/files answers 404, as vLLM's server does
    _write(pytester, server, batch=True)
    result = run_project()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*has no batch API (POST /files answered HTTP 404)*one by one*"])
    assert server.batches.counters()["batches_created"] == 0
    assert len(chat_requests(server)) == len(server.requests) > 0
