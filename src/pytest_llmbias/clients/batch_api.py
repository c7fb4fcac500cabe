"""An OpenAI-compatible endpoint's Batch API: ``/files`` (purpose ``batch``) and ``/batches``.

The wire only; what is batched, journaled and read back is :mod:`pytest_llmbias.clients.batching`'s.
Errors are :class:`~pytest_llmbias.errors.ProviderError` with the HTTP status and whether a retry
can help, as the direct transport raises them (see
:func:`~pytest_llmbias.clients.openai_transport.status_error`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from pytest_llmbias.clients.openai_transport import status_error
from pytest_llmbias.errors import ProviderError

#: the endpoint every line of a batch calls
CHAT_ENDPOINT = "/v1/chat/completions"

#: OpenAI's limits on one batch's input file
MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024

#: the states after which a batch changes no more
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


class BatchAPI:
    """The Batch API of one endpoint (``base_url``: the ``api_base``, e.g. ``http://host/v1``),
    with the request headers of its model (the key as a bearer token). One aiohttp session,
    opened on first use on the running loop, closed by :meth:`aclose`."""

    #: where a part is uploaded, and where a batch of it is created (relative to ``base_url``)
    FILES, BATCHES = "/files", "/batches"

    def __init__(self, base_url: str, headers: Mapping[str, str], *, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        self.timeout = timeout
        self._session: Any = None

    def _client(self) -> Any:
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def _request(self, method: str, path: str, **kwargs: Any) -> bytes:
        import aiohttp

        try:
            async with self._client().request(method, self.base_url + path, headers=self.headers, **kwargs) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    raise status_error(resp.status, raw, resp.reason, resp.headers.get("Retry-After"))
                return bytes(raw)
        except asyncio.TimeoutError:
            raise ProviderError(
                f"Timeout: the batch API at {self.base_url} did not answer within {self.timeout:g}s", retryable=True
            ) from None
        except aiohttp.ClientError as exc:
            raise ProviderError(f"{type(exc).__name__}: {exc}", retryable=True) from None

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        raw = await self._request(method, path, **kwargs)
        try:
            data = json.loads(raw)
        except ValueError:
            raise ProviderError(
                f"the batch API at {self.base_url} answered {path} with no JSON", retryable=True
            ) from None
        if not isinstance(data, dict):
            raise ProviderError(f"the batch API at {self.base_url} answered {path} with no object", retryable=True)
        return data

    async def upload(self, lines: bytes, filename: str) -> str:
        """Upload a batch's input file (JSON lines); its file id."""
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", lines, filename=filename, content_type="application/jsonl")
        data = await self._json("POST", self.FILES, data=form)
        if not isinstance(data.get("id"), str):
            raise ProviderError(f"the batch API at {self.base_url} gave the uploaded file no id", retryable=True)
        return str(data["id"])

    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> dict[str, Any]:
        """Create a batch of the chat completions in ``input_file_id``, to finish within 24 hours."""
        body = {
            "input_file_id": input_file_id,
            "endpoint": CHAT_ENDPOINT,
            "completion_window": "24h",
            "metadata": dict(metadata),
        }
        data = await self._json("POST", self.BATCHES, json=body)
        if not isinstance(data.get("id"), str):
            raise ProviderError(f"the batch API at {self.base_url} gave the new batch no id", retryable=True)
        return data

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        """The batch's object: its ``status``, ``request_counts`` and file ids."""
        return await self._json("GET", f"/batches/{batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        return await self._json("POST", f"/batches/{batch_id}/cancel")

    def expect(self, input_file_id: str, posted: float, requests: int) -> None:
        """A create of ``input_file_id`` (``requests`` lines) may have been posted at ``posted`` by a
        run that stopped before it heard the answer. Nothing to do here: OpenAI's batches name their
        input file, which :meth:`listed` gives."""

    async def listed(self, limit: int = 100) -> list[dict[str, Any]]:
        """The endpoint's most recent batches (one page)."""
        data = await self._json("GET", "/batches", params={"limit": str(limit)})
        return [b for b in data.get("data") or () if isinstance(b, dict)]

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (a batch's output or error file)."""
        return await self._request("GET", f"/files/{file_id}/content")

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
