"""The direct transport: OpenAI-compatible chat completions over one pooled aiohttp session (which
also carries the requests of HTTP applications, see :mod:`pytest_llmbias.clients.http_target`).

vLLM, Ollama's ``/v1``, LM Studio, llama.cpp's server, TGI and OpenAI itself speak the same
``POST {api_base}/chat/completions``. For them this transport skips litellm: one JSON body out,
one JSON body in, a fraction of a millisecond of CPU a call where litellm spends several, and
no multi-second import before the first request. Everything but the wire is shared with the
litellm transport through :class:`~pytest_llmbias.clients.litellm_client.ModelClient`: the store
key, retries and Retry-After, timeouts, the concurrency and rate limits, usage, error messages and
the masking of credentials.

Errors are raised as :class:`~pytest_llmbias.errors.ProviderError` with the HTTP status, whether a
retry can help, and the server's Retry-After, so the client decides as it does for litellm's.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from pytest_llmbias.choices import Transport
from pytest_llmbias.clients.http1 import HTTP1Pool
from pytest_llmbias.clients.retry import parse_retry_after, retryable_status
from pytest_llmbias.config.redaction import strip_userinfo
from pytest_llmbias.errors import ProviderError
from pytest_llmbias.store.calls import ModelCall, answer_alternatives, construct
from pytest_llmbias.store.kept import IdentityCache

#: where an ``openai/`` model without an ``api_base`` goes
OPENAI_BASE = "https://api.openai.com/v1"

#: model-string prefixes of OpenAI-compatible endpoints: the direct transport strips the prefix
#: and sends the rest as the model name. Other providers (anthropic/, bedrock/, vertex_ai/,
#: ollama/'s native API...) have their own wire formats and stay on litellm.
DIRECT_PREFIXES = ("openai/", "hosted_vllm/", "lm_studio/", "llamafile/")

#: parameters that are not part of the request body
_NOT_BODY = frozenset({"extra_headers", "extra_body", "extra_query", "api_key", "api_base", "timeout"})
#: what the lean client sends of a call: (host, port, path), headers, the body around its messages
_Prepared = tuple[tuple[str, int, str], Mapping[str, str], str, str]


def resolve_transport(model: str, api_base: str | None, transport: str | Transport = Transport.AUTO) -> Transport:
    """The transport a model's calls take. ``auto``: the direct path for an OpenAI-compatible
    model string (``openai/...`` with or without an ``api_base``; ``hosted_vllm/``, ``lm_studio/``
    and ``llamafile/`` with one), litellm for every other provider. ``openai`` forces the direct
    path (it needs an OpenAI-compatible endpoint); ``litellm`` forces litellm."""
    choice = Transport.parse(transport, what="transport")
    if choice is not Transport.AUTO:
        return choice
    if model.startswith("openai/"):
        return Transport.OPENAI
    if model.startswith(DIRECT_PREFIXES) and api_base:
        return Transport.OPENAI
    return Transport.LITELLM


def wire_model(model: str) -> str:
    """The model name the endpoint knows: the model string without its provider prefix."""
    for prefix in DIRECT_PREFIXES:
        if model.startswith(prefix):
            return model[len(prefix) :]
    return model


@dataclass(frozen=True)
class Completion:
    """The parts of an answer the client keeps."""

    text: Any
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    #: the first answer token's alternatives, where the endpoint returned log-probabilities
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    #: the provider's ``system_fingerprint`` (its backend's configuration), where it gives one
    system_fingerprint: str | None = None
    #: the alternatives at the answer's first number (see :attr:`Response.number_logprobs`)
    number_logprobs: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] | None = None


class OpenAITransport:
    """Sends chat completions to OpenAI-compatible endpoints over one aiohttp session, created on
    first use on the running loop (the session's loop) and closed by :meth:`aclose`. The
    connection pool is unbounded: the collector and the client's limits bound concurrency."""

    def __init__(self) -> None:
        self._session: Any = None
        self._endpoints: dict[str, tuple[str, str | None]] = {}  # api_base -> (URL, Basic header)
        self._timeouts: dict[float, Any] = {}  # seconds -> aiohttp.ClientTimeout
        self._lean: dict[str, tuple[str, int, str] | None] = {}  # URL -> (host, port, path) when plain http
        self._pool: HTTP1Pool | None = None  # the lean client's connections
        #: what _prepared gives, by (model, api_base, key, id(params))
        self._requests: IdentityCache[_Prepared | None] = IdentityCache(256)

    @property
    def open(self) -> bool:
        """Whether an HTTP session is open (and :meth:`aclose` has something to close)."""
        return (self._session is not None and not self._session.closed) or self._pool is not None

    def _client(self) -> Any:
        if self._session is None or self._session.closed:
            import aiohttp

            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=json.dumps, skip_auto_headers=("User-Agent",)
            )
        return self._session

    async def complete(
        self, call: ModelCall, params: Mapping[str, Any], *, api_base: str | None, api_key: str | None, timeout: float
    ) -> Completion:
        """One attempt of ``call``. ``params`` are the call's parameters with its credentials put
        back (``extra_headers`` become headers, ``extra_body`` joins the body, ``extra_query`` the
        URL). Raises ProviderError (status, retryable, retry_after) on any failure."""
        prepared = self._prepared(call.model, params, api_base, api_key)
        if prepared is not None:  # the lean client, the request's parts kept (see _prepared)
            target, kept_headers, opening, closing = prepared
            try:
                listed = _messages_json(call.messages_json)
            except TypeError:
                listed = None
            if listed is not None:
                text = opening + listed + closing
                return parse_completion(await self._post_lean(target, text, kept_headers, timeout))
        url, headers = self._headers(params, api_base, api_key)
        body: dict[str, Any] = {
            "model": wire_model(call.model),
            "messages": [{"role": r, "content": c} for r, c in call.messages],
        }
        body.update(_members(params))
        query = params.get("extra_query") if isinstance(params.get("extra_query"), Mapping) else None
        data = json.dumps(body)
        lean = self._lean_target(url) if query is None else None
        if lean is not None:
            return parse_completion(await self._post_lean(lean, data, headers, timeout))
        return parse_completion(await self.send("POST", url, data, headers, query=query, timeout=timeout))

    def _headers(
        self, params: Mapping[str, Any], api_base: str | None, api_key: str | None
    ) -> tuple[str, dict[str, str]]:
        """The chat-completions URL and the request's headers: JSON, the key as a bearer token,
        ``extra_headers``, and the ``user:password@`` of the ``api_base`` as HTTP Basic unless a
        key or header gives an ``Authorization``."""
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        extra_headers = params.get("extra_headers")
        if isinstance(extra_headers, Mapping):
            headers.update({str(k): str(v) for k, v in extra_headers.items()})
        url, basic = self._endpoint(api_base or OPENAI_BASE)
        if basic is not None and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = basic
        return url, headers

    def _prepared(
        self, model: str, params: Mapping[str, Any], api_base: str | None, api_key: str | None
    ) -> _Prepared | None:
        """For a call the lean client sends: its (host, port, path), headers, and the JSON body's
        text before and after its messages. That is the body :meth:`complete` builds, as
        ``json.dumps`` writes it without escaping what is not ASCII (UTF-8 on the wire, as the
        OpenAI SDK sends it), so that the messages' JSON is the call's own, written once for both
        the request and the stored record. Kept per model, endpoint, key and parameters object,
        which the calls of one model and sample share (see ``ModelClient``). None for any other
        call (query parameters, no plain ``http://`` endpoint, a body member named ``model`` or
        ``messages`` among its parameters, a parameter that is no JSON value)."""
        memo = (model, api_base, api_key, id(params))
        kept = self._requests.find(memo)
        if kept is not None and kept[0] is params:
            return kept[2]
        prepared = None
        if not isinstance(params.get("extra_query"), Mapping):
            url, headers = self._headers(params, api_base, api_key)
            target = self._lean_target(url)
            members = _members(params)
            try:
                rest = _dumps(members)[1:-1] if "model" not in members and "messages" not in members else None
            except (TypeError, ValueError):
                rest = None
            if target is not None and rest is not None:
                opening = '{"model": ' + _dumps(wire_model(model)) + ', "messages": ['
                prepared = (target, headers, opening, "]" + (", " + rest if rest else "") + "}")
        return self._requests.put(memo, prepared, params)

    def _lean_target(self, url: str) -> tuple[str, int, str] | None:
        """(host, port, path) of a plain-``http://`` URL, which :mod:`~pytest_llmbias.clients.http1`
        serves; None for any other (aiohttp's); worked out once per URL."""
        if url not in self._lean:
            parts = urlsplit(url)
            lean = None
            if parts.scheme == "http" and parts.hostname and not parts.query and not parts.fragment:
                try:
                    lean = (parts.hostname, parts.port or 80, parts.path or "/")
                except ValueError:  # a port that is no number: aiohttp says what is wrong
                    lean = None
            self._lean[url] = lean
        return self._lean[url]

    async def _post_lean(
        self, target: tuple[str, int, str], body: str, headers: Mapping[str, str], timeout: float
    ) -> bytes:
        """:meth:`send` of a chat completion on the lean HTTP/1.1 client: the same errors."""
        if self._pool is None:
            self._pool = HTTP1Pool()
        host, port, path = target
        try:
            resp = await self._pool.post(host, port, path, headers, body.encode("utf-8"), timeout)
        except asyncio.TimeoutError:
            raise ProviderError(f"Timeout: no complete answer within {timeout:g}s", retryable=True) from None
        except ValueError as exc:  # a header with a line break
            raise ProviderError(str(exc), retryable=False) from None
        except OSError as exc:  # refused or dropped connections, a body cut short: worth another try
            raise ProviderError(f"{type(exc).__name__}: {exc}", retryable=True) from None
        if 300 <= resp.status < 400:
            raise ProviderError(
                f"HTTP {resp.status}: the endpoint redirects to {resp.headers.get('location', '?')!r}: give that "
                "address as the api_base",
                status=resp.status,
                retryable=False,
            )
        if resp.status >= 400:
            raise status_error(resp.status, resp.body, resp.reason, resp.headers.get("retry-after"))
        return resp.body

    def _endpoint(self, base: str) -> tuple[str, str | None]:
        """The chat-completions URL of ``base`` (its user:password@ left out) and, where it holds
        one, the HTTP Basic header value of its user:password@; worked out once per base."""
        known = self._endpoints.get(base)
        if known is None:
            parts = urlsplit(base)
            basic = None
            bare = base
            if parts.username is not None or parts.password is not None:
                token = base64.b64encode(f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode())
                basic = "Basic " + token.decode("ascii")
                bare = strip_userinfo(base) or base
            known = self._endpoints[base] = (bare.rstrip("/") + "/chat/completions", basic)
        return known

    def _timeout(self, seconds: float) -> Any:
        """aiohttp's timeout of ``seconds`` in all, made once per figure."""
        import aiohttp

        return self._timeouts.setdefault(seconds, aiohttp.ClientTimeout(total=seconds))

    async def send(
        self,
        method: str,
        url: str,
        body: str,
        headers: Mapping[str, str],
        *,
        query: Mapping[str, Any] | None = None,
        timeout: float,
    ) -> bytes:
        """One HTTP exchange on the pooled session: the answer's body when its status is below
        400. Raises ProviderError on a timeout, a dropped connection (both retryable) or an error
        status (retryable as :func:`~pytest_llmbias.clients.retry.retryable_status` says, with the
        server's Retry-After and the error body's message)."""
        import aiohttp

        try:
            async with self._client().request(
                method,
                url,
                data=body,
                headers=dict(headers),
                params=query,
                timeout=self._timeouts.get(timeout) or self._timeout(timeout),
            ) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
        except asyncio.TimeoutError:
            raise ProviderError(f"Timeout: no complete answer within {timeout:g}s", retryable=True) from None
        except aiohttp.ClientError as exc:
            # refused, reset or dropped connections, a body cut short: worth another try
            raise ProviderError(f"{type(exc).__name__}: {exc}", retryable=True) from None
        if status >= 400:
            raise status_error(status, raw, resp.reason, retry_after)
        return raw

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
        if self._pool is not None:
            await self._pool.aclose()
        self._pool = None


def status_error(status: int, body: bytes, reason: str | None, retry_after: str | None) -> ProviderError:
    """An error status's ProviderError: the error body's message (else the reason phrase), whether
    a retry can help (:func:`~pytest_llmbias.clients.retry.retryable_status`) and Retry-After."""
    return ProviderError(
        f"{_error_message(body) or reason or 'error'}",
        status=status,
        retryable=retryable_status(status),
        retry_after=parse_retry_after(retry_after),
    )


def _members(params: Mapping[str, Any]) -> dict[str, Any]:
    """The body's members after the model and messages: the parameters that go in the body, then
    ``extra_body``'s."""
    members = {k: v for k, v in params.items() if k not in _NOT_BODY}
    if isinstance(params.get("extra_body"), Mapping):
        members.update(params["extra_body"])
    return members


def _messages_json(written: Any) -> str:
    """Messages, given as their (role, content) JSON strings (:attr:`ModelCall.messages_json`),
    as ``json.dumps(..., ensure_ascii=False)`` writes their list of ``{"role", "content"}``
    objects, without the brackets."""
    if len(written) == 1:
        ((role, content),) = written
        return '{"role": ' + role + ', "content": ' + content + "}"
    return ", ".join('{"role": ' + r + ', "content": ' + c + "}" for r, c in written)


#: the lean body's members as ``json.dumps`` writes them, non-ASCII characters as they are
_dumps = json.JSONEncoder(ensure_ascii=False).encode


def parse_completion(raw: bytes) -> Completion:
    """The first choice's text, finish reason and the usage of a chat-completion body;
    ProviderError (retryable) when the body is not one."""
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        text = choice["message"]["content"]
        finish_reason = choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ProviderError(f"malformed completion ({type(exc).__name__}: {exc})", retryable=True) from None
    usage = data.get("usage") if isinstance(data, Mapping) else None
    usage = usage if isinstance(usage, Mapping) else {}
    fields = {
        "text": text,
        "finish_reason": finish_reason if isinstance(finish_reason, str) else None,
        "prompt_tokens": token_count(usage.get("prompt_tokens")),
        "completion_tokens": token_count(usage.get("completion_tokens")),
        "system_fingerprint": _text_or_none(data.get("system_fingerprint")),
    }
    logprobs = choice.get("logprobs") if isinstance(choice, Mapping) else None
    if logprobs:  # asked for: the alternatives (else the class's None, read without a look-up)
        first, number = answer_alternatives(logprobs.get("content")) if isinstance(logprobs, Mapping) else (None, None)
        fields["top_logprobs"], fields["number_logprobs"] = first, number
    return construct(Completion, fields)  # Completion(...), without its __init__'s one object.__setattr__ a field


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def token_count(value: Any) -> int | None:
    """A token count read from an answer: an int, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _error_message(raw: bytes) -> str:
    """The ``error.message`` of an error body, or its first 200 characters."""
    try:
        data = json.loads(raw)
        message = data["error"]["message"] if isinstance(data.get("error"), Mapping) else data.get("error")
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return raw[:200].decode("utf-8", "replace").strip()
