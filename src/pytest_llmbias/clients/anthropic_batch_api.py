"""Anthropic's Message Batches API (``/v1/messages/batches``), spoken as the runner speaks OpenAI's
Batch API (:class:`~pytest_llmbias.clients.batch_api.BatchAPI`: upload a file, create a batch of it).

The runner's flow is OpenAI's; this class translates. :meth:`AnthropicBatchAPI.upload` keeps a
part's lines here (Anthropic takes the requests in the create itself) under a local file id;
:meth:`~AnthropicBatchAPI.create` posts them as ``{"requests": [{"custom_id", "params"}]}``;
:meth:`~AnthropicBatchAPI.retrieve` answers OpenAI's ``status``, ``request_counts`` and, once the
batch has ended, its ``results_url`` as the ``output_file_id``; :meth:`~AnthropicBatchAPI.content`
rewrites each result in OpenAI's output-line shape, so that
:func:`~pytest_llmbias.clients.batch_lines.fate` reads it unchanged. :func:`anthropic_parts` builds
a call's request (Anthropic's params and headers) from what the call would send through litellm.

Anthropic's batch object names no input file: a create whose answer was lost is found among the
listed batches by what is known of the file posted (its request count, the time of the post): this
process's own posts, and those a run killed between its create and the batch's id journaled
(the journal holds the lines' keys and when the create was about to be posted,
:meth:`~AnthropicBatchAPI.expect`). A batch so matched is read back like any other: a line whose
key its results do not hold is sent again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pytest_llmbias.clients.batch_api import BatchAPI
from pytest_llmbias.errors import ProviderError

if TYPE_CHECKING:
    from pytest_llmbias.clients.litellm_client import ModelClient
    from pytest_llmbias.store.calls import ModelCall

#: where an ``anthropic/`` model without an ``api_base`` goes
ANTHROPIC_BASE = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_KEY = "ANTHROPIC_API_KEY"
PREFIX = "anthropic/"

#: Anthropic's limits on one batch
MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024

#: the answer's length where the call gives none (Anthropic requires one)
DEFAULT_MAX_TOKENS = 1024

#: the call's parameters that Anthropic's Messages API takes as they are
_PASSED = ("temperature", "top_p", "top_k", "stop_sequences", "metadata")

#: an errored result's error type -> the HTTP status an ordinary call would have met
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 503,  # Anthropic's 529: overloaded, worth another round as a 503 is
}

#: Anthropic's stop reasons -> OpenAI's finish reasons
FINISH_REASON = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}

#: the tool a structured answer (``response_format``'s JSON schema) is asked through, as litellm names it
JSON_TOOL = "json_tool_call"

#: how far a listed batch's creation may precede the post that may have made it (clock skew)
_SKEW_S = 120.0


def speaks_anthropic(headers: Mapping[str, str]) -> bool:
    """Whether a batch group's request headers are Anthropic's (see :func:`anthropic_parts`)."""
    return any(k.lower() == "anthropic-version" for k in headers)


def anthropic_base(api_base: str | None) -> str:
    """The API's root for an ``api_base`` (litellm's form may end in ``/v1`` or ``/v1/messages``)."""
    base = str(api_base or ANTHROPIC_BASE).rstrip("/")
    for tail in ("/v1/messages", "/v1"):
        if base.endswith(tail):
            return base[: -len(tail)]
    return base


def anthropic_parts(client: ModelClient, call: ModelCall) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The API's root, the headers and the request's ``params`` for ``call`` to an ``anthropic/``
    model: the model without its prefix, ``max_tokens`` (the call's, else
    :data:`DEFAULT_MAX_TOKENS`), the system messages in ``system``, the sampling parameters
    Anthropic takes (``stop`` as ``stop_sequences``) and ``extra_body``'s members; the key is the
    entry's, else ``$ANTHROPIC_API_KEY``. A ``response_format`` JSON schema is asked as litellm
    asks it, through one tool the answer must call (:data:`JSON_TOOL`). Parameters Anthropic has
    no use for (``seed``, ``logprobs``) are dropped, as litellm drops them for an ordinary call."""
    params = client._sent_params(call)
    base = anthropic_base(call.credentials.get("api_base", call.api_base))
    key = client.spec.api_key() or os.environ.get(ANTHROPIC_KEY) or None
    headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
    if key:
        headers["x-api-key"] = key
    extra_headers = params.get("extra_headers")
    if isinstance(extra_headers, Mapping):
        headers.update({str(k): str(v) for k, v in extra_headers.items()})
    system = [content for role, content in call.messages if role == "system"]
    body: dict[str, Any] = {
        "model": call.model[len(PREFIX) :] if call.model.startswith(PREFIX) else call.model,
        "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS),
        "messages": [{"role": r, "content": c} for r, c in call.messages if r != "system"],
    }
    if system:
        body["system"] = "\n\n".join(system)
    body.update({name: params[name] for name in _PASSED if params.get(name) is not None})
    stop = params.get("stop")
    if stop is not None and "stop_sequences" not in body:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    schema = _json_schema(params.get("response_format"))
    if schema is not None:  # as litellm asks it of Anthropic: one tool the answer must call
        body["tools"] = [{"name": JSON_TOOL, "input_schema": schema}]
        body["tool_choice"] = {"type": "tool", "name": JSON_TOOL}
    if isinstance(params.get("extra_body"), Mapping):
        body.update(params["extra_body"])
    return base, headers, body


class AnthropicBatchAPI(BatchAPI):
    """Anthropic's Message Batches at ``base_url`` (the API's root, e.g. ``https://api.anthropic.com``)
    with a model's headers, behind :class:`~pytest_llmbias.clients.batch_api.BatchAPI`'s methods
    (see the module docstring). One aiohttp session, opened on first use, closed by :meth:`aclose`."""

    #: no upload (the lines go in the create); where a batch is created
    FILES, BATCHES = "(no upload)", "/v1/messages/batches"

    def __init__(self, base_url: str, headers: Mapping[str, str], *, timeout: float = 60.0) -> None:
        super().__init__(anthropic_base(base_url), headers, timeout=timeout)
        self._files: dict[str, bytes] = {}  # local file id -> the part's lines
        self._posted: dict[str, tuple[float, int]] = {}  # local file id -> (when its create was posted, requests)
        self._made: dict[str, str] = {}  # batch id -> the local file id it was made of
        self._guesses: set[str] = set()  # the batches of ``_made`` matched by request count and time

    async def upload(self, lines: bytes, filename: str) -> str:
        """Keep a part's lines (OpenAI's input lines) for :meth:`create`; their local file id. No request."""
        file_id = "anthropic-file-" + hashlib.sha256(lines).hexdigest()
        self._files[file_id] = lines
        return file_id

    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> dict[str, Any]:
        """Create a batch of the requests kept under ``input_file_id`` (``metadata``: Anthropic's batches
        take none); the batch in OpenAI's shape. A file this process does not hold is a 404."""
        lines = self._files.get(input_file_id)
        if lines is None:
            raise ProviderError(
                f"the lines of {input_file_id} were kept by the run that prepared them, not this one", status=404
            )
        requests = []
        for text in lines.splitlines():
            line = json.loads(text)
            requests.append({"custom_id": line["custom_id"], "params": line["body"]})
        self._posted[input_file_id] = (time.time(), len(requests))
        data = await self._json("POST", self.BATCHES, json={"requests": requests})
        if not isinstance(data.get("id"), str):
            raise ProviderError(f"the batch API at {self.base_url} gave the new batch no id", retryable=True)
        self._made[data["id"]] = input_file_id
        return self._openai(data)

    def expect(self, input_file_id: str, posted: float, requests: int) -> None:
        """A create of ``requests`` requests may have been posted at ``posted`` (a run's journal
        says so, the run having stopped before the answer): :meth:`listed` matches it as it matches
        this process's own posts."""
        self._posted.setdefault(input_file_id, (posted, requests))

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        """The batch in OpenAI's shape: its ``status``, ``request_counts`` and, once it has ended, its
        results as the ``output_file_id``."""
        return self._openai(await self._json("GET", f"/v1/messages/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        return self._openai(await self._json("POST", f"/v1/messages/batches/{batch_id}/cancel"))

    async def listed(self, limit: int = 100) -> list[dict[str, Any]]:
        """The most recent batches (one page), in OpenAI's shape; ``input_file_id`` where this process
        made the batch, or posted a create of that many requests shortly before it was made (or was
        told of such a post, :meth:`expect`): then ``guessed`` is true."""
        data = await self._json("GET", "/v1/messages/batches", params={"limit": str(limit)})
        out = [self._openai(b) for b in data.get("data") or () if isinstance(b, dict)]
        claimed = {b["input_file_id"] for b in out if b.get("input_file_id")}
        for batch in out:
            if batch.get("input_file_id"):
                continue
            for file_id, (posted, count) in self._posted.items():
                made = _epoch(batch.get("created_at"))
                if file_id in claimed or made is None or made < posted - _SKEW_S:
                    continue
                if batch["request_counts"]["total"] == count:
                    batch["input_file_id"], batch["guessed"] = file_id, True
                    self._made[str(batch["id"])] = file_id
                    self._guesses.add(str(batch["id"]))
                    claimed.add(file_id)
                    break
        return out

    async def content(self, file_id: str) -> bytes:
        """A batch's results (``file_id``: its ``results_url``), each line in OpenAI's output-line shape."""
        path = file_id[len(self.base_url) :] if file_id.startswith(self.base_url + "/") else file_id
        if "://" in path:  # the key goes only where the batches are
            raise ProviderError(f"the batch's results are at {file_id}, not at {self.base_url}", retryable=False)
        raw = await self._request("GET", path)
        out = []
        for text in raw.splitlines():
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                out.append(json.dumps(openai_line(line)))
        return "\n".join(out).encode("utf-8")

    def _openai(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """An Anthropic batch object as OpenAI's Batch API describes a batch."""
        counts = _mapping(batch.get("request_counts"))
        n = {k: int(counts.get(k) or 0) for k in ("processing", "succeeded", "errored", "canceled", "expired")}
        state = batch.get("processing_status")
        if state == "ended":
            if batch.get("cancel_initiated_at"):
                status = "cancelled"
            elif n["expired"] and not (n["succeeded"] or n["errored"] or n["canceled"]):
                status = "expired"
            else:
                status = "completed"
        else:
            status = "cancelling" if state == "canceling" else "in_progress"
        results = batch.get("results_url")
        return {
            "id": batch.get("id"),
            "object": "batch",
            "status": status,
            "input_file_id": self._made.get(str(batch.get("id"))),
            "guessed": str(batch.get("id")) in self._guesses,
            "output_file_id": results if status in ("completed", "cancelled", "expired") and results else None,
            "error_file_id": None,
            "created_at": batch.get("created_at"),
            "request_counts": {
                "total": sum(n.values()),
                "completed": n["succeeded"],
                "failed": n["errored"] + n["canceled"] + n["expired"],
            },
        }


def openai_line(line: Mapping[str, Any]) -> dict[str, Any]:
    """One line of Anthropic's results as a line of OpenAI's output or error file."""
    custom_id = line.get("custom_id")
    result = _mapping(line.get("result"))
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), Mapping):
        return {"custom_id": custom_id, "response": {"status_code": 200, "body": completion(result["message"])}}
    if kind == "errored":
        outer = _mapping(result.get("error"))
        inner = _mapping(outer.get("error")) or outer
        etype = str(inner.get("type") or "api_error")
        error = {"message": str(inner.get("message") or etype), "type": etype}
        body = {"error": error}
        return {"custom_id": custom_id, "response": {"status_code": ERROR_STATUS.get(etype, 500), "body": body}}
    if kind == "canceled":
        error = {"code": "batch_cancelled", "message": "the batch was cancelled before this request ran"}
        return {"custom_id": custom_id, "response": None, "error": error}
    if kind == "expired":
        error = {"code": "batch_expired", "message": "the batch expired before this request ran"}
        return {"custom_id": custom_id, "response": None, "error": error}
    return {"custom_id": custom_id, "response": None, "error": {"code": "server_error", "message": f"result {kind}"}}


def completion(message: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic message as an OpenAI chat completion: its text blocks' text, the finish reason of
    its stop reason, its input and output tokens as the prompt's and the completion's."""
    blocks = [b for b in message.get("content") or () if isinstance(b, Mapping)]
    text = "".join(b.get("text") or "" for b in blocks if b.get("type") == "text")
    tool = [b for b in blocks if b.get("type") == "tool_use" and b.get("name") == JSON_TOOL]
    if tool:  # a structured answer: the tool's input is the JSON the schema asked for
        text = json.dumps(tool[0].get("input"))
    usage = _mapping(message.get("usage"))
    prompt, answer = usage.get("input_tokens"), usage.get("output_tokens")
    reason = "end_turn" if tool else message.get("stop_reason")
    return {
        "id": message.get("id"),
        "object": "chat.completion",
        "model": message.get("model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": FINISH_REASON.get(str(reason), reason),
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": answer,
            "total_tokens": prompt + answer if isinstance(prompt, int) and isinstance(answer, int) else None,
        },
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _json_schema(response_format: Any) -> Any:
    """The JSON schema a ``response_format`` of type ``json_schema`` asks for (None: it asks none)."""
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    return spec.get("schema") if isinstance(spec, Mapping) and isinstance(spec.get("schema"), Mapping) else None


def _epoch(stamp: Any) -> float | None:
    """An RFC 3339 time (Anthropic's ``created_at``) as seconds since the epoch."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
