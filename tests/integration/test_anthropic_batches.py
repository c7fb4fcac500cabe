"""Batch mode (``--llmbias-batch``) for ``anthropic/...`` models, against the scripted server's
Anthropic Message Batches API (tests/anthropic_batches.py): the verdicts of ordinary mode (litellm's
Anthropic client on the server's ``/v1/messages``) on the same answers, nothing submitted by a warm
re-run, a run that stops waiting or is killed resumed by the next without any line run twice, and
each line's fate read (a 400 inside an ended batch, an expired batch's requests sent again)."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from tests.integration._batches import Entry, chat_requests, kill_once_batched, serving, verdicts, write_project
from tests.integration._data import KEY_ENV
from tests.openai_server import OpenAIServer


@pytest.fixture
def server():
    with serving("anthropic") as s:
        yield s


def _root(server: OpenAIServer) -> str:
    return server.base_url.removesuffix("/v1")


def _anthropic(server: OpenAIServer) -> Entry:
    def entry(alias: str, name: str) -> dict:
        return {"model": f"anthropic/{name}", "alias": alias, "api_base": _root(server), "api_key_env": KEY_ENV}

    return entry


def _write(pytester: pytest.Pytester, server: OpenAIServer, **collection: object) -> None:
    write_project(pytester.path, _anthropic(server), **collection)


def test_batch_mode_reaches_ordinary_mode_s_verdicts_and_a_warm_rerun_submits_nothing(pytester, server, run_project):
    _write(pytester, server)
    ordinary = run_project()
    ordinary.assert_outcomes(passed=2)
    expected = verdicts(pytester.path)
    asked = len(server.requests)
    assert server.anthropic.counters()["messages"] == asked > 0  # litellm's client, on /v1/messages

    server.reset()
    shutil.rmtree(pytester.path / ".llmbias")
    _write(pytester, server, batch=True)
    batched = run_project()
    batched.assert_outcomes(passed=2)
    assert verdicts(pytester.path) == expected
    counts = server.anthropic.counters()
    assert chat_requests(server) == [] and counts["messages"] == 0
    assert counts["lines_executed"] == asked and max(counts["executed_by_custom_id"].values()) == 1
    assert counts["batches_created"] >= 2  # the answers, then the judge's ratings
    sent = counts["headers"][0]
    assert sent["x-api-key"] == "sk-integration-test" and sent["anthropic-version"] == "2023-06-01"
    assert server.batches.counters()["batches_created"] == 0  # nothing went to OpenAI's Batch API

    run_project().assert_outcomes(passed=2)
    assert server.anthropic.counters()["batches_created"] == counts["batches_created"]  # nothing submitted
    assert server.anthropic.counters()["lines_executed"] == asked


def test_a_run_that_stops_waiting_is_resumed_by_the_next_without_running_a_line_twice(pytester, server, run_project):
    server.anthropic.step = 0.5
    _write(pytester, server, batch=True, batch_wait=0.3)
    first = run_project()
    assert first.ret != 0
    first.stdout.fnmatch_lines(["*collection.batch_wait*"])
    assert server.anthropic.counters()["batches_created"] >= 1

    server.anthropic.step = 0.02
    _write(pytester, server, batch=True)
    run_project().assert_outcomes(passed=2)
    counts = server.anthropic.counters()
    assert max(counts["executed_by_custom_id"].values()) == 1, "a line was run twice"
    assert chat_requests(server) == []


@pytest.mark.parametrize(
    ("control", "value", "after"),
    [("step", 0.4, 0.02), ("hold_creates", 30.0, 0.0)],
    ids=["killed-while-polling", "killed-before-the-create-s-answer"],
)
def test_a_killed_run_s_batch_is_polled_by_the_next_not_sent_again(
    pytester, server, run_project, control, value, after
):
    """Killed while it polls its batches, or while its creates' answers are held back: then the
    journal holds the lines' keys and when each create was posted, not the batch's id (Anthropic's
    batch names no input file), and the next run finds the batches among the listed ones by their
    request count and time. Either way the next run polls them and no line runs twice."""
    setattr(server.anthropic, control, value)
    _write(pytester, server, batch=True)
    kill_once_batched(pytester.path, server.anthropic)
    assert server.anthropic.counters()["batches_created"] >= 1
    setattr(server.anthropic, control, after)
    run_project().assert_outcomes(passed=2)
    counts = server.anthropic.counters()
    assert max(counts["executed_by_custom_id"].values()) == 1, "a line of the killed run's batch was sent again"
    if control == "hold_creates":
        assert counts["lists"] >= 1  # looked for the killed run's batches before creating any


def test_every_line_s_fate_is_read(pytester, server, run_project):
    """A 400 inside an ended batch fails its call as an ordinary call's would; an expired batch's
    requests go out again in the next round; a 529 (overloaded) too."""
    server.script("tgt-model", {"status": 400, "body": {"error": {"message": "the prompt was refused"}}})
    server.script("base-a-model", {"status": 529})
    server.anthropic.expire_after = 5
    _write(pytester, server, batch=True, retries=2)
    result = run_project()
    counts = server.anthropic.counters()
    assert counts["batches_created"] >= 3
    assert max(counts["executed_by_custom_id"].values()) <= 2  # once, or once more after a 529
    out = result.stdout.str()
    assert "HTTP 400" in out and "the prompt was refused" in out


def test_a_create_whose_answer_was_lost_is_found_not_made_twice(pytester, server, run_project):
    server.anthropic.drop_creates = 1
    _write(pytester, server, batch=True)
    run_project().assert_outcomes(passed=2)
    counts = server.anthropic.counters()
    assert counts["lists"] >= 1
    assert max(counts["executed_by_custom_id"].values()) == 1


def test_an_endpoint_whose_batch_create_answers_404_is_called_one_by_one_said_once(pytester, server, run_project):
    """A gateway that passes Anthropic's messages on but has no Message Batches: the first create's
    404 sends every call of that endpoint, the judge's ratings of the next round included, through
    ``/v1/messages``, one warning says so, no batch is left journaled, and a warm re-run asks nothing."""
    server.anthropic.absent = True
    _write(pytester, server, batch=True)
    result = run_project()
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("has no batch API (POST /v1/messages/batches answered HTTP 404)") == 1, out
    counts = server.anthropic.counters()
    assert counts["batches_created"] == 0 and counts["messages"] > 0
    assert len(chat_requests(server)) == len(server.requests) == counts["messages"]
    # nothing journaled open: a warm re-run reads every answer from the store and polls nothing
    server.anthropic.reset_counters()
    run_project().assert_outcomes(passed=2)
    after = server.anthropic.counters()
    assert after["messages"] == after["polls"] == after["lists"] == 0


def test_the_api_translates_results_to_openai_s_output_lines(server):
    from pytest_llmbias.clients.anthropic_batch_api import AnthropicBatchAPI
    from pytest_llmbias.clients.batch_lines import fate
    from pytest_llmbias.store.batch_journal import OpenBatch

    server.script("m", {"status": 400, "body": {"error": {"message": "refused"}}}, {"status": 529})
    server.anthropic.expire_after = 4

    def line(i: int) -> bytes:
        body = {"model": "m", "max_tokens": 9, "system": "be brief", "messages": [{"role": "user", "content": f"q{i}"}]}
        return json.dumps(
            {"custom_id": f"id{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
        ).encode()

    async def go() -> tuple[dict, dict[str, dict]]:
        api = AnthropicBatchAPI(_root(server) + "/v1", {"anthropic-version": "2023-06-01"})
        try:
            file_id = await api.upload(b"\n".join(line(i) for i in range(6)) + b"\n", "part.jsonl")
            assert file_id.startswith("anthropic-file-") and server.anthropic.counters()["batches_created"] == 0
            batch = await api.create(file_id, {})
            while batch["status"] not in ("completed", "expired", "cancelled"):
                await asyncio.sleep(0.02)
                batch = await api.retrieve(batch["id"])
            raw = await api.content(batch["output_file_id"])
            assert [b["input_file_id"] for b in await api.listed()] == [file_id]
        finally:
            await api.aclose()
        return batch, {json.loads(t)["custom_id"]: json.loads(t) for t in raw.splitlines()}

    batch, lines = asyncio.run(go())
    assert batch["status"] == "completed" and batch["request_counts"] == {"total": 6, "completed": 2, "failed": 4}
    entry = OpenBatch(batch["id"], "f", "b", "m", "a", (), 0.0)
    fates = {cid: fate(result, batch["status"], entry) for cid, result in lines.items()}
    assert fates["id0"][1] is not None and fates["id0"][1].status == 400 and not fates["id0"][1].retryable
    assert fates["id1"][1] is not None and fates["id1"][1].status == 503 and fates["id1"][1].retryable
    answer = json.loads(fates["id2"][0] or b"{}")
    assert answer["choices"][0]["message"]["content"] == "m answers: q2"
    assert answer["choices"][0]["finish_reason"] == "stop" and answer["usage"]["prompt_tokens"] == 3
    assert fates["id5"][1] is not None and fates["id5"][1].retryable and "batch_expired" in str(fates["id5"][1])
    asked = [r for r in server.requests if r.get("custom_id") == "id2"][0]
    assert asked["messages"][0] == {"role": "system", "content": "be brief"}
