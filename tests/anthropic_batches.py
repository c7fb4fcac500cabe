"""Anthropic's Messages API and Message Batches API on the scripted server of ``openai_server.py``.

Every ``OpenAIServer`` serves them at its root (``http://127.0.0.1:PORT``, the ``api_base`` of an
``anthropic/`` model), as ``server.anthropic`` (a :class:`AnthropicBatches`). A request for model M
gets the answer ``POST /v1/chat/completions`` would get for M with the same messages (the system
prompt first): the same scripted steps (``server.script(M, ...)``) and responders, taken in the
order the requests run, recorded in ``server.requests`` (a batch's with ``batch`` and
``custom_id``), and turned into Anthropic's shapes.

- ``POST /v1/messages`` -> a message (``content: [{"type": "text", "text"}]``, ``stop_reason``,
  ``usage.input_tokens``/``output_tokens``); a scripted status -> Anthropic's error body with it.
- ``POST /v1/messages/batches`` (``{"requests": [{"custom_id", "params"}]}``) -> a batch,
  ``in_progress``; 400 for a request without ``custom_id`` (``^[a-zA-Z0-9_-]{1,64}$``) or params with
  ``model``, ``max_tokens`` and ``messages``, a duplicate ``custom_id``, more than ``max_requests``
  requests or ``max_bytes`` bytes (Anthropic's 100,000 and 256 MB). ``GET .../batches/{id}``,
  ``GET .../batches?limit=`` (newest first), ``POST .../batches/{id}/cancel`` (``canceling``),
  ``GET .../batches/{id}/results`` (JSON lines; 404 before the batch has ended).
- The server runs ``chunk`` requests (default a tenth of the batch) every ``step`` seconds, polled or
  not, then the batch ``ended``: ``results_url`` set, results in shuffled order, one per request:
  ``succeeded`` with the message, ``errored`` for a scripted status (its error type by the status),
  or for a scripted ``{"drop": True}`` (``api_error``), ``expired`` for the requests left when it
  expired (after ``expire_after`` requests), ``canceled`` for those left when it was cancelled.
  ``request_counts`` counts them as they are decided.

Test controls (Python)::

    server.anthropic.expire_after = 3          # a new batch expires once 3 of its requests ran
    server.anthropic.vanish(batch_id)          # 404 from now on; it stops
    server.anthropic.drop_creates = 1          # the next create makes its batch, then cuts the line
    server.anthropic.hold_creates = 5.0        # a create's answer waits 5 s after its batch is made
    server.anthropic.absent = True             # /v1/messages/batches answers 404 (a gateway that passes
                                               #   messages on but has no batches); /v1/messages answers
    server.anthropic.counters()                # batches created, requests run (in all and per custom_id),
                                               #   polls, lists, results fetched, messages answered
    server.anthropic.reset()                   # forget every batch and counter
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from aiohttp import web

if __package__:
    from .scripted_batches import ScriptedBatches
else:  # imported by openai_server.py run as a script, from the tests folder
    from scripted_batches import ScriptedBatches  # type: ignore[no-redef]

if TYPE_CHECKING:
    from tests.openai_server import OpenAIServer

_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_STOP = {"stop": "end_turn", "length": "max_tokens"}


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def _error(status: int, message: str) -> web.Response:
    body = {"type": "error", "error": {"type": _error_type(status), "message": message}}
    return web.json_response(body, status=status)


def chat_payload(params: dict) -> dict:
    """The chat-completions request an Anthropic request's ``params`` stand for: the system prompt
    as the first message, the other parameters as they are."""
    messages = list(params.get("messages") or [])
    if params.get("system"):
        system = params["system"]
        text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
        messages.insert(0, {"role": "system", "content": text})
    rest = {k: v for k, v in params.items() if k not in ("system", "messages")}
    return {**rest, "messages": messages}


def message_of(body: Any) -> dict:
    """A chat completion's body as Anthropic's message."""
    choice = body["choices"][0]
    usage = body.get("usage") or {}
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": [{"type": "text", "text": choice["message"]["content"] or ""}],
        "stop_reason": _STOP.get(choice.get("finish_reason"), "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)},
    }


def _error_message(status: int, body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message or f"HTTP {status}")


@dataclass
class _Batch:
    id: str
    requests: list[dict]
    expire_after: int | None
    created: float = field(default_factory=time.time)
    status: str = "in_progress"
    results: list[dict] = field(default_factory=list)  # in the order they were decided
    ended_at: float | None = None
    cancel_initiated_at: float | None = None
    results_url: str | None = None

    def object(self) -> dict:
        counts = collections.Counter(r["result"]["type"] for r in self.results)
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": {
                "processing": len(self.requests) - len(self.results),
                **{kind: counts.get(kind, 0) for kind in ("succeeded", "errored", "canceled", "expired")},
            },
            "ended_at": _stamp(self.ended_at) if self.ended_at else None,
            "created_at": _stamp(self.created),
            "expires_at": _stamp(self.created + 24 * 3600),
            "archived_at": None,
            "cancel_initiated_at": _stamp(self.cancel_initiated_at) if self.cancel_initiated_at else None,
            "results_url": self.results_url,
        }


class AnthropicBatches(ScriptedBatches):
    """Anthropic's Messages and Message Batches APIs of one scripted server (see the module docstring)."""

    #: batches created, polls, lists and results served, messages answered (the headers of each create too)
    COUNTED = ("batches_created", "polls", "lists", "results_fetched", "messages")

    def __init__(self, server: OpenAIServer, *, step: float = 0.05, chunk: int | None = None, seed: int | None = None):
        super().__init__()
        self.server = server
        self.step = step
        self.chunk = chunk
        self.expire_after: int | None = None
        self.max_requests = 100_000
        self.max_bytes = 256 * 1024 * 1024
        self._rng = random.Random(seed)

    def _counters(self) -> dict:  # lock held
        return {**super()._counters(), "headers": list(self._headers)}

    def _clear_counters(self) -> None:  # lock held
        super()._clear_counters()
        self._headers: list[dict] = []  # the headers of each batch request

    # ------------------------------------------------------------------ routes

    def mount(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._message)
        app.router.add_post("/v1/messages/batches", self._create)
        app.router.add_get("/v1/messages/batches", self._list)
        app.router.add_get("/v1/messages/batches/{id}", self._poll)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self._cancel)
        app.router.add_get("/v1/messages/batches/{id}/results", self._results)

    def _answer(self, params: dict, **record: Any) -> dict:
        """The ``result`` of one request: the chat endpoint's scripted answer, in Anthropic's shape."""
        answer = self.server.answer_line(chat_payload(params), **record)
        if answer is None:  # a dropped answer
            return {"type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": "dropped"}}}
        status, body = answer
        if status != 200:
            error = {"type": _error_type(status), "message": _error_message(status, body)}
            return {"type": "errored", "error": {"type": "error", "error": error}}
        return {"type": "succeeded", "message": message_of(body)}

    async def _message(self, request: web.Request) -> web.Response:
        try:
            params = await request.json()
        except ValueError:
            return _error(400, "The body is not JSON")
        if not isinstance(params, dict) or not params.get("model") or not params.get("max_tokens"):
            return _error(400, "model and max_tokens are required")
        with self._lock:
            self._count("messages")
        result = self._answer(params)
        if result["type"] == "succeeded":
            return web.json_response(result["message"])
        error = result["error"]["error"]
        status = next((s for s, t in _ERROR_TYPES.items() if t == error["type"]), 500)
        return _error(status, error["message"])

    async def _create(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if self.absent:
            return _error(404, "Not Found")
        if len(raw) > self.max_bytes:
            return _error(413, f"The batch exceeds {self.max_bytes} bytes")
        try:
            payload = json.loads(raw)
        except ValueError:
            return _error(400, "The body is not JSON")
        requests = payload.get("requests") if isinstance(payload, dict) else None
        if not isinstance(requests, list) or not requests:
            return _error(400, "requests: a non-empty list is required")
        if len(requests) > self.max_requests:
            return _error(400, f"requests: at most {self.max_requests} requests a batch")
        seen: set[str] = set()
        for number, item in enumerate(requests):
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            params = item.get("params") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                return _error(400, f"requests.{number}.custom_id: must match {_CUSTOM_ID.pattern}")
            if custom_id in seen:
                return _error(400, f"requests.{number}.custom_id: {custom_id!r} is not unique")
            seen.add(custom_id)
            if not isinstance(params, dict) or not all(params.get(k) for k in ("model", "max_tokens", "messages")):
                return _error(400, f"requests.{number}.params: model, max_tokens and messages are required")
            if any(m.get("role") == "system" for m in params["messages"]):
                return _error(400, f"requests.{number}.params.messages: the system prompt goes in 'system'")
        batch = _Batch(f"msgbatch_{uuid.uuid4().hex[:24]}", requests, self.expire_after)
        with self._lock:
            answer, drop = self._created(batch)
            self._headers.append(dict(request.headers))
        return await self._launch(request, self._run(batch, f"http://{request.host}"), answer, drop)

    def _find(self, request: web.Request) -> _Batch | web.Response:
        batch_id = request.match_info["id"]
        with self._lock:
            found = self._batches.get(batch_id)
        return found or _error(404, f"No batch with id {batch_id!r}")

    async def _poll(self, request: web.Request) -> web.Response:
        with self._lock:
            self._count("polls")
        if self.absent:
            return _error(404, "Not Found")
        found = self._find(request)
        if isinstance(found, web.Response):
            return found
        with self._lock:
            return web.json_response(found.object())

    async def _list(self, request: web.Request) -> web.Response:
        if self.absent:
            return _error(404, "Not Found")
        limit = max(1, min(1000, int(request.query.get("limit", "20"))))
        with self._lock:
            self._count("lists")
            newest = [b.object() for b in reversed(self._batches.values())]
        page = newest[:limit]
        first, last = (page[0]["id"], page[-1]["id"]) if page else (None, None)
        return web.json_response({"data": page, "has_more": len(newest) > limit, "first_id": first, "last_id": last})

    async def _cancel(self, request: web.Request) -> web.Response:
        found = self._find(request)
        if isinstance(found, web.Response):
            return found
        with self._lock:
            if found.status == "in_progress":
                found.status = "canceling"
                found.cancel_initiated_at = time.time()
            return web.json_response(found.object())

    async def _results(self, request: web.Request) -> web.Response:
        found = self._find(request)
        if isinstance(found, web.Response):
            return found
        with self._lock:
            if found.status != "ended":
                return _error(404, f"Batch {found.id} has not ended; its results are not ready")
            self._count("results_fetched")
            results = list(found.results)
        self._rng.shuffle(results)
        data = "".join(json.dumps(r) + "\n" for r in results).encode("utf-8")
        return web.Response(body=data, content_type="application/binary")

    # ------------------------------------------------------------------ the clock

    async def _run(self, batch: _Batch, root: str) -> None:
        """Runs ``chunk`` of the batch's requests every ``step`` seconds, then ends it."""
        chunk = self._chunk_size(len(batch.requests))
        at = 0
        while True:
            await asyncio.sleep(self.step)
            with self._lock:
                if self._gone(batch):
                    return
                rest = [r["custom_id"] for r in batch.requests[at:]]
                why = "canceled" if batch.status == "canceling" else None
                if why is None and batch.expire_after is not None and at >= batch.expire_after:
                    why = "expired"
                if why is not None or at >= len(batch.requests):
                    batch.results.extend({"custom_id": c, "result": {"type": why}} for c in rest if why)
                    batch.status = "ended"
                    batch.ended_at = time.time()
                    batch.results_url = f"{root}/v1/messages/batches/{batch.id}/results"
                    return
            for item in batch.requests[at : at + chunk]:
                if batch.expire_after is not None and at >= batch.expire_after:
                    break
                result = self._answer(item["params"], batch=batch.id, custom_id=item["custom_id"])
                with self._lock:
                    if self._gone(batch):
                        return
                    self._executed[item["custom_id"]] += 1
                    batch.results.append({"custom_id": item["custom_id"], "result": result})
                at += 1
