"""A model call, described canonically so that it has one stable key, and the response it got."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pytest_llmbias.errors import ConfigError
from pytest_llmbias.redaction import split_credentials, strip_userinfo
from pytest_llmbias.settings import GenerationSettings, ModelSpec

KEY_VERSION = 1

Messages = tuple[tuple[str, str], ...]


def as_messages(prompt: str | Sequence[Mapping[str, str]]) -> Messages:
    """A prompt string becomes one user message; a list of ``{role, content}`` is kept as given."""
    if isinstance(prompt, str):
        return (("user", prompt),)
    out = []
    for message in prompt:
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not isinstance(content, str):
            raise ConfigError(f"a message needs string 'role' and 'content', got {dict(message)!r}")
        out.append((role, content))
    if not out:
        raise ConfigError("a prompt needs at least one message")
    return tuple(out)


@dataclass(frozen=True)
class ModelCall:
    """One chat completion: model, endpoint, messages, parameters and sample index.

    The key hashes all of them (not the alias, and never a credential), so two samples of the same
    prompt are two entries, and a store can be moved or shared between machines; with them the
    entry's ``version`` and an HTTP application's ``request`` shape, when the entry has them (a
    call without either has the key it always had). ``credentials``
    (credential-named params and headers, and an ``api_base`` with its ``user:password@``) are sent
    with the call but are no part of its identity: not in the key, the record, a snapshot or the repr.
    """

    model: str
    api_base: str | None
    messages: Messages
    params: Mapping[str, Any] = field(hash=False)
    sample: int = 0
    credentials: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False, repr=False)
    version: str | None = None
    #: an HTTP application's method, body template, response path and public headers
    request: Mapping[str, Any] | None = field(default=None, hash=False)

    @classmethod
    def build(
        cls,
        spec: ModelSpec,
        prompt: str | Sequence[Mapping[str, str]],
        generation: GenerationSettings,
        *,
        sample: int = 0,
        params: Mapping[str, Any] | None = None,
    ) -> ModelCall:
        """The call for ``spec`` on ``prompt`` (after the deployment's system prompt and primer
        turns, when it has them): generation settings, then the model's own params, then ``params``. Sample ``i`` is
        sent with seed ``generation.seed + i`` so that samples are
        independent draws, not replays of one seed."""
        merged: dict[str, Any] = {"temperature": generation.temperature, "max_tokens": generation.max_tokens}
        if generation.seed is not None:
            merged["seed"] = generation.seed + sample
        merged.update(spec.params)
        merged.update(params or {})
        public, credentials = split_credentials(merged)
        api_base = strip_userinfo(spec.api_base)
        if api_base != spec.api_base:
            credentials["api_base"] = spec.api_base
        messages = as_messages(prompt)
        if spec.messages:
            messages = (*spec.messages, *messages)
        if spec.system is not None:
            messages = (("system", spec.system), *messages)
        return cls(
            model=spec.model,
            api_base=api_base,
            messages=messages,
            params=public,
            sample=sample,
            credentials=credentials,
            version=spec.version,
            request=spec.http.identity() if spec.http is not None else None,
        )

    def canonical(self) -> dict[str, Any]:
        return {
            "v": KEY_VERSION,
            "model": self.model,
            "api_base": self.api_base,
            "messages": [{"role": r, "content": c} for r, c in self.messages],
            "params": dict(sorted(self.params.items())),
            "sample": self.sample,
            # only when set, so that the key of a call without them is the one it always had
            **({"version": self.version} if self.version is not None else {}),
            **({"request": self.request} if self.request is not None else {}),
        }

    @cached_property
    def key(self) -> str:
        try:
            blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except TypeError as exc:
            raise ConfigError(f"model parameters must be JSON values: {exc}") from None
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    @cached_property
    def endpoint(self) -> str:
        """The model this call reaches, as a fingerprint names it: a short hash of its model,
        endpoint (no credential), ``version`` and HTTP request shape; not its messages or
        parameters (see :mod:`pytest_llmbias.store.fingerprints`)."""
        c = self.canonical()
        blob = json.dumps(
            {k: c.get(k) for k in ("model", "api_base", "version", "request")},
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    @property
    def prompt_excerpt(self) -> str:
        text = self.messages[-1][1]
        return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Response:
    """What a model answered to a :class:`ModelCall`, with usage and latency.

    ``system_fingerprint``: what the provider said of its backend, where it says it.
    ``fingerprint``: the model's fingerprint when the answer was collected (see
    :mod:`pytest_llmbias.store.fingerprints`); None for an answer collected without one. Neither
    is part of the call's key, and a record without them reads as it always did."""

    call: ModelCall
    text: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    created: float | None = None
    source: str = field(default="network", compare=False)
    #: where the endpoint returned log-probabilities (asked with ``logprobs``/``top_logprobs``): the
    #: alternatives of the answer's first token that is not blank, as (token, log-probability)
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    system_fingerprint: str | None = None
    fingerprint: str | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        return self.call.key

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.call.key,
            **{k: v for k, v in self.call.canonical().items() if k != "v"},
            "text": self.text,
            "finish_reason": self.finish_reason,
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens},
            "latency_s": self.latency_s,
            "created": self.created,
            # only when returned, so that a record without them reads as it always did
            **({"top_logprobs": [list(t) for t in self.top_logprobs]} if self.top_logprobs is not None else {}),
            # only when known, so that a record without them is the line it always was
            **({"system_fingerprint": self.system_fingerprint} if self.system_fingerprint else {}),
            **({"fingerprint": self.fingerprint} if self.fingerprint else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str) -> Response:
        """Rebuild a response; raises ``KeyError``/``TypeError``/``ValueError`` on a malformed record."""
        messages = tuple((m["role"], m["content"]) for m in data["messages"])
        call = ModelCall(
            model=data["model"],
            api_base=data.get("api_base"),
            messages=messages,
            params=dict(data["params"]),
            sample=int(data["sample"]),
            version=data.get("version"),
            request=data.get("request"),
        )
        text = data["text"]
        if not isinstance(text, str):
            raise TypeError("'text' must be a string")
        usage = data.get("usage") or {}
        top = data.get("top_logprobs")
        return cls(
            call=call,
            text=text,
            finish_reason=data.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_s=data.get("latency_s"),
            created=data.get("created"),
            source=source,
            top_logprobs=None if top is None else tuple((str(t), float(lp)) for t, lp in top),
            system_fingerprint=data.get("system_fingerprint"),
            fingerprint=data.get("fingerprint"),
        )


def first_token_alternatives(content: Any) -> tuple[tuple[str, float], ...] | None:
    """The ``top_logprobs`` of the first token that is not blank (nor markdown's ``*``, ``#`` or a
    quote) in a choice's ``logprobs.content`` (a list of dicts or of objects with ``token``,
    ``logprob`` and ``top_logprobs``), as (token, log-probability); None when there are none."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    if not isinstance(content, Sequence) or isinstance(content, str):
        return None
    for entry in content:
        token = get(entry, "token")
        if not isinstance(token, str) or not token.strip(" \n\t*#\"'`"):
            continue
        tops = get(entry, "top_logprobs") or [entry]
        out = []
        for t in tops:
            tok, lp = get(t, "token"), get(t, "logprob")
            if isinstance(tok, str) and isinstance(lp, (int, float)) and not isinstance(lp, bool):
                out.append((tok, float(lp)))
        return tuple(out) or None
    return None
