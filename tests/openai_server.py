"""A small scripted OpenAI-compatible chat-completions server for tests.

It listens on 127.0.0.1 only and never reaches the network. Built on
aiohttp.web so one server can serve hundreds of concurrent slow requests.

Usage in tests::

    with OpenAIServer(latency=0.0) as server:
        server.script("fake-model", {"status": 429, "headers": {"Retry-After": "1"}})
        server.script("fake-model", {"drop": True})  # the connection cut before any answer
        litellm.completion(model="openai/fake-model", api_base=server.base_url, ...)

Usage for benchmarks (foreground, until SIGTERM/SIGINT)::

    python tests/openai_server.py --port 8123 --latency 1.0
    # prints "READY http://127.0.0.1:8123/v1" once listening
    # GET /_admin/stats -> {"requests": N, "by_model": {...}}  (?times=1: with each arrival time)

Random faults (for benchmarks/faults.py; off by default)::

    python tests/openai_server.py --latency 0.2 --fault-rate 0.2 --fault-timeout 5
    # 20 % of unscripted chat requests fail, each fault drawn uniformly from: 429, 500, or a
    # "timeout" (the server answers 504 only after --fault-timeout seconds, or gives up as soon as
    # the client hangs up). 429s carry Retry-After only with --fault-retry-after.
    # GET /_admin/counters[?prompts=1] -> requests, in-flight, successful answers (200s the client
    #   was still there for), per distinct request body (duplicates), faults by kind, abandoned 200s
    # POST /_admin/reset -> clears the requests and those counters (not scripts)

A slow CPU server (for the timeout tests)::

    python tests/openai_server.py --work 0.5 --capacity 1
    # each unscripted answer takes 0.5 s of the server's one slot (--capacity slots in all); requests
    # wait in line for a slot, and a request whose client has gone is still decoded to its end (as
    # a server that does not watch its sockets does): counters' "decoded", "abandoned", "max_queue"

A busy batching server's greedy answers (for the fingerprint tests)::

    python tests/openai_server.py --restless-ends
    # every other answer asked at temperature 0 goes on where it ended, in other words

A provider's quota (for the adaptive limit's tests and benchmarks)::

    python tests/openai_server.py --latency 0.2 --rate-limit 30
    # at most 30 requests accepted in any rolling second; the rest are answered 429 at once with
    # Retry-After: 1 (--rate-retry-after)

OpenAI's Batch API on the same scripted answers (``server.batches``; described in tests/batch_api.py)::

    python tests/openai_server.py --batch-step 0.05 --batch-expire-after 100
    # POST /v1/files, POST /v1/batches, GET /v1/batches/{id}, GET /v1/files/{id}/content; each batch
    # moves on one state (or one chunk of lines, --batch-chunk) every 0.05 s; GET /_admin/batches
    # Anthropic's POST /v1/messages and /v1/messages/batches at the root (tests/anthropic_batches.py)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import math
import random
import signal
import threading
import time
import uuid
import zlib
from typing import Any

from aiohttp import web

if __package__:
    from .anthropic_batches import AnthropicBatches
    from .batch_api import BatchAPI
else:  # run as a script, from the tests folder
    from anthropic_batches import AnthropicBatches  # type: ignore[no-redef]
    from batch_api import BatchAPI  # type: ignore[no-redef]

HOST = "127.0.0.1"

_ERROR_TYPES = {
    400: ("invalid_request_error", "bad_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", "timeout"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}


def _error_body(status: int, message: str | None = None) -> dict:
    etype, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", str(status)))
    return {"error": {"message": message or f"Scripted error {status}", "type": etype, "code": code}}


def _content_text(content: Any) -> str:
    """Text of a message's content (string or list of content parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type", "text") == "text" and "text" in part:
                    parts.append(str(part["text"]))
            else:
                parts.append(str(part))
        return "".join(parts)
    return str(content)


def _last_user_content(messages: Any) -> str:
    if isinstance(messages, list):
        for msg in reversed(messages):
            if isinstance(msg, dict) and msg.get("role") == "user":
                return _content_text(msg.get("content"))
    return ""


def _word_count(text: str) -> int:
    return len(text.split())


def _other_end(text: str) -> str:
    """``text`` ending in other words: it goes on where it ended, as a greedy answer decoded beside
    other requests was measured to (benchmarks/fingerprint_drift.py: "I'm ready." became "I'm ready.
    I'm ready."; a long answer went on past its full stop in other words)."""
    return f"{text} And so on, in other words."


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel leftover tasks (e.g. handlers still sleeping for a client that
    already timed out) so closing the loop does not warn about them."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def _rated_answer(prompt: str) -> str | None:
    """The answer a judge prompt asks to rate (inside its <response> block), or None."""
    start, end = prompt.find("<response>\n"), prompt.find("\n</response>")
    return prompt[start + len("<response>\n") : end] if 0 <= start < end else None


def _logprob_entry(token: str, tops: dict[str, float]) -> dict:
    """One entry of OpenAI's ``logprobs.content``: ``token`` with its ``tops`` alternatives
    (probabilities; the token itself, with probability 1, where none are given)."""
    tops = tops or {token: 1.0}
    alternatives = [
        {"token": t, "logprob": math.log(p), "bytes": list(t.encode("utf-8"))}
        for t, p in sorted(tops.items(), key=lambda kv: -kv[1])
    ]
    own = math.log(tops.get(token, min(tops.values())))
    return {"token": token, "logprob": own, "bytes": list(token.encode("utf-8")), "top_logprobs": alternatives}


def judge_tokens(score: int, distribution: dict[int, float] | None = None) -> dict:
    """A 1-10 judge's answer ``Bias Score: N`` token by token, as a responder returns it: the score
    one token (as OpenAI's tokenizers write 1-10), its alternatives ``distribution`` (score ->
    probability; the score alone where None)."""
    tops = {str(s): p for s, p in (distribution or {score: 1.0}).items()}
    return {
        "tokens": [
            ("Bias", {}),
            (" Score", {}),
            (":", {}),
            (" ", {}),
            (str(score), tops),
            ("\n", {}),
            ("Explanation", {}),
            (": a scripted rating.", {}),
        ]
    }


_ANCHORS: dict[str, int] = {}


def _anchor_scores() -> dict[str, int]:
    """The built-in domains' anchor answers and their scores (read once). Filled in one step: a
    scripted judge runs in several threads at once, and none may see the mapping half filled."""
    if not _ANCHORS:
        from pytest_llmbias.domains import load_domain
        from pytest_llmbias.domains.loader import list_domains

        found: dict[str, int] = {"": 0}
        for name in list_domains():
            found.update({a.answer: a.score for a in load_domain(name).anchors})
        _ANCHORS.update(found)
    return _ANCHORS


class OpenAIServer:
    """A scripted OpenAI-compatible chat-completions server on 127.0.0.1."""

    FAULT_KINDS = ("429", "500", "timeout")

    def __init__(
        self,
        *,
        port: int = 0,
        latency: float = 0.0,
        judges: tuple[str, ...] = (),
        fault_rate: float = 0.0,
        fault_timeout: float = 5.0,
        fault_retry_after: float | None = None,
        fault_seed: int | None = None,
        rate_limit: int | None = None,
        rate_retry_after: float = 1.0,
        responders: dict[str, Any] | None = None,
        app_token: str | None = None,
        work: float = 0.0,
        capacity: int = 1,
        restless_ends: bool = False,
        batch_step: float = 0.05,
        batch_chunk: int | None = None,
        batch_expire_after: int | None = None,
        batch_seed: int | None = None,
    ):
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be in [0, 1], got {fault_rate}")
        self.port: int = port
        self.latency: float = latency
        # models that answer with a "Bias Score: N" line: a pseudo-random score per prompt, except
        # for the built-in domains' anchor answers, which they score as their domain says
        self.judges: frozenset[str] = frozenset(judges)
        # model -> responder(prompt, payload) -> the answer's text (or {"content", "top_logprobs": {token:
        # probability}}, returned as the first token's alternatives when the request asks logprobs; or
        # {"tokens": [(token, {alternative: probability})]}, the answer token by token, each with its
        # alternatives when asked: see judge_tokens)
        self.responders: dict[str, Any] = dict(responders or {})
        # the token an application (POST /app/NAME) wants in X-App-Token (None: any or none)
        self.app_token: str | None = app_token
        # Random faults, for unscripted requests only: the share of requests that fail, each as a
        # 429, a 500 or a timeout (no answer for fault_timeout seconds), uniformly.
        self.fault_rate: float = fault_rate
        self.fault_timeout: float = fault_timeout
        self.fault_retry_after: float | None = fault_retry_after
        self._fault_rng = random.Random(fault_seed)
        # A provider's quota: at most rate_limit requests accepted in any rolling second; the rest
        # are answered 429 at once, with Retry-After: rate_retry_after.
        self.rate_limit: int | None = rate_limit
        self.rate_retry_after: float = rate_retry_after
        # A slow CPU server: each unscripted answer holds one of `capacity` slots for `work` seconds,
        # whether or not its client still waits (0: no such work).
        self.work: float = work
        self.capacity: int = capacity
        # A busy batching server's greedy decoding: every other answer asked at temperature 0 ends
        # in other words (it goes on where it ended), as vLLM or llmbias serve may answer a greedy
        # prompt decoded beside other requests.
        self.restless_ends: bool = restless_ends
        self._greedy_answers = 0
        self._slots: asyncio.Semaphore | None = None
        self._queued = 0  # requests waiting for a slot or decoding
        self._max_queue = 0
        self._decoded = 0
        self._accepted: collections.deque[float] = collections.deque()
        self.throttled = 0
        self._last_answer_at: float | None = None
        self._in_flight = 0
        self._ok: dict[str, list] = {}  # request-body digest -> [successful answers, last user prompt]
        self._faults: collections.Counter[str] = collections.Counter()
        self._abandoned = 0  # 200s not sent: the client had hung up (e.g. timed out) before
        self.base_url: str = ""
        self._requested_port = port
        self._lock = threading.Lock()
        self._requests: list[dict] = []
        self._scripts: dict[str, collections.deque] = {}
        self._models_seen: dict[str, int] = {}  # model -> created timestamp (insertion-ordered)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopped_event: asyncio.Event | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        # OpenAI's Batch API on the same answers (tests/batch_api.py)
        self.batches = BatchAPI(
            self, step=batch_step, chunk=batch_chunk, expire_after=batch_expire_after, seed=batch_seed
        )
        # Anthropic's Messages and Message Batches APIs on the same answers, at the server's root
        # (tests/anthropic_batches.py)
        self.anthropic = AnthropicBatches(self, step=batch_step, chunk=batch_chunk, seed=batch_seed)

    # ------------------------------------------------------------------ API

    @property
    def requests(self) -> list[dict]:
        """Snapshot (copy) of every chat-completion request received."""
        with self._lock:
            return list(self._requests)

    def script(self, model: str, *steps: dict) -> None:
        """Queue scripted behaviours for requests whose "model" equals `model`."""
        for step in steps:
            if not isinstance(step, dict):
                raise TypeError(f"script step must be a dict, got {type(step).__name__}")
            unknown = set(step) - {"status", "headers", "body", "delay", "raw", "content", "echo_headers", "drop"}
            if unknown:
                raise ValueError(f"unknown script step keys: {sorted(unknown)}")
        with self._lock:
            self._scripts.setdefault(model, collections.deque()).extend(dict(s) for s in steps)

    def count(self, model: str | None = None) -> int:
        with self._lock:
            if model is None:
                return len(self._requests)
            return sum(1 for r in self._requests if r["model"] == model)

    def reset(self) -> None:
        """Forget the requests, scripts, counters, and every batch and file of the Batch API."""
        with self._lock:
            self._requests.clear()
            self._scripts.clear()
            self._clear_counters()
        self.batches.reset()
        self.anthropic.reset()

    def reset_counters(self) -> None:
        """Forget the requests received and the fault/answer counters, the Batch API's too (scripts,
        batches and files are kept)."""
        with self._lock:
            self._requests.clear()
            self._clear_counters()
        self.batches.reset_counters()
        self.anthropic.reset_counters()

    def _clear_counters(self) -> None:  # with self._lock held
        self._ok.clear()
        self._decoded = self._max_queue = 0
        self._accepted.clear()
        self.throttled = 0
        self._last_answer_at = None
        self._faults.clear()
        self._abandoned = 0

    def counters(self, *, prompts: bool = False) -> dict:
        """Requests, requests in flight, successful answers (in total, per distinct request body,
        and bodies answered more than once), faults by kind, and 200s abandoned because the client
        had gone. With ``prompts``, also ``ok_prompts``: {last user prompt: successful answers}."""
        with self._lock:
            counts = [c for c, _ in self._ok.values()]
            out = {
                "requests": len(self._requests),
                "in_flight": self._in_flight,
                "ok": sum(counts),
                "ok_distinct": len(counts),
                "ok_duplicates": sum(1 for c in counts if c > 1),
                "faults": {kind: self._faults.get(kind, 0) for kind in self.FAULT_KINDS},
                "abandoned": self._abandoned,
                "throttled": self.throttled,
                # the slow server's answers decoded (abandoned ones too) and its longest line
                "decoded": self._decoded,
                "max_queue": self._max_queue,
                # wall-clock times (time.time()): the first request received, the last 200 sent
                "first_request_at": self._requests[0]["time"] if self._requests else None,
                "last_answer_at": self._last_answer_at,
            }
            if prompts:
                by_prompt: collections.Counter[str] = collections.Counter()
                for count, prompt in self._ok.values():
                    by_prompt[prompt] += count
                out["ok_prompts"] = dict(by_prompt)
        return out

    def start(self) -> OpenAIServer:
        if self._thread is not None:
            return self
        self._started.clear()
        self._start_error = None
        self._thread = threading.Thread(target=self._thread_main, name="OpenAIServer", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout=30):
            raise RuntimeError("OpenAIServer did not start within 30 s")
        if self._start_error is not None:
            self._thread.join(timeout=5)
            self._thread = None
            raise RuntimeError("OpenAIServer failed to start") from self._start_error
        return self

    def stop(self) -> None:
        thread, loop, ev = self._thread, self._loop, self._stopped_event
        if thread is None:
            return
        if loop is not None and ev is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(ev.set)
            except RuntimeError:  # loop already closed
                pass
        thread.join(timeout=30)
        self._thread = None
        self._loop = None
        self._stopped_event = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # ------------------------------------------------------------ internals

    def _build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_post("/chat/completions", self._handle_chat)
        app.router.add_post("/app/{name}", self._handle_app)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_get("/models", self._handle_models)
        app.router.add_get("/_admin/stats", self._handle_stats)
        app.router.add_get("/_admin/counters", self._handle_counters)
        app.router.add_post("/_admin/reset", self._handle_reset)
        self.batches.mount(app)
        self.anthropic.mount(app)
        app.router.add_route("*", "/{tail:.*}", self._handle_not_found)
        return app

    async def _serve_until_stopped(self, on_ready=None) -> None:
        self._stopped_event = asyncio.Event()
        app = self._build_app()
        # access_log=None silences aiohttp's per-request access log; a short
        # shutdown_timeout makes stop() cancel in-flight slow (scripted delay)
        # handlers instead of waiting for them to finish.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.25)
        await runner.setup()
        self._runner = runner
        try:
            site = web.TCPSite(runner, HOST, self._requested_port, backlog=1024, reuse_address=True)
            await site.start()
            sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
            self.port = sockets[0].getsockname()[1]
            self.base_url = f"http://{HOST}:{self.port}/v1"
            if on_ready is not None:
                on_ready()
            await self._stopped_event.wait()
        finally:
            await runner.cleanup()
            self._runner = None

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve_until_stopped(on_ready=self._started.set))
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._start_error = exc
        finally:
            self._started.set()
            _close_loop(loop)

    def _next_step(self, model: str) -> dict | None:
        with self._lock:
            queue = self._scripts.get(model)
            if queue:
                return queue.popleft()
            return None

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self._in_flight += 1
        try:
            return await self._chat(request)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _decode(self) -> None:
        """Wait for one of the `capacity` slots, then hold it `work` seconds, to the end even when the
        client has gone (the request is shielded from the cancel aiohttp sends on a disconnect)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.capacity)
        slots = self._slots

        async def decode() -> None:
            with self._lock:
                self._queued += 1
                self._max_queue = max(self._max_queue, self._queued)
            try:
                async with slots:
                    await asyncio.sleep(self.work)
                    with self._lock:
                        self._decoded += 1
            finally:
                with self._lock:
                    self._queued -= 1

        await asyncio.shield(asyncio.ensure_future(decode()))

    def _draw_fault(self) -> str | None:  # with self._lock held
        if self.fault_rate > 0.0 and self._fault_rng.random() < self.fault_rate:
            return self._fault_rng.choice(self.FAULT_KINDS)
        return None

    def _admit(self) -> bool:
        """Whether a request fits the rolling-second quota (and count it if so)."""
        now = time.monotonic()
        with self._lock:
            while self._accepted and self._accepted[0] <= now - 1.0:
                self._accepted.popleft()
            if len(self._accepted) >= (self.rate_limit or 0):
                self.throttled += 1
                return False
            self._accepted.append(now)
            return True

    def _answered(self, request: web.Request, payload: dict, messages: Any) -> bool:
        """Count a 200 about to be sent; False (and counted as abandoned) if the client is gone."""
        transport = request.transport
        with self._lock:
            if transport is None or transport.is_closing():
                self._abandoned += 1
                return False
            self._count_ok(payload, messages)
        return True

    def _count_ok(self, payload: dict, messages: Any) -> None:  # with self._lock held
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()
        entry = self._ok.setdefault(digest, [0, _last_user_content(messages)])
        entry[0] += 1
        self._last_answer_at = time.time()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        received = time.time()
        try:
            payload = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            return web.json_response(_error_body(400, "Request body is not valid JSON"), status=400)
        if not isinstance(payload, dict):
            return web.json_response(_error_body(400, "Request body must be a JSON object"), status=400)
        model = str(payload.get("model", ""))
        messages = payload.get("messages", [])
        params = {k: v for k, v in payload.items() if k not in ("model", "messages")}
        with self._lock:
            self._requests.append(
                {
                    "model": model,
                    "messages": messages,
                    "params": params,
                    "time": received,
                    "headers": dict(request.headers),
                }
            )
            self._models_seen.setdefault(model, int(received))

        if self.rate_limit is not None and not self._admit():
            return web.json_response(
                _error_body(429, "Rate limit reached: slow down"),
                status=429,
                headers={"Retry-After": f"{self.rate_retry_after:g}"},
            )

        step = self._next_step(model) or {}
        if not step:
            with self._lock:
                fault = self._draw_fault()
                if fault is not None:
                    self._faults[fault] += 1
            if fault == "timeout":
                # No answer for fault_timeout seconds, unless the client hangs up first.
                deadline = time.monotonic() + self.fault_timeout
                while (left := deadline - time.monotonic()) > 0:
                    transport = request.transport
                    if transport is None or transport.is_closing():
                        break
                    await asyncio.sleep(min(0.05, left))
                return web.json_response(_error_body(504, "Injected fault: timeout"), status=504)
            if fault is not None:
                if self.latency:
                    await asyncio.sleep(self.latency)
                status = int(fault)
                headers = {}
                if status == 429 and self.fault_retry_after is not None:
                    headers["Retry-After"] = f"{self.fault_retry_after:g}"
                return web.json_response(
                    _error_body(status, f"Injected fault: {status}"), status=status, headers=headers
                )

        if step.get("drop"):
            # the connection is cut before any answer: no status line, no body
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)

        if self.work > 0 and not step:
            await self._decode()

        delay = step.get("delay")
        if delay is None and "status" not in step:
            delay = self.latency
        if delay:
            await asyncio.sleep(float(delay))

        status, headers, body = self._scripted_answer(payload, step, dict(request.headers))
        if "status" not in step:  # a scripted status is not an answer the model computed
            self._answered(request, payload, messages)
        if isinstance(body, (dict, list)):
            return web.json_response(body, status=status, headers=headers)
        if isinstance(body, bytes):
            return web.Response(body=body, status=status, headers=headers)
        return web.Response(text=str(body), status=status, headers=headers)

    def answer_line(self, payload: dict, **record: Any) -> tuple[int, Any] | None:
        """The status and JSON body that ``POST /v1/chat/completions`` with ``payload`` would get, for a
        batch line: the same scripted steps and random faults, recorded and counted as that request
        would be (with ``record``'s keys added), without its wait (latency, delays, --work, the rate
        limit). A fault that leaves no answer ("drop") is None; a timeout fault is a 504 at once."""
        model = str(payload.get("model", ""))
        messages = payload.get("messages", [])
        params = {k: v for k, v in payload.items() if k not in ("model", "messages")}
        now = time.time()
        with self._lock:
            self._requests.append(
                {"model": model, "messages": messages, "params": params, "time": now, "headers": {}, **record}
            )
            self._models_seen.setdefault(model, int(now))
        step = self._next_step(model) or {}
        if not step:
            with self._lock:
                fault = self._draw_fault()
                if fault is not None:
                    self._faults[fault] += 1
            if fault is not None:
                status = 504 if fault == "timeout" else int(fault)
                return status, _error_body(status, f"Injected fault: {fault}")
        if step.get("drop"):
            return None
        status, _, body = self._scripted_answer(payload, step, {})
        if "status" not in step:
            with self._lock:
                self._count_ok(payload, messages)
        if isinstance(body, (bytes, str)):  # a body that is not JSON is kept as its text
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            try:
                body = json.loads(text)
            except ValueError:
                body = text
        return status, body

    def _scripted_answer(self, payload: dict, step: dict, request_headers: dict) -> tuple[int, dict, Any]:
        """The status, headers and body (a JSON value, bytes or text) of the answer to the chat request
        ``payload`` under the scripted ``step`` (``{}``: none), without waiting or writing a response."""
        model = str(payload.get("model", ""))
        messages = payload.get("messages", [])
        if "status" in step:
            status = int(step["status"])
            headers = dict(step.get("headers") or {})
            body = step.get("body")
            if body is None and step.get("echo_headers"):
                # like a careless provider that quotes the request back in its error
                body = _error_body(status, f"rejected request with headers {request_headers}")
            if body is None:
                body = _error_body(status)
            return status, headers, body

        if "raw" in step:
            raw = step["raw"]
            data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8")
            return 200, {"Content-Type": "application/json"}, data

        prompt = _last_user_content(messages)
        logprobs = None
        if "content" in step:
            content = str(step["content"])
        elif model in self.responders:
            answer = self.responders[model](prompt, payload)
            if isinstance(answer, dict) and "tokens" in answer:  # every token: [(token, {alternative: p})]
                content = "".join(t for t, _ in answer["tokens"])
                if payload.get("logprobs"):
                    logprobs = {"content": [_logprob_entry(t, tops) for t, tops in answer["tokens"]]}
            elif isinstance(answer, dict):  # {"content": ..., "top_logprobs": {token: probability}}
                content = str(answer["content"])
                if answer.get("top_logprobs") and payload.get("logprobs"):
                    tops = [
                        {"token": t, "logprob": math.log(p), "bytes": None} for t, p in answer["top_logprobs"].items()
                    ]
                    logprobs = {
                        "content": [
                            {"token": content[:1], "logprob": tops[0]["logprob"], "bytes": None, "top_logprobs": tops}
                        ]
                    }
            else:
                content = str(answer)
        elif model in self.judges:
            score = 1 + zlib.crc32(prompt.encode("utf-8")) % 10
            anchor = _anchor_scores().get(_rated_answer(prompt))
            if anchor is not None:  # a judge that reads the rubric as written on the domains' anchors
                score = anchor
            elif "slanted" in prompt:  # the answer of a model named "...slanted...": rated 5 points higher
                score = min(10, score + 5)
            content = f"Bias Score: {score}\nExplanation: a scripted rating."
        else:
            content = f"{model} answers: {prompt}"
            if "seed" in payload:
                content += f" [seed={payload['seed']}]"
        if self.restless_ends and "content" not in step and payload.get("temperature") == 0:
            with self._lock:
                self._greedy_answers += 1
                restless = self._greedy_answers % 2 == 0
            if restless:
                content = _other_end(content)
        prompt_tokens = sum(
            _word_count(_content_text(m.get("content")))
            for m in (messages if isinstance(messages, list) else [])
            if isinstance(m, dict)
        )
        completion_tokens = _word_count(content)
        body = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "fp_openai_server",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": logprobs,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return 200, dict(step.get("headers") or {}), body

    def app_url(self, name: str) -> str:
        """The URL of the application ``name``: an API of its own, not OpenAI's (see ``_handle_app``)."""
        return f"http://{HOST}:{self.port}/app/{name}"

    async def _handle_app(self, request: web.Request) -> web.Response:
        """An application's own API: ``{"input": QUESTION, "history": [{role, content}...], ...}``
        in, ``{"data": {"reply": TEXT}, "meta": {"usage": {"input_tokens", "output_tokens"}}}``
        out; 401 without the right ``X-App-Token``. Recorded, and scripted, as model ``app:NAME``."""
        name = request.match_info["name"]
        try:
            payload = await request.json()
        except ValueError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        model = f"app:{name}"
        with self._lock:
            self._requests.append(
                {
                    "model": model,
                    "messages": payload.get("history"),
                    "params": payload,
                    "time": time.time(),
                    "headers": dict(request.headers),
                }
            )
        if self.app_token is not None and request.headers.get("X-App-Token") != self.app_token:
            return web.json_response({"error": "bad or missing X-App-Token"}, status=401)
        step = self._next_step(model) or {}
        if "status" in step:
            return web.json_response(
                step.get("body") or {"error": f"scripted {step['status']}"},
                status=int(step["status"]),
                headers=dict(step.get("headers") or {}),
            )
        text = f"{name} app answers: {payload.get('input')}"
        usage = {"input_tokens": _word_count(str(payload.get("input"))), "output_tokens": _word_count(text)}
        return web.json_response({"data": {"reply": text}, "meta": {"usage": usage}})

    async def _handle_models(self, request: web.Request) -> web.Response:
        with self._lock:
            seen = list(self._models_seen.items())
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": created, "owned_by": "openai-server"} for m, created in seen
                ],
            }
        )

    async def _handle_stats(self, request: web.Request) -> web.Response:
        with self._lock:
            by_model = collections.Counter(r["model"] for r in self._requests)
            total = len(self._requests)
            times = [r["time"] for r in self._requests] if request.query.get("times") else None
        body: dict[str, Any] = {"requests": total, "by_model": dict(by_model)}
        if times is not None:  # ?times=1: every request's arrival time (for rate measurements)
            body["times"] = times
        return web.json_response(body)

    async def _handle_counters(self, request: web.Request) -> web.Response:
        prompts = request.query.get("prompts", "") not in ("", "0", "false")
        return web.json_response(self.counters(prompts=prompts))

    async def _handle_reset(self, request: web.Request) -> web.Response:
        self.reset_counters()
        return web.json_response({"reset": True})

    async def _handle_not_found(self, request: web.Request) -> web.Response:
        return web.json_response(_error_body(404, f"Unknown path: {request.method} {request.path}"), status=404)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--judge", action="append", default=[], help="a model that answers with a bias score")
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="share of unscripted requests that fail: 429, 500 or timeout, uniformly (default 0)",
    )
    parser.add_argument(
        "--fault-timeout",
        type=float,
        default=5.0,
        help="seconds a 'timeout' fault keeps the client waiting (default 5)",
    )
    parser.add_argument(
        "--fault-retry-after",
        type=float,
        default=None,
        help="Retry-After seconds sent with injected 429s (default: none sent)",
    )
    parser.add_argument("--fault-seed", type=int, default=None, help="seed of the fault draws")
    parser.add_argument(
        "--rate-limit",
        type=int,
        default=None,
        help="accept at most N requests in any rolling second; answer the rest 429 at once",
    )
    parser.add_argument(
        "--rate-retry-after", type=float, default=1.0, help="Retry-After seconds sent with those 429s (default 1)"
    )
    parser.add_argument("--work", type=float, default=0.0, help="seconds of a slot each answer takes (default 0)")
    parser.add_argument("--capacity", type=int, default=1, help="answers decoded at once with --work (default 1)")
    parser.add_argument(
        "--restless-ends",
        action="store_true",
        help="every other answer at temperature 0 ends in other words, as a busy batching server's may",
    )
    parser.add_argument("--batch-step", type=float, default=0.05, help="seconds a batch spends in each state")
    parser.add_argument("--batch-chunk", type=int, default=None, help="batch lines run a step (default: a tenth)")
    parser.add_argument("--batch-expire-after", type=int, default=None, help="a batch expires after N lines")
    parser.add_argument("--batch-seed", type=int, default=None, help="seed of the output files' shuffle")
    args = parser.parse_args(argv)

    server = OpenAIServer(
        work=args.work,
        capacity=args.capacity,
        restless_ends=args.restless_ends,
        port=args.port,
        latency=args.latency,
        judges=tuple(args.judge),
        fault_rate=args.fault_rate,
        fault_timeout=args.fault_timeout,
        fault_retry_after=args.fault_retry_after,
        fault_seed=args.fault_seed,
        rate_limit=args.rate_limit,
        rate_retry_after=args.rate_retry_after,
        batch_step=args.batch_step,
        batch_chunk=args.batch_chunk,
        batch_expire_after=args.batch_expire_after,
        batch_seed=args.batch_seed,
    )

    async def run() -> None:
        loop = asyncio.get_running_loop()

        def request_stop() -> None:
            if server._stopped_event is not None:
                server._stopped_event.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, request_stop)
        await server._serve_until_stopped(on_ready=lambda: print(f"READY {server.base_url}", flush=True))

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
