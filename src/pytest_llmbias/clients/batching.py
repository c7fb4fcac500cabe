"""Batch mode (``collection.batch``): the calls of a collection sent through the provider's Batch
API at its batch price, journaled so that no line is ever paid for twice.

The collector is unchanged: it asks each call of its client, as in ordinary mode, and each
:class:`BatchingClient` hands the call to the session's :class:`BatchRunner` instead of sending it.
The runner gathers the calls that arrive together (a round: the answers first, their judge
ratings in the next round, once the answers are in), groups them by endpoint and model, cuts each
group at the provider's limits (:data:`~pytest_llmbias.clients.batch_api.MAX_LINES` lines and
:data:`~pytest_llmbias.clients.batch_api.MAX_BYTES` a file), uploads each part with the store key
as every line's ``custom_id``, journals it (:mod:`pytest_llmbias.store.batch_journal`), creates
the batch, and polls it with a growing interval until it ends.

Every line's fate is read, from the output file and the error file (their order is not the
input's): a 200 is stored as the call's answer; a 4xx inside a completed batch (``error`` null,
the status in ``response.status_code``) fails that call as an ordinary call would; a line that
expired, was throttled or met a server error is sent again in the next round, within the run's
retry budget; a cancelled batch's lines fail. A call whose key is in a journaled batch (a run
killed, or one that stopped waiting: ``collection.batch_wait``) is not sent again: the runner
polls that batch instead. ``anthropic/`` models go to Anthropic's Message Batches
(:mod:`~pytest_llmbias.clients.anthropic_batch_api`); models whose endpoint has neither (litellm's
other providers, Python targets, HTTP applications), and endpoints that answer the upload or the
create with 404, 405 or 501, are called one by one, said once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
import warnings
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_llmbias.choices import Transport
from pytest_llmbias.clients import batch_costs
from pytest_llmbias.clients.batch_api import CHAT_ENDPOINT, TERMINAL, BatchAPI
from pytest_llmbias.clients.batch_lines import batch_api, cut, fate, limits_of, persist, request_parts
from pytest_llmbias.clients.openai_transport import parse_completion
from pytest_llmbias.errors import LLMBiasWarning, ProviderError

if TYPE_CHECKING:
    from pytest_llmbias.clients.litellm_client import ModelClient
    from pytest_llmbias.config.settings import Settings
    from pytest_llmbias.store.batch_journal import BatchJournal, OpenBatch
    from pytest_llmbias.store.calls import ModelCall, Response
    from pytest_llmbias.store.response_store import ResponseStore

#: a round closes once no call has arrived for this long
QUIET_S = 0.05
#: the first poll's wait; each later one waits twice as long, up to :data:`POLL_MAX_S`
POLL_FIRST_S = 0.05
POLL_MAX_S = 30.0
#: what ``POST /files`` or a batch's create answers where an endpoint has no batch API (vLLM's,
#: Ollama's, llama.cpp's; a gateway that passes Anthropic's messages on but not its batches)
NO_BATCH_API = frozenset({404, 405, 501})


def batch_runner(store: ResponseStore, settings: Settings) -> BatchRunner:
    """The runner of one collection in batch mode, journaling in ``store``."""
    import os
    import uuid

    from pytest_llmbias.store.batch_journal import BatchJournal

    owner = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    return BatchRunner(BatchJournal(store), wait_s=settings.collection.batch_wait, owner=owner)


def batchable(client: Any) -> bool:
    """Whether ``client`` (a :class:`ModelClient`) reaches an OpenAI-compatible chat endpoint
    directly, or is an ``anthropic/`` model (on either transport): the kinds whose batch APIs the
    runner speaks."""
    spec = getattr(client, "spec", None)
    anthropic = str(getattr(spec, "model", "")).startswith("anthropic/")
    return (
        (getattr(client, "transport", None) is Transport.OPENAI or anthropic)
        and getattr(client, "_python", None) is None
        and spec is not None
        and spec.http is None
        and spec.recorded is None
    )


@dataclass
class _Line:
    """One call waiting for its answer: the client that would have sent it and its future."""

    client: ModelClient
    call: ModelCall
    future: asyncio.Future[Response]
    tries: int = 0
    held: float = 0.0  # what this line may cost, held against the budget while its batch runs


@dataclass
class _Group:
    """The calls of one round for one endpoint, key and model."""

    base_url: str
    headers: Mapping[str, str]
    model: str
    alias: str
    lines: dict[str, tuple[_Line, bytes]] = field(default_factory=dict)


class BatchRunner:
    """The batches of one collection (see the module docstring). ``journal``: the store's;
    ``wait_s``: how long a batch is polled before the run stops waiting (None: until it ends);
    ``owner``: who journals (host:pid). ``concurrency``: the collector's, which batch mode sets
    high enough that every call of a round is asked at once."""

    concurrency = 1_000_000

    def __init__(self, journal: BatchJournal, *, wait_s: float | None = None, owner: str = "") -> None:
        self.journal = journal
        self.wait_s = wait_s
        self.owner = owner
        self.submitted = 0  # batches created by this runner
        self.resumed = 0  # journaled batches this runner polled instead of sending their lines again
        self._groups: dict[tuple[str, str, str], _Group] = {}
        self._round: asyncio.Task[None] | None = None
        self._open: dict[str, OpenBatch] | None = None  # store key -> its journaled batch
        self._waiting: dict[str, dict[str, _Line]] = {}  # journaled batch (input file id) -> its lines asked
        self._polls: dict[str, asyncio.Task[None]] = {}
        self._apis: dict[tuple[str, tuple[tuple[str, str], ...]], BatchAPI] = {}
        self._fallback: set[str] = set()
        self._unbatched: set[str] = set()  # endpoints whose upload or create said they have no batch API
        self._guessed: set[str] = set()  # files whose batch was matched by a guess, still followed
        self._deferred: dict[str, _Line] = {}  # lines no guessed batch read so far held

    # -- the client side ------------------------------------------------------------------------

    def wrap(self, client_of: Callable[[str], Any]) -> Callable[[str], Any]:
        """The collector's ``client(alias)``: each model's client, its calls batched where its
        endpoint can take batches (see :func:`batchable`), else the client itself, said once."""
        wrapped: dict[int, BatchingClient] = {}

        def client(alias: str) -> Any:
            inner = client_of(alias)
            if not batchable(inner):
                if alias not in self._fallback:
                    self._fallback.add(alias)
                    warnings.warn(
                        LLMBiasWarning(
                            f"batch mode: {alias}'s endpoint has no OpenAI-compatible Batch API (only the direct "
                            "transport's endpoints and anthropic/ models are batched); its calls are made one by one"
                        ),
                        stacklevel=2,
                    )
                return inner
            if id(inner) not in wrapped:
                wrapped[id(inner)] = BatchingClient(inner, self)
            return wrapped[id(inner)]

        return client

    async def closing(self, work: Coroutine[Any, Any, Any]) -> Any:
        """Run ``work`` (the collection), then close the batch APIs' HTTP sessions."""
        try:
            return await work
        finally:
            for task in self._polls.values():
                task.cancel()
            for api in self._apis.values():
                await api.aclose()

    async def ask(self, client: ModelClient, call: ModelCall) -> Response:
        """``call``'s answer, by batch: polled from a journaled batch that holds it, else sent in
        this round's batch of its endpoint and model."""
        loop = asyncio.get_running_loop()
        line = _Line(client, call, loop.create_future())
        if self._open is None:
            self._open = self.journal.by_key()
        entry = self._open.pop(call.key, None)
        if entry is not None:
            self._waiting.setdefault(entry.input_file_id, {})[call.key] = line
            if entry.input_file_id not in self._polls:
                self.resumed += 1
                self._polls[entry.input_file_id] = asyncio.ensure_future(self._follow(entry))
        else:
            self._add(line)
        return await line.future

    # -- rounds ---------------------------------------------------------------------------------

    def _add(self, line: _Line) -> None:
        client, call = line.client, line.call
        if client.budget is not None:
            client.budget.check(client.spec.alias)  # a spent budget submits no line
        base, headers, body = request_parts(client, call)
        key = (base, json.dumps(sorted(headers.items())), body["model"])
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(base, headers, body["model"], client.spec.alias)
        text = json.dumps({"custom_id": call.key, "method": "POST", "url": CHAT_ENDPOINT, "body": body})
        group.lines[call.key] = (line, text.encode("utf-8"))
        if self._round is None or self._round.done():
            self._round = asyncio.ensure_future(self._close_round())

    async def _close_round(self) -> None:
        """Wait until no call has arrived for :data:`QUIET_S`, then send every group's lines."""
        while True:
            count = sum(len(g.lines) for g in self._groups.values())
            await asyncio.sleep(QUIET_S)
            if sum(len(g.lines) for g in self._groups.values()) == count:
                break
        groups, self._groups = self._groups, {}
        for group in groups.values():
            for part in cut(list(group.lines.values()), limits_of(group.headers)):
                lines = {line.call.key: line for line, _ in part}
                refused = batch_costs.hold(list(lines.values()))  # a batch counts when it is submitted
                if refused is not None:
                    for line in lines.values():
                        if not line.future.done():
                            line.future.set_exception(refused)
                    continue
                data = b"\n".join(text for _, text in part) + b"\n"
                task = asyncio.ensure_future(self._send(group, lines, data))
                self._polls[f"sending-{id(task)}"] = task

    def _api(self, base_url: str, headers: Mapping[str, str]) -> BatchAPI:
        key = (base_url, tuple(sorted(headers.items())))
        if key not in self._apis:
            self._apis[key] = batch_api(base_url, headers)
        return self._apis[key]

    async def _send(self, group: _Group, lines: dict[str, _Line], data: bytes) -> None:
        """Upload one part, journal it, create its batch, then follow it to its end. An endpoint
        that answers the upload or the create as one with no batch API (:data:`NO_BATCH_API`) has
        its calls made one by one from then on, said once: nothing was submitted."""
        api = self._api(group.base_url, group.headers)
        if group.base_url in self._unbatched:
            return await self._one_by_one(lines)
        try:
            file_id = await persist(lambda: api.upload(data, f"llmbias-{group.alias}.jsonl"))
        except ProviderError as exc:
            if exc.status not in NO_BATCH_API:
                self._fail(lines, exc)
                return None
            return await self._unbatch(group, lines, f"POST {api.FILES} answered HTTP {exc.status}")
        entry = self.journal.opened(
            file_id, base_url=group.base_url, model=group.model, alias=group.alias, keys=list(lines), owner=self.owner
        )
        try:
            self._waiting.setdefault(file_id, {}).update(lines)
            entry = await self._create(api, entry)
        except ProviderError as exc:
            if exc.status in NO_BATCH_API and not entry.batch_id:
                self.journal.closed(entry)  # no batch was made of it
                self._waiting.pop(file_id, None)
                return await self._unbatch(group, lines, f"POST {api.BATCHES} answered HTTP {exc.status}")
            self._fail(lines, exc)
            return None
        await self._follow(entry, api)

    async def _unbatch(self, group: _Group, lines: Mapping[str, _Line], why: str) -> None:
        """``group``'s endpoint has no batch API (``why``): its calls go one by one, said once."""
        if group.base_url not in self._unbatched:
            self._unbatched.add(group.base_url)
            warnings.warn(
                LLMBiasWarning(
                    f"batch mode: {group.base_url} has no batch API ({why}); {group.alias}'s calls and those of "
                    "every model there are made one by one"
                ),
                stacklevel=2,
            )
        await self._one_by_one(lines)

    @staticmethod
    def _fail(lines: Mapping[str, _Line], exc: ProviderError) -> None:
        """Fail every line of a batch that could not be submitted (their reserved cost let go)."""
        for line in lines.values():
            batch_costs.release(line)
            if not line.future.done():
                line.future.set_exception(exc)

    @staticmethod
    async def _one_by_one(lines: Mapping[str, _Line]) -> None:
        """Ordinary calls, for an endpoint that has no Batch API (each spends as an ordinary call)."""
        for line in lines.values():
            batch_costs.release(line)

        async def one(line: _Line) -> None:
            try:
                line.future.set_result(await line.client.complete(line.call))
            except Exception as exc:
                line.future.set_exception(exc)

        await asyncio.gather(*(one(line) for line in lines.values()))

    async def _create(self, api: BatchAPI, entry: OpenBatch) -> OpenBatch:
        """Create the batch of ``entry``'s file, journaled with its id. A create whose answer was
        lost (a dropped connection) may have made the batch: the endpoint's batches are looked
        through for one of this file before another create, so a file is never batched twice."""
        pause = 0.2
        for attempt in range(6):
            if attempt and (found := await self._found(api, entry)) is not None:
                return found
            try:
                created = await api.create(entry.input_file_id, {"llmbias_alias": entry.alias})
            except ProviderError as exc:
                if not exc.retryable or attempt == 5:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 10.0)
                continue
            self.submitted += 1
            self._guessed.discard(entry.input_file_id)
            return self.journal.created(entry, str(created["id"]))
        raise AssertionError("unreachable")

    async def _follow(self, entry: OpenBatch, api: BatchAPI | None = None) -> None:
        """Poll ``entry``'s batch to its end and settle its lines (see the module docstring)."""
        try:
            await self._follow_one(entry, api)
        finally:
            self._guessed.discard(entry.input_file_id)
            if not self._guessed and self._deferred:  # what no guessed batch held goes out again
                rest = [line for line in self._deferred.values() if not line.future.done()]
                self._deferred.clear()
                why = "none of the batches matched by request count and time held this call"
                self._again(rest, ProviderError(why, retryable=True))

    async def _follow_one(self, entry: OpenBatch, api: BatchAPI | None) -> None:
        waiting = self._waiting.setdefault(entry.input_file_id, {})
        try:
            if api is None:
                first = next(iter(waiting.values()))
                api = self._api(entry.base_url, request_parts(first.client, first.call)[1])
            if not entry.batch_id:  # stopped between the upload and the create
                self._guessed.add(entry.input_file_id)  # its lines may be in any batch matched by a guess
                entry = await self._adopt(api, entry)
            batch = await self._poll(api, entry)
        except ProviderError as exc:
            if exc.status == 404:  # the batch vanished at the provider: its lines go out again
                self.journal.closed(entry)
                self._again(list(waiting.values()), exc)
                return
            for line in waiting.values():
                batch_costs.release(line)
                if not line.future.done():
                    line.future.set_exception(exc)
            return
        if batch is None:  # the run stopped waiting: the batch stays journaled for the next run
            why = ProviderError(
                f"batch {entry.batch_id} of {entry.alias} still not done after {self.wait_s:g}s "
                "(collection.batch_wait): the next run reads it back without sending its lines again",
                retryable=False,
            )
            for line in waiting.values():
                if not line.future.done():
                    line.future.set_exception(why)
            return
        results = await self._read(api, batch)
        self._settle(entry, batch, results, waiting)
        self.journal.closed(entry)

    async def _adopt(self, api: BatchAPI, entry: OpenBatch) -> OpenBatch:
        """The batch the provider made of ``entry``'s file before the run stopped, else a new one."""
        api.expect(entry.input_file_id, entry.submitted, len(entry.keys))
        return await self._found(api, entry) or await self._create(api, entry)

    async def _found(self, api: BatchAPI, entry: OpenBatch) -> OpenBatch | None:
        """``entry`` with the id of the listed batch made of its file, journaled; None if none is.
        A batch matched by a guess (``guessed``: Anthropic's, by request count and time) is
        followed as one of a pool whose results are pooled (see :meth:`_settle`)."""
        for batch in await persist(lambda: api.listed(100)):
            if batch.get("input_file_id") == entry.input_file_id and isinstance(batch.get("id"), str):
                if batch.get("guessed"):
                    self._guessed.add(entry.input_file_id)
                else:
                    self._guessed.discard(entry.input_file_id)
                return self.journal.created(entry, batch["id"])
        return None

    async def _poll(self, api: BatchAPI, entry: OpenBatch) -> dict[str, Any] | None:
        """The batch once it is terminal; None when ``wait_s`` passed first."""
        started = time.monotonic()
        wait = POLL_FIRST_S
        while True:
            batch = await persist(lambda: api.retrieve(entry.batch_id))
            if batch.get("status") in TERMINAL:
                return batch
            if self.wait_s is not None and time.monotonic() - started >= self.wait_s:
                return None
            await asyncio.sleep(wait)
            wait = min(POLL_MAX_S, wait * 2)

    @staticmethod
    async def _read(api: BatchAPI, batch: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """custom_id -> its line, from the output file and the error file."""
        out: dict[str, dict[str, Any]] = {}
        for name in ("output_file_id", "error_file_id"):
            file_id = batch.get(name)
            if not isinstance(file_id, str) or not file_id:
                continue
            raw = await persist(functools.partial(api.content, file_id))
            for text in raw.splitlines():
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                    out.setdefault(line["custom_id"], line)
        return out

    def _settle(
        self, entry: OpenBatch, batch: Mapping[str, Any], results: Mapping[str, Any], waiting: Mapping[str, _Line]
    ) -> None:
        """Each line's fate: an answer, an error, or another round. A batch matched by a guess may
        hold the lines of another guessed batch (two parts of one size posted together): its
        results settle any followed line they hold, and a line of its own they lack waits for the
        pool's other batches before it goes out again."""
        status = str(batch.get("status"))
        again: list[_Line] = []
        last: ProviderError | None = None
        guessed = entry.input_file_id in self._guessed
        pool = dict(waiting)
        if guessed:  # the lines of the other guessed batches, those still followed and those ended
            for other in self._guessed:
                pool.update({k: line for k, line in self._waiting.get(other, {}).items() if k in results})
            pool.update({k: line for k, line in self._deferred.items() if k in results})
        for key, line in pool.items():
            if line.future.done():
                continue
            result = results.get(key)
            if result is None and guessed:
                self._deferred[key] = line
                continue
            answer, error = fate(result, status, entry)
            if answer is not None:
                try:
                    response = line.client._to_response(
                        line.call, parse_completion(answer), time.time() - entry.submitted
                    )
                except ProviderError as exc:  # an empty completion: worth another round
                    again.append(line)
                    last = exc
                    continue
                batch_costs.settle(line, response.prompt_tokens, response.completion_tokens)
                line.future.set_result(response)
            elif error is not None and error.retryable:
                again.append(line)
                last = error
            elif error is not None:
                batch_costs.release(line)
                line.future.set_exception(error)
        if again:
            self._again(again, last)

    def _again(self, lines: list[_Line], why: ProviderError | None) -> None:
        """Send ``lines`` in the next round, those that have used up their retries failed."""
        for line in lines:
            batch_costs.release(line)
            line.tries += 1
            retries = getattr(getattr(line.client, "policy", None), "retries", 5)
            if line.tries > retries:
                line.future.set_exception(
                    why or ProviderError("the batch gave no answer for this call", retryable=False)
                )
            elif not line.future.done():
                self._add(line)


class BatchingClient:
    """A model's client in batch mode: :meth:`complete` asks the runner (see :class:`BatchRunner`)."""

    def __init__(self, inner: ModelClient, runner: BatchRunner) -> None:
        self.inner = inner
        self.runner = runner
        self.spec = inner.spec

    async def complete(self, call: ModelCall) -> Response:
        if not self.inner._credentials_checked:  # a missing key fails now, as an ordinary call does
            from pytest_llmbias.clients.litellm_client import check_credentials

            check_credentials(self.inner.spec, direct=self.inner.transport is Transport.OPENAI)
            self.inner._credentials_checked = True
        return await self.runner.ask(self.inner, call)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.inner.aclose()
