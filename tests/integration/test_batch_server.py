"""Fast tests of the scripted server's OpenAI Batch API (tests/batch_api.py), driven with plain httpx.

Everything talks to 127.0.0.1 only; each batch state takes a few milliseconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.openai_server import OpenAIServer

MODEL = "fake-model"
STEP = 0.01


@pytest.fixture(scope="module")
def _server_instance():
    with OpenAIServer(batch_step=STEP) as server:
        yield server


@pytest.fixture
def server(_server_instance):
    _server_instance.reset()
    _server_instance.batches.expire_after = None
    _server_instance.batches.chunk = None
    _server_instance.batches.max_lines, _server_instance.batches.max_bytes = 50_000, 200 * 1024 * 1024
    yield _server_instance
    _server_instance.reset()


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.base_url, timeout=5) as client:
        yield client


def _line(custom_id: str, prompt: str, model: str = MODEL, url: str = "/v1/chat/completions") -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0}
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


def _upload(http: httpx.Client, lines: list[dict]) -> dict:
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    resp = http.post("/files", data={"purpose": "batch"}, files={"file": ("input.jsonl", data)})
    assert resp.status_code == 200, resp.text
    return resp.json()


def _create(http: httpx.Client, file_id: str, **extra) -> dict:
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h", **extra}
    resp = http.post("/batches", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _submit(http: httpx.Client, n: int, prefix: str = "c") -> dict:
    return _create(http, _upload(http, [_line(f"{prefix}{i}", f"prompt {i}") for i in range(n)])["id"])


def _wait(http: httpx.Client, batch_id: str, until=("completed", "failed", "expired", "cancelled")) -> list[dict]:
    """Polls the batch until its status is one of ``until``; every object seen, in order."""
    seen = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        resp = http.get(f"/batches/{batch_id}")
        if resp.status_code == 200:
            seen.append(resp.json())
            if seen[-1]["status"] in until:
                return seen
        time.sleep(STEP / 2)
    raise AssertionError(f"batch {batch_id} still {seen[-1]['status'] if seen else '?'}")


def _read(http: httpx.Client, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    resp = http.get(f"/files/{file_id}/content")
    assert resp.status_code == 200
    return [json.loads(line) for line in resp.text.splitlines()]


def test_upload_create_poll_to_completed_with_shuffled_output(server, http):
    n = 30
    lines = [_line(f"c{i}", f"prompt {i}") for i in range(n)]
    uploaded = _upload(http, lines)
    assert uploaded["object"] == "file" and uploaded["purpose"] == "batch" and uploaded["id"].startswith("file-")
    assert uploaded["filename"] == "input.jsonl" and uploaded["bytes"] > 0
    assert http.get(f"/files/{uploaded['id']}").json() == uploaded
    assert http.get(f"/files/{uploaded['id']}/content").content.count(b"\n") == n

    created = _create(http, uploaded["id"], metadata={"suite": "nightly"})
    assert created["object"] == "batch" and created["id"].startswith("batch_")
    assert created["status"] == "validating" and created["errors"] is None
    assert created["output_file_id"] is None and created["error_file_id"] is None
    assert created["metadata"] == {"suite": "nightly"} and created["expires_at"] == created["created_at"] + 86400
    assert all(created[k] is None for k in ("in_progress_at", "completed_at", "failed_at", "cancelled_at"))

    seen = _wait(http, created["id"])
    statuses = [s["status"] for s in seen]
    assert statuses[-1] == "completed"
    assert statuses.index("in_progress") < statuses.index("finalizing") < statuses.index("completed")
    progress = [s["request_counts"]["completed"] for s in seen if s["status"] == "in_progress"]
    assert progress == sorted(progress) and len(set(progress)) > 2  # a few lines a step, seen growing
    done = seen[-1]
    assert done["request_counts"] == {"total": n, "completed": n, "failed": 0}
    assert done["error_file_id"] is None and done["in_progress_at"] and done["completed_at"]

    out = _read(http, done["output_file_id"])
    ids = [o["custom_id"] for o in out]
    assert sorted(ids) == sorted(f"c{i}" for i in range(n)) and ids != [f"c{i}" for i in range(n)]
    for o in out:
        assert o["id"].startswith("batch_req_") and o["error"] is None
        assert o["response"]["status_code"] == 200 and o["response"]["request_id"]
        i = o["custom_id"][1:]
        assert o["response"]["body"]["choices"][0]["message"]["content"] == f"{MODEL} answers: prompt {i}"
    assert http.get(f"/files/{done['output_file_id']}").json()["purpose"] == "batch_output"

    # the lines were answered, recorded and counted as chat requests would be
    assert server.count(MODEL) == n and server.requests[0]["batch"] == created["id"]
    assert server.counters()["ok"] == n
    counters = server.batches.counters()
    assert counters["files_uploaded"] == 1 and counters["batches_created"] == 1
    assert counters["lines_executed"] == n and set(counters["executed_by_custom_id"].values()) == {1}
    assert counters["polls"] == len(seen)


def test_scripted_steps_answer_the_lines_in_the_output_file(server, http):
    server.script(MODEL, {"content": "scripted!"}, {"status": 400}, {"status": 429}, {"drop": True})
    server.batches.chunk = 1  # in input order, one line a step: the script's steps go to c0..c3
    done = _wait(http, _submit(http, 5)["id"])[-1]
    assert done["status"] == "completed"
    assert done["request_counts"] == {"total": 5, "completed": 2, "failed": 3}
    out = {o["custom_id"]: o for o in _read(http, done["output_file_id"])}
    assert sorted(out) == ["c0", "c1", "c2", "c4"]
    assert out["c0"]["response"]["body"]["choices"][0]["message"]["content"] == "scripted!"
    for custom_id, status in (("c1", 400), ("c2", 429)):
        assert out[custom_id]["error"] is None  # as OpenAI reports it: the status is in the response
        assert out[custom_id]["response"]["status_code"] == status
        assert out[custom_id]["response"]["body"]["error"]["message"] == f"Scripted error {status}"
    errors = _read(http, done["error_file_id"])
    assert [(e["custom_id"], e["response"], e["error"]["code"]) for e in errors] == [("c3", None, "server_error")]


def test_expiry_puts_the_lines_not_run_in_the_error_file(server, http):
    server.batches.expire_after = 4
    done = _wait(http, _submit(http, 10)["id"])[-1]
    assert done["status"] == "expired" and done["expired_at"]
    assert done["request_counts"] == {"total": 10, "completed": 4, "failed": 0}
    assert len(_read(http, done["output_file_id"])) == 4
    errors = _read(http, done["error_file_id"])
    assert len(errors) == 6 and {e["error"]["code"] for e in errors} == {"batch_expired"}
    assert all(e["response"] is None for e in errors)
    assert server.batches.counters()["lines_executed"] == 4

    # one batch expired by hand, before any of its lines ran
    batch = _submit(http, 3, prefix="x")
    server.batches.expire(batch["id"], after=0)
    done = _wait(http, batch["id"])[-1]
    assert done["status"] == "expired" and done["output_file_id"] is None
    assert len(_read(http, done["error_file_id"])) == 3


def test_cancel_goes_cancelling_then_cancelled(server, http):
    server.batches.chunk = 1
    batch = _submit(http, 50)
    _wait(http, batch["id"], until=("in_progress",))
    time.sleep(STEP * 3)
    resp = http.post(f"/batches/{batch['id']}/cancel")
    assert resp.status_code == 200 and resp.json()["status"] == "cancelling" and resp.json()["cancelling_at"]
    done = _wait(http, batch["id"])[-1]
    assert done["status"] == "cancelled" and done["cancelled_at"]
    ran = _read(http, done["output_file_id"])
    cancelled = _read(http, done["error_file_id"])
    assert 0 < len(ran) < 50 and len(ran) + len(cancelled) == 50
    assert {e["error"]["code"] for e in cancelled} == {"batch_cancelled"}
    assert server.batches.counters()["lines_executed"] == len(ran)
    # a batch that has ended is not cancelled again
    assert http.post(f"/batches/{batch['id']}/cancel").status_code == 400


def test_a_vanished_batch_and_unknown_ids_are_404(server, http):
    batch = _submit(http, 3)
    assert http.get(f"/batches/{batch['id']}").status_code == 200
    server.batches.vanish(batch["id"])
    resp = http.get(f"/batches/{batch['id']}")
    assert resp.status_code == 404 and "message" in resp.json()["error"]
    assert http.post(f"/batches/{batch['id']}/cancel").status_code == 404
    assert http.get("/files/file-nope").status_code == 404
    assert http.get("/files/file-nope/content").status_code == 404
    resp = http.post("/batches", json={"input_file_id": "file-nope", "endpoint": "/v1/chat/completions",
                                       "completion_window": "24h"})  # fmt: skip
    assert resp.status_code == 404


def test_transient_500s_on_polls_then_the_batch(server, http):
    batch = _submit(http, 2)
    server.batches.fail_polls(2)
    assert [http.get(f"/batches/{batch['id']}").status_code for _ in range(3)] == [500, 500, 200]
    assert _wait(http, batch["id"])[-1]["status"] == "completed"


def test_a_batch_never_polled_runs_on_and_can_be_polled_later(server, http):
    server.batches.drop_creates = 1  # its creator dies before it hears the id
    file_id = _upload(http, [_line("only", "hi")])["id"]
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    with pytest.raises(httpx.TransportError):
        http.post("/batches", json=body)
    time.sleep(STEP * 8)
    assert server.batches.counters()["lines_executed"] == 1  # it ran, unpolled
    listed = http.get("/batches", params={"limit": 10}).json()
    assert listed["object"] == "list" and not listed["has_more"] and len(listed["data"]) == 1
    assert listed["data"][0]["status"] == "completed"
    assert _wait(http, listed["data"][0]["id"])[-1]["request_counts"]["completed"] == 1
    assert server.batches.counters()["polls"] == 1


def test_listing_pages_newest_first(server, http):
    ids = [_submit(http, 1, prefix=f"b{i}-")["id"] for i in range(3)]
    first = http.get("/batches", params={"limit": 2}).json()
    assert [b["id"] for b in first["data"]] == ids[::-1][:2] and first["has_more"]
    rest = http.get("/batches", params={"limit": 2, "after": first["last_id"]}).json()
    assert [b["id"] for b in rest["data"]] == [ids[0]] and not rest["has_more"]


@pytest.mark.parametrize(
    ("lines", "code"),
    [
        ([_line("a", "x"), _line("b", "y", model="other-model")], "mismatched_model"),
        ([_line("a", "x"), _line("a", "y")], "duplicate_custom_id"),
        ([_line("a", "x", url="/v1/embeddings")], "invalid_url"),
    ],
)
def test_validation_fails_the_batch(server, http, lines, code):
    done = _wait(http, _create(http, _upload(http, lines)["id"])["id"])[-1]
    assert done["status"] == "failed" and done["failed_at"] and done["in_progress_at"] is None
    assert [(e["code"], e["line"]) for e in done["errors"]["data"]] == [(code, 2 if len(lines) == 2 else 1)]
    assert server.count() == 0 and server.batches.counters()["lines_executed"] == 0


def test_limits_and_bad_creates(server, http):
    server.batches.max_lines = 2
    done = _wait(http, _submit(http, 3)["id"])[-1]
    assert done["status"] == "failed" and done["errors"]["data"][0]["code"] == "too_many_requests"
    server.batches.max_lines, server.batches.max_bytes = 50_000, 10
    done = _wait(http, _submit(http, 1)["id"])[-1]
    assert done["errors"]["data"][0]["code"] == "file_too_large"
    file_id = _upload(http, [_line("a", "x")])["id"]
    base = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    assert http.post("/batches", json={**base, "endpoint": "/v1/embeddings"}).status_code == 400
    assert http.post("/batches", json={**base, "completion_window": "1h"}).status_code == 400


def test_reset_forgets_batches_and_files(server, http):
    batch = _submit(http, 1)
    server.reset()
    assert http.get(f"/batches/{batch['id']}").status_code == 404
    assert http.get(f"/files/{batch['input_file_id']}").status_code == 404
    assert server.batches.counters()["batches_created"] == 0


def test_admin_routes_drive_a_server_in_another_process():
    script = Path(__file__).resolve().parents[1] / "openai_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--batch-step", str(STEP), "--batch-expire-after", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = proc.stdout.readline().split()[1]
        root = base_url[: -len("/v1")]
        with httpx.Client(base_url=base_url, timeout=5) as http:
            done = _wait(http, _submit(http, 3)["id"])[-1]
            assert done["status"] == "expired" and done["request_counts"]["completed"] == 1
            assert http.post(f"{root}/_admin/batches/config", json={"expire_after": None}).status_code == 200
            batch = _submit(http, 2, prefix="d")
            assert http.post(f"{root}/_admin/batches/fail_polls", params={"n": 1}).status_code == 200
            assert http.get(f"/batches/{batch['id']}").status_code == 500
            assert _wait(http, batch["id"])[-1]["status"] == "completed"
            assert http.post(f"{root}/_admin/batches/{batch['id']}/vanish").status_code == 200
            assert http.get(f"/batches/{batch['id']}").status_code == 404
            counters = http.get(f"{root}/_admin/batches").json()
            assert counters["lines_executed"] == 3 and counters["batches_created"] == 2
            assert counters["executed_by_custom_id"] == {"c0": 1, "d0": 1, "d1": 1}
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    assert proc.stderr.read() == ""
