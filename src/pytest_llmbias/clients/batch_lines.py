"""A batch's lines on the wire: the request a call makes (as the direct transport would send it,
or Anthropic's Messages API takes it for an ``anthropic/`` model), the lines cut at the provider's
limits on one file, each line's fate read back from the output or error file, the batch API a
group of lines goes to, and the retries of a Batch API request (see
:mod:`pytest_llmbias.clients.batching`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from pytest_llmbias.clients import anthropic_batch_api as anthropic
from pytest_llmbias.clients.batch_api import MAX_BYTES, MAX_LINES, BatchAPI
from pytest_llmbias.clients.openai_transport import OPENAI_BASE, _members, wire_model
from pytest_llmbias.errors import ProviderError

if TYPE_CHECKING:
    from pytest_llmbias.clients.litellm_client import ModelClient
    from pytest_llmbias.store.batch_journal import OpenBatch
    from pytest_llmbias.store.calls import ModelCall

#: statuses (and error codes of the error file) that another round may cure
TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
TRANSIENT_CODES = frozenset({"batch_expired", "rate_limit_exceeded", "server_error", "timeout"})


def fate(result: Any, status: str, entry: OpenBatch) -> tuple[bytes | None, ProviderError | None]:
    """A line's answer body (a 200), or its error (retryable where another round may cure it)."""
    if not isinstance(result, Mapping):
        if status == "cancelled":
            return None, ProviderError(f"batch {entry.batch_id} was cancelled before this call ran", retryable=False)
        return None, ProviderError(f"batch {entry.batch_id} ended {status} without this call", retryable=True)
    response = result.get("response")
    error = result.get("error")
    if isinstance(response, Mapping) and response.get("status_code") == 200:
        return json.dumps(response.get("body")).encode("utf-8"), None
    if isinstance(response, Mapping) and isinstance(response.get("status_code"), int):
        code = int(response["status_code"])
        body = response.get("body")
        detail = body.get("error") if isinstance(body, Mapping) else None
        message = detail.get("message") if isinstance(detail, Mapping) else None
        return None, ProviderError(
            f"HTTP {code} in batch {entry.batch_id}: {message or 'the line failed'}",
            status=code,
            retryable=code in TRANSIENT_STATUSES,
        )
    why = str(error.get("code")) if isinstance(error, Mapping) else "unknown"
    message = error.get("message") if isinstance(error, Mapping) else None
    if why == "batch_cancelled":
        return None, ProviderError(f"batch {entry.batch_id} was cancelled: {message or why}", retryable=False)
    return None, ProviderError(
        f"{why} in batch {entry.batch_id}: {message or 'no answer'}", retryable=why in TRANSIENT_CODES
    )


def cut(
    lines: list[tuple[Any, bytes]], limits: tuple[int, int] = (MAX_LINES, MAX_BYTES)
) -> list[list[tuple[Any, bytes]]]:
    """``lines`` cut at the provider's ``limits`` (lines, bytes) on one file (see :func:`limits_of`)."""
    most_lines, most_bytes = limits
    parts: list[list[tuple[Any, bytes]]] = [[]]
    size = 0
    for item in lines:
        if parts[-1] and (len(parts[-1]) >= most_lines or size + len(item[1]) + 1 > most_bytes):
            parts.append([])
            size = 0
        parts[-1].append(item)
        size += len(item[1]) + 1
    return parts


async def persist(request: Callable[[], Coroutine[Any, Any, Any]], tries: int = 6) -> Any:
    """``request()``, again after a growing pause where the failure is retryable (a poll that met a
    transient 500, a dropped connection)."""
    pause = 0.2
    for attempt in range(tries):
        try:
            return await request()
        except ProviderError as exc:
            if not exc.retryable or attempt == tries - 1:
                raise
            await asyncio.sleep(pause if exc.retry_after is None else min(exc.retry_after, 60.0))
            pause = min(pause * 2, 10.0)
    raise AssertionError("unreachable")


def limits_of(headers: Mapping[str, str]) -> tuple[int, int]:
    """The lines and bytes one batch may hold at the provider a group's ``headers`` are for."""
    if anthropic.speaks_anthropic(headers):
        return anthropic.MAX_REQUESTS, anthropic.MAX_BYTES
    return MAX_LINES, MAX_BYTES


def batch_api(base_url: str, headers: Mapping[str, str]) -> BatchAPI:
    """The batch API that takes a group's lines: Anthropic's Message Batches for Anthropic's
    headers (see :func:`request_parts`), else the endpoint's OpenAI-compatible Batch API."""
    if anthropic.speaks_anthropic(headers):
        return anthropic.AnthropicBatchAPI(base_url, headers)
    return BatchAPI(base_url, headers)


def request_parts(client: ModelClient, call: ModelCall) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The endpoint's base URL, the headers and the JSON body that the direct transport would send
    for ``call`` (see :meth:`~pytest_llmbias.clients.openai_transport.OpenAITransport.complete`);
    for an ``anthropic/`` model, Anthropic's (see
    :func:`~pytest_llmbias.clients.anthropic_batch_api.anthropic_parts`)."""
    if call.model.startswith(anthropic.PREFIX):
        return anthropic.anthropic_parts(client, call)
    params = client._sent_params(call)
    base = call.credentials.get("api_base", call.api_base) or OPENAI_BASE
    _, headers = client._direct._headers(params, base, client._direct_key())
    body: dict[str, Any] = {
        "model": wire_model(call.model),
        "messages": [{"role": r, "content": c} for r, c in call.messages],
    }
    body.update(_members(params))
    return str(base).rstrip("/"), headers, body
