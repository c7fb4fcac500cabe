"""An application's own HTTP API as a model: one request from the entry's template, the answer's
text read at a dotted path of the JSON reply.

The wire is the direct transport's pooled session (:meth:`OpenAITransport.send
<pytest_llmbias.clients.openai_transport.OpenAITransport.send>`), so status codes, Retry-After,
timeouts and dropped connections are classified as for an OpenAI-compatible endpoint; the client
(:class:`~pytest_llmbias.clients.litellm_client.ModelClient`) retries, limits and stores as for any
model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_llmbias.clients.openai_transport import Completion, OpenAITransport, token_count
from pytest_llmbias.config.app_targets import HttpApp, dig, render_body
from pytest_llmbias.errors import ConfigError, PathMissing, ProviderError, TemplateError
from pytest_llmbias.store.calls import ModelCall


def check_headers(app: HttpApp, alias: str, environ: Mapping[str, str] | None = None) -> None:
    """ConfigError, naming the entry and the variable, when a header reads a variable that is not
    set: a configuration error, found before the first attempt rather than after the retries."""
    try:
        app.resolved_headers(environ)
    except TemplateError as exc:
        raise ConfigError(f"model {alias!r} ({app.method} {app.url}): {exc}") from None


async def complete_http(
    wire: OpenAITransport, app: HttpApp, call: ModelCall, params: Mapping[str, Any], *, timeout: float
) -> Completion:
    """One attempt of ``call`` on the application: the body rendered from the template with the
    call's messages and ``params`` (its parameters, credentials put back), the headers with their
    variables read now. ProviderError as :meth:`OpenAITransport.send` raises it, and (retryable,
    as a malformed body is) for a reply that is not JSON or lacks the ``response`` path."""
    headers = {"Content-Type": "application/json", **app.resolved_headers()}
    body = json.dumps(render_body(app.body, call.messages, params), ensure_ascii=False)
    raw = await wire.send(app.method, app.url, body, headers, timeout=timeout)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ProviderError(f"malformed reply: not JSON ({exc})", retryable=True) from None
    try:
        text = dig(data, app.response)
    except PathMissing as exc:
        raise ProviderError(f"malformed reply: {exc} (the entry's http.response)", retryable=True) from None
    if not isinstance(text, str):
        raise ProviderError(f"malformed reply: {app.response!r} is a {type(text).__name__}, not a text", retryable=True)
    prompt_tokens = completion_tokens = None
    if app.usage is not None:
        try:
            usage = dig(data, app.usage)
        except PathMissing:
            usage = None  # usage is a courtesy of the reply: its absence fails no call
        if isinstance(usage, Mapping):
            prompt_tokens = token_count(usage.get("prompt_tokens", usage.get("input_tokens")))
            completion_tokens = token_count(usage.get("completion_tokens", usage.get("output_tokens")))
    return Completion(text=text, finish_reason=None, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
