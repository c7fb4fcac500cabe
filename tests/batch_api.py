"""OpenAI's Batch API (``/v1/files`` and ``/v1/batches``) on the scripted server of ``openai_server.py``.

Every ``OpenAIServer`` serves it, as ``server.batches`` (a :class:`BatchAPI`). A batch line for model M
gets the answer ``POST /v1/chat/completions`` with the line's body would get: the same scripted steps,
taken in the order the lines run, and recorded in ``server.requests`` (with ``batch`` and
``custom_id``) and the server's counters like a chat request.

- ``POST /v1/files`` (multipart: ``purpose=batch``, ``file``) -> a file object; ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content`` (the bytes), ``DELETE /v1/files/{id}``; 404 for an unknown id.
- ``POST /v1/batches`` (``input_file_id``, ``endpoint`` "/v1/chat/completions", ``completion_window``
  "24h", ``metadata``) -> a batch object, ``validating``; 400 for another endpoint or window, or a file
  not uploaded for ``batch``; 404 for an unknown file. ``GET /v1/batches/{id}``; ``GET /v1/batches
  ?limit=&after=`` (newest first); ``POST /v1/batches/{id}/cancel``.
- The server moves each batch on by itself, polled or not, one state every ``step`` seconds:
  ``validating`` -> ``in_progress`` (``chunk`` lines run a step; default a tenth of the batch) ->
  ``finalizing`` -> ``completed``. Validation fails the batch (``failed``, ``errors.data[]`` with the
  line) on a line that is not JSON or lacks ``custom_id``, ``method`` POST or a body with a model, a
  duplicate ``custom_id``, a url other than the batch's endpoint, more than one model in the file, more
  than ``max_lines`` lines or ``max_bytes`` bytes (OpenAI's 50,000 and 200 MB).
- A batch that expires (after ``expire_after`` lines) goes ``expired``; a cancelled one ``cancelling``,
  then ``cancelled`` a step later. Neither runs another line.
- The output file (``output_file_id``) holds one line per request that ran, in shuffled order, with
  ``response.status_code`` and ``response.body``: a scripted 4xx or 5xx is there too, with ``"error":
  null``. The error file (``error_file_id``) holds the lines that got no response: ``batch_expired``,
  ``batch_cancelled``, or ``server_error`` for a scripted ``{"drop": True}``. Either id is null when
  its file would be empty. ``request_counts``: ``completed`` (status 200), ``failed`` (other statuses
  and dropped lines); lines that never ran count in neither.

Test controls (Python, and ``/_admin/batches/...`` for a server in another process)::

    server.batches.expire_after = 3          # POST /_admin/batches/config {"expire_after": 3, "step": .., "chunk": ..}
    server.batches.expire(batch_id, after=0) # POST /_admin/batches/{id}/expire?after=0  (after: lines run in all)
    server.batches.vanish(batch_id)          # POST /_admin/batches/{id}/vanish  (404 from then on; it stops)
    server.batches.fail_polls(2)             # POST /_admin/batches/fail_polls?n=2[&batch=ID]: the next polls 500
    server.batches.drop_creates = 1          # the next POST /v1/batches creates its batch, then cuts the line
    server.batches.hold_creates = 5.0        # a create's answer waits 5 s after its batch is made
    server.batches.absent = True             # POST /v1/files answers 404: an endpoint with no Batch API
    server.batches.counters()                # GET /_admin/batches: files uploaded, batches created, lines run
                                             #   (in all and per custom_id), polls served, lists served
    server.batches.reset()                   # POST /_admin/batches/reset: forget every file and batch
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

if __package__:
    from .scripted_batches import ScriptedBatches
else:  # imported by openai_server.py run as a script, from the tests folder
    from scripted_batches import ScriptedBatches  # type: ignore[no-redef]

if TYPE_CHECKING:
    from tests.openai_server import OpenAIServer

ENDPOINT = "/v1/chat/completions"
TERMINAL = frozenset({"failed", "completed", "expired", "cancelled"})
_EXPIRED = "This request could not be executed before the completion window expired."
_CANCELLED = "This request was not executed: the batch was cancelled."


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> web.Response:
    etype = "invalid_request_error" if status < 500 else "server_error"
    error = {"message": message, "type": etype, "param": param, "code": code}
    return web.json_response({"error": error}, status=status)


@dataclass
class _File:
    id: str
    data: bytes
    filename: str
    purpose: str
    created_at: int = field(default_factory=lambda: int(time.time()))

    def object(self) -> dict:
        head = {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at}
        return {**head, "filename": self.filename, "purpose": self.purpose, "status": "processed"}


@dataclass
class _Batch:
    id: str
    input_file_id: str
    completion_window: str
    metadata: Any
    expire_after: int | None
    status: str = "validating"
    created_at: int = field(default_factory=lambda: int(time.time()))
    times: dict[str, int | None] = field(default_factory=dict)
    errors: dict | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    lines: list[dict] = field(default_factory=list)  # the validated input lines
    done: list[dict] = field(default_factory=list)  # output lines, in the order they ran
    failed_lines: list[dict] = field(default_factory=list)  # error-file lines
    completed: int = 0
    failed: int = 0
    cancel_requested: bool = False

    def object(self) -> dict:
        out = {"id": self.id, "object": "batch", "endpoint": ENDPOINT, **{k: getattr(self, k) for k in _FIELDS}}
        out.update({f"{state}_at": self.times.get(f"{state}_at") for state in _STATES.split()})
        out["expires_at"] = self.created_at + 24 * 3600
        out["request_counts"] = {"total": len(self.lines), "completed": self.completed, "failed": self.failed}
        return {**out, "metadata": self.metadata}


_STATES = "in_progress finalizing completed failed expired cancelling cancelled"  # each with its time stamp
_FIELDS = ("errors", "input_file_id", "completion_window", "status", "output_file_id", "error_file_id", "created_at")


class BatchAPI(ScriptedBatches):
    """The Batch API of one scripted server: its files, its batches, their clock and the test controls."""

    #: files uploaded, batches created, polls of a batch served (500s included), lists served
    COUNTED = ("files_uploaded", "batches_created", "polls", "lists")

    def __init__(
        self,
        server: OpenAIServer,
        *,
        step: float = 0.05,
        chunk: int | None = None,
        expire_after: int | None = None,
        seed: int | None = None,
    ):
        super().__init__()
        self.server = server
        self.step = step  # seconds each state (and each chunk of lines) takes
        self.chunk = chunk  # lines run a step (None: a tenth of the batch, at least one)
        self.expire_after = expire_after  # a new batch expires once this many of its lines have run
        self.max_lines = 50_000
        self.max_bytes = 200 * 1024 * 1024
        self._rng = random.Random(seed)
        self._files: dict[str, _File] = {}
        self._poll_faults: collections.Counter[str | None] = collections.Counter()  # batch id (None: any) -> 500s

    # ------------------------------------------------------------------ test controls

    def _forget(self) -> None:  # lock held
        """Every file and poll fault too."""
        self._files.clear()
        self._poll_faults.clear()

    def expire(self, batch_id: str, *, after: int = 0) -> None:
        """Let the batch run ``after`` lines in all (those already run count), then expire."""
        with self._lock:
            self._batches[batch_id].expire_after = after

    def fail_polls(self, n: int, batch_id: str | None = None) -> None:
        """The next ``n`` polls (of ``batch_id``, or of any batch) are answered 500."""
        with self._lock:
            self._poll_faults[batch_id] += n

    # ------------------------------------------------------------------ routes

    def mount(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/files", self._upload)
            app.router.add_get(f"{prefix}/files/{{id}}", self._file)
            app.router.add_delete(f"{prefix}/files/{{id}}", self._delete_file)
            app.router.add_get(f"{prefix}/files/{{id}}/content", self._content)
            app.router.add_post(f"{prefix}/batches", self._create)
            app.router.add_get(f"{prefix}/batches", self._list)
            app.router.add_get(f"{prefix}/batches/{{id}}", self._poll)
            app.router.add_post(f"{prefix}/batches/{{id}}/cancel", self._cancel)
        app.router.add_get("/_admin/batches", self._admin)
        app.router.add_post("/_admin/batches/{action}", self._admin)
        app.router.add_post("/_admin/batches/{id}/{action}", self._admin)

    async def _upload(self, request: web.Request) -> web.Response:
        if self.absent:  # a server with no Files API (vLLM's, Ollama's): 404 as aiohttp gives it
            return _error(404, "Not Found")
        try:
            form = await request.post()
        except ValueError:
            return _error(400, "The body is not a multipart form")
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField):
            return _error(400, "Missing required parameter: 'file'", param="file")
        if purpose not in ("batch", "fine-tune", "assistants", "user_data", "evals", "vision"):
            return _error(400, f"Invalid value for 'purpose': {purpose!r}", param="purpose")
        stored = _File(f"file-{uuid.uuid4().hex[:24]}", upload.file.read(), upload.filename, str(purpose))
        with self._lock:
            self._files[stored.id] = stored
            self._count("files_uploaded")
        return web.json_response(stored.object())

    def _find_file(self, request: web.Request) -> _File | web.Response:
        file_id = request.match_info["id"]
        with self._lock:
            found = self._files.get(file_id)
        return found or _error(404, f"No such File object: {file_id}", param="id")

    async def _file(self, request: web.Request) -> web.Response:
        found = self._find_file(request)
        return found if isinstance(found, web.Response) else web.json_response(found.object())

    async def _content(self, request: web.Request) -> web.Response:
        found = self._find_file(request)
        if isinstance(found, web.Response):
            return found
        return web.Response(body=found.data, content_type="application/octet-stream")

    async def _delete_file(self, request: web.Request) -> web.Response:
        found = self._find_file(request)
        if isinstance(found, web.Response):
            return found
        with self._lock:
            self._files.pop(found.id, None)
        return web.json_response({"id": found.id, "object": "file", "deleted": True})

    async def _create(self, request: web.Request) -> web.StreamResponse:
        try:
            payload = await request.json()
        except ValueError:
            return _error(400, "The body is not JSON")
        if not isinstance(payload, dict):
            return _error(400, "The body must be a JSON object")
        file_id = payload.get("input_file_id")
        if payload.get("endpoint") != ENDPOINT:
            return _error(400, f"Unsupported endpoint {payload.get('endpoint')!r}", param="endpoint")
        if payload.get("completion_window") != "24h":
            return _error(400, "completion_window must be '24h'", param="completion_window")
        with self._lock:
            found = self._files.get(str(file_id))
            if found is None:
                return _error(404, f"No such File object: {file_id}", param="input_file_id")
            if found.purpose != "batch":
                return _error(400, f"File {file_id} was not uploaded for purpose 'batch'", param="input_file_id")
            batch = _Batch(
                f"batch_{uuid.uuid4().hex[:24]}", found.id, "24h", payload.get("metadata"), self.expire_after
            )
            answer, drop = self._created(batch)
        return await self._launch(request, self._run(batch, found.data), answer, drop)

    async def _poll(self, request: web.Request) -> web.Response:
        batch_id = request.match_info["id"]
        with self._lock:
            self._count("polls")
            faulty = [key for key in (batch_id, None) if self._poll_faults[key] > 0]
            if faulty:
                self._poll_faults[faulty[0]] -= 1
            found = self._batches.get(batch_id)
            answer = found.object() if found else None
        if faulty:
            return _error(500, "The server had an error while processing your request", code="server_error")
        if answer is None:
            return _error(404, f"No batch found with id '{batch_id}'", param="id")
        return web.json_response(answer)

    async def _list(self, request: web.Request) -> web.Response:
        try:
            limit = max(1, min(100, int(request.query.get("limit", "20"))))
        except ValueError:
            return _error(400, "limit must be an integer", param="limit")
        after = request.query.get("after")
        with self._lock:
            self._count("lists")
            newest = [b.object() for b in reversed(self._batches.values())]
        if after:
            ids = [b["id"] for b in newest]
            newest = newest[ids.index(after) + 1 :] if after in ids else []
        page = newest[:limit]
        first, last = (page[0]["id"], page[-1]["id"]) if page else (None, None)
        body = {"object": "list", "data": page, "first_id": first, "last_id": last, "has_more": len(newest) > limit}
        return web.json_response(body)

    async def _cancel(self, request: web.Request) -> web.Response:
        batch_id = request.match_info["id"]
        with self._lock:
            found = self._batches.get(batch_id)
            if found is None:
                return _error(404, f"No batch found with id '{batch_id}'", param="id")
            if found.status in TERMINAL or found.status == "finalizing":
                return _error(400, f"Cannot cancel a batch with status '{found.status}'")
            if not found.cancel_requested:
                found.cancel_requested = True
                found.status = "cancelling"
                found.times["cancelling_at"] = int(time.time())
            answer = found.object()
        return web.json_response(answer)

    # ------------------------------------------------------------------ the clock

    async def _run(self, batch: _Batch, data: bytes) -> None:
        """Moves ``batch`` through its states, one every ``step`` seconds, until it ends or vanishes."""
        await asyncio.sleep(self.step)
        problems, lines = self._validate(data)
        with self._lock:
            if self._gone(batch):
                return
            if problems and not batch.cancel_requested:
                batch.errors = {"object": "list", "data": problems}
                self._end(batch, "failed")
                return
            batch.lines = lines
            if not batch.cancel_requested:
                batch.status = "in_progress"
                batch.times["in_progress_at"] = int(time.time())
        chunk = self._chunk_size(len(lines))
        at = 0
        while True:
            await asyncio.sleep(self.step)
            with self._lock:
                if self._gone(batch):
                    return
                if batch.cancel_requested:
                    break
                if at >= len(lines):
                    batch.status = "finalizing"
                    batch.times["finalizing_at"] = int(time.time())
                    break
            for line in lines[at : at + chunk]:
                with self._lock:
                    if self._gone(batch):
                        return
                    if batch.expire_after is not None and at >= batch.expire_after:
                        self._finish(batch, at, "expired", "batch_expired", _EXPIRED)
                        return
                self._execute(batch, line)
                at += 1
        await asyncio.sleep(self.step)
        with self._lock:
            if self._gone(batch):
                return
            if batch.cancel_requested:
                self._finish(batch, at, "cancelled", "batch_cancelled", _CANCELLED)
            else:
                self._finish(batch, at, "completed", "", "")

    def _validate(self, data: bytes) -> tuple[list[dict], list[dict]]:
        """The problems of an input file (``errors.data`` entries) and its lines."""
        if len(data) > self.max_bytes:
            return [_problem("file_too_large", f"The input file exceeds {self.max_bytes} bytes.")], []
        problems: list[dict] = []
        lines: list[dict] = []
        seen: set[str] = set()
        models: set[str] = set()
        for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                problems.append(_problem("invalid_json_line", "This line is not valid JSON.", line=number))
                continue
            if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                problems.append(_problem("missing_required_parameter", "Missing 'custom_id'.", "custom_id", number))
                continue
            if line["custom_id"] in seen:
                problems.append(_problem("duplicate_custom_id", "The custom_id is not unique.", "custom_id", number))
            seen.add(line["custom_id"])
            if line.get("method") != "POST":
                problems.append(_problem("invalid_method", "Only POST is supported.", "method", number))
            if line.get("url") != ENDPOINT:
                problems.append(_problem("invalid_url", f"The url must be the batch's {ENDPOINT}.", "url", number))
            body = line.get("body")
            if not isinstance(body, dict) or not body.get("model"):
                problems.append(_problem("missing_required_parameter", "The body has no model.", "body.model", number))
                continue
            models.add(str(body["model"]))
            if len(models) > 1:
                problems.append(_problem("mismatched_model", "A file may hold only one model.", "body.model", number))
                models.discard(str(body["model"]))
            lines.append(line)
        if len(lines) > self.max_lines:
            problems.append(_problem("too_many_requests", f"The input file has over {self.max_lines} lines."))
        if not lines and not problems:
            problems.append(_problem("empty_file", "The input file has no requests."))
        return problems, lines

    def _execute(self, batch: _Batch, line: dict) -> None:
        """Runs one input line against the chat endpoint's answers, and keeps its output line."""
        custom_id = line["custom_id"]
        answer = self.server.answer_line(line["body"], batch=batch.id, custom_id=custom_id)
        with self._lock:
            self._executed[custom_id] += 1
            if answer is None:
                batch.failed += 1
                batch.failed_lines.append(_line(custom_id, None, "server_error", "The request got no response."))
                return
            status, body = answer
            if status == 200:
                batch.completed += 1
            else:
                batch.failed += 1
            response = {"status_code": status, "request_id": f"req_{uuid.uuid4().hex[:24]}", "body": body}
            batch.done.append(_line(custom_id, response))

    def _finish(self, batch: _Batch, ran: int, status: str, code: str, message: str) -> None:  # lock held
        """Writes the output and error files (the lines from ``ran`` on failing with ``code``) and ends."""
        batch.failed_lines.extend(_line(line["custom_id"], None, code, message) for line in batch.lines[ran:])
        done = list(batch.done)
        self._rng.shuffle(done)
        batch.output_file_id = self._keep(batch, "output", done)
        batch.error_file_id = self._keep(batch, "error", batch.failed_lines)
        self._end(batch, status)

    def _keep(self, batch: _Batch, kind: str, lines: list[dict]) -> str | None:  # lock held
        if not lines:
            return None
        data = "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")
        stored = _File(f"file-{uuid.uuid4().hex[:24]}", data, f"{batch.id}_{kind}.jsonl", "batch_output")
        self._files[stored.id] = stored
        return stored.id

    @staticmethod
    def _end(batch: _Batch, status: str) -> None:  # lock held
        batch.status = status
        batch.times[f"{status}_at"] = int(time.time())

    # ------------------------------------------------------------------ admin routes

    async def _admin(self, request: web.Request) -> web.Response:
        """``/_admin/batches`` (counters), ``.../config`` (settings in a JSON body), ``.../reset``,
        ``.../fail_polls?n=&batch=``, ``.../{id}/expire?after=`` and ``.../{id}/vanish``."""
        action, batch_id, query = request.match_info.get("action", ""), request.match_info.get("id"), request.query
        if action == "config":
            settings = await request.json()
            for name in set(settings) & {"step", "chunk", "expire_after", "drop_creates", "max_lines", "max_bytes"}:
                setattr(self, name, settings[name])
        elif action == "reset":
            self.reset()
        elif action == "fail_polls":
            self.fail_polls(int(query.get("n", "1")), query.get("batch"))
        elif action == "vanish" and batch_id:
            self.vanish(batch_id)
        elif action == "expire" and batch_id:
            try:
                self.expire(batch_id, after=int(query.get("after", "0")))
            except KeyError:
                return _error(404, f"No batch found with id '{batch_id}'", param="id")
        elif action:
            return _error(404, f"Unknown admin action {action!r}")
        return web.json_response(self.counters())


def _problem(code: str, message: str, param: str | None = None, line: int | None = None) -> dict:
    return {"code": code, "message": message, "param": param, "line": line}


def _line(custom_id: str, response: dict | None, code: str = "", message: str = "") -> dict:
    error = {"code": code, "message": message} if response is None else None
    return {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": custom_id, "response": response, "error": error}
