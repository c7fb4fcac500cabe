"""A model call, described canonically so that it has one stable key, and the response it got."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from pytest_llmbias.config.redaction import split_credentials, strip_userinfo
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.store.alternatives import (
    answer_alternatives,
    first_token_alternatives,
    number_positions,
    number_record,
)
from pytest_llmbias.store.kept import IdentityCache, drop_oldest

KEY_VERSION = 1

__all__ = [
    "ModelCall",
    "Response",
    "answer_alternatives",
    "first_token_alternatives",
    "number_positions",
    "number_record",
]

Messages = tuple[tuple[str, str], ...]
_T = TypeVar("_T")


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


def construct(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of ``cls`` (a frozen dataclass with no ``__post_init__``, no slots) holding
    ``fields``, which name every field without a plain default: what ``cls(**fields)`` gives,
    without the generated ``__init__``'s one ``object.__setattr__`` a field (a third of the
    object's cost where a run builds one a call)."""
    obj = object.__new__(cls)
    vars(obj).update(fields)
    return obj


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
        turns, when it has them): generation settings, then the model's own params, then ``params``.
        Sample ``i`` is sent with seed ``generation.seed + i`` so that samples are independent
        draws, not replays of one seed.

        The same call asked again (same spec, messages, settings, sample and params) is the same
        object, its key computed once: a run plans a call and reads it back, a judge's rating is
        told before it is asked, and several gates may need one call."""
        memo: tuple[Any, ...] | None = None
        shape: str | None = None  # the params' JSON, where they are JSON values
        if cls is ModelCall and type(sample) is int:
            try:
                asked = prompt if isinstance(prompt, str) else as_messages(prompt)
                shape = _dumps(params) if params else None
                # by the identity of the spec and settings (kept with the call, so never another's):
                # equal ones may differ in a number's type, which the key tells apart
                memo = (id(spec), id(generation), asked, sample, shape)
                kept = _BUILT.find(memo)
            except (TypeError, ValueError):  # params that are no JSON values: built afresh
                memo = kept = None
            if kept is not None and kept[0] is spec and kept[1] is generation:
                return kept[2]
        call = cls._build(spec, prompt, generation, sample, params, shape)
        if memo is not None:
            _BUILT.put(memo, call, spec, generation)
            if "key" in vars(call):  # its key known at build (see _build)
                if len(_BY_KEY) >= _BUILT_KEPT:
                    drop_oldest(_BY_KEY)
                _BY_KEY[call.key] = call
        return call

    @classmethod
    def _build(
        cls,
        spec: ModelSpec,
        prompt: str | Sequence[Mapping[str, str]],
        generation: GenerationSettings,
        sample: int,
        params: Mapping[str, Any] | None,
        shape: str | None = None,
    ) -> ModelCall:
        if params and shape is None:  # params that are no JSON values (or a subclass's call): afresh
            identity = _identity(spec, generation, sample, params)
        else:
            # once per model, settings (by identity, as _BUILT), sample and extra params (by shape,
            # their JSON: a judge's calls share theirs): the calls of a run share its (read-only) mappings
            memo = (id(spec), id(generation), sample, type(sample), shape)
            kept = _IDENTITIES.find(memo)
            if kept is not None and kept[0] is spec and kept[1] is generation:
                identity = kept[2]
            else:
                identity = _IDENTITIES.put(memo, _identity(spec, generation, sample, params), spec, generation)
        messages = as_messages(prompt)
        if spec.messages:
            messages = (*spec.messages, *messages)
        if spec.system is not None:
            messages = (("system", spec.system), *messages)
        fields: dict[str, Any] = {
            "model": spec.model,
            "api_base": identity.api_base,
            "messages": messages,
            "params": identity.params,
            "sample": sample,
            "credentials": identity.credentials,
        }
        # a field at its default is read from the class: an instance's dictionary of ten entries
        # or fewer stays at its smallest size
        if spec.version is not None:
            fields["version"] = spec.version
        if identity.request is not None:
            fields["request"] = identity.request
        if identity.tail is not None:  # the key, as :attr:`key` computes it, from the shared part
            # the JSON json.dumps(..., sort_keys=True, ensure_ascii=False) writes, string by string
            if len(messages) == 1:  # a prompt alone, most calls: one string built, no generator to join
                ((r, c),) = messages
                blob = f'{identity.head}{{"content":{_json_str(c)},"role":{_json_str(r)}}}],{identity.tail}'
            else:
                listed = ",".join(f'{{"content":{_json_str(c)},"role":{_json_str(r)}}}' for r, c in messages)
                blob = f"{identity.head}{listed}],{identity.tail}"
            fields["key"] = hashlib.sha256(blob.encode("utf-8")).hexdigest()  # the cached property's value
        if identity.endpoint is not None:
            fields["endpoint"] = identity.endpoint
        call = construct(cls, fields)
        return call

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

    @property
    def messages_json(self) -> tuple[tuple[str, str], ...]:
        """Each message's role and content as JSON strings (the encoder's, ``ensure_ascii`` off),
        written once per call for both its record and its request body, however long the prompt
        (not at build, where the key is hashed: a warm run asks for neither). TypeError for a
        role or content that is not a string."""
        written: tuple[tuple[str, str], ...] | None = self.__dict__.get("_messages_json")
        if written is None:
            written = tuple((_json_str(r), _json_str(c)) for r, c in self.messages)
            self.__dict__["_messages_json"] = written  # kept as a cached property keeps its value
        return written

    @cached_property
    def endpoint(self) -> str:
        """The model this call reaches, as a fingerprint names it: a short hash of its model,
        endpoint (no credential), ``version`` and HTTP request shape; not its messages or
        parameters (see :mod:`pytest_llmbias.store.fingerprints`)."""
        if self.request is None:
            return _endpoint(self.model, self.api_base, self.version)
        return _endpoint_digest(self.model, self.api_base, self.version, self.request)

    @property
    def prompt_excerpt(self) -> str:
        text = self.messages[-1][1]
        return text if len(text) <= 60 else text[:57] + "..."


_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
#: one string as :data:`_dumps` writes it (the encoder's own function, without building an encoder)
_json_str = json.encoder.encode_basestring


@dataclass(frozen=True)
class _Identity:
    """What the calls of one model, generation settings and sample share: their parameters
    without credentials, the credentials, the endpoint without user info, the HTTP request shape,
    and the JSON of the key's fields after ``messages`` (None when a parameter is no JSON value:
    :attr:`ModelCall.key` then says so)."""

    params: dict[str, Any]
    credentials: dict[str, Any]
    api_base: str | None
    request: Mapping[str, Any] | None
    tail: str | None
    #: :attr:`ModelCall.endpoint` of these calls (None for an HTTP application's: computed per call)
    endpoint: str | None = None
    #: the JSON of the key's fields before the messages' list, up to its opening bracket
    head: str = ""


def _identity(
    spec: ModelSpec, generation: GenerationSettings, sample: int, params: Mapping[str, Any] | None
) -> _Identity:
    """The shared part of the calls of ``spec`` (see :class:`_Identity`)."""
    merged: dict[str, Any] = {"temperature": generation.temperature, "max_tokens": generation.max_tokens}
    if generation.seed is not None:
        merged["seed"] = generation.seed + sample
    merged.update(spec.params)
    merged.update(params or {})
    public, credentials = split_credentials(merged)
    api_base = strip_userinfo(spec.api_base)
    if api_base != spec.api_base:
        credentials["api_base"] = spec.api_base
    request = spec.http.identity() if spec.http is not None else None
    # the canonical form's fields that sort after "api_base" and "messages" (see ModelCall.canonical)
    rest: dict[str, Any] = {"v": KEY_VERSION, "model": spec.model, "params": public, "sample": sample}
    if spec.version is not None:
        rest["version"] = spec.version
    if request is not None:
        rest["request"] = request
    try:
        tail: str | None = _dumps(rest)[1:]
    except TypeError:
        tail = None
    endpoint = _endpoint(spec.model, api_base, spec.version) if request is None else None
    head = '{"api_base":' + ("null" if api_base is None else _json_str(api_base)) + ',"messages":['
    return _Identity(public, credentials, api_base, request, tail, endpoint, head)


#: what :func:`_identity` gave lately, by the identity of the spec and settings, the sample and the params' JSON
_IDENTITIES: IdentityCache[_Identity] = IdentityCache(1024, oldest_first=True)


#: the calls :meth:`ModelCall.build` made lately, by what they were built from (the oldest dropped first)
_BUILT_KEPT = 1 << 17
_BUILT: IdentityCache[ModelCall] = IdentityCache(_BUILT_KEPT, oldest_first=True)
#: the same calls by key (see :func:`built_call`)
_BY_KEY: dict[str, ModelCall] = {}


def release_built() -> None:
    """Forget every call :meth:`ModelCall.build` kept, and the identities its calls shared: once a
    run is over none is asked again, and a process that keeps them alive to its end has the garbage
    collector walk them in each full collection (pytest runs two at exit). A call built afterwards
    is a new object with the same key."""
    _BUILT.clear()
    _BY_KEY.clear()
    _IDENTITIES.clear()


def built_call(key: str, asked: ModelCall | None = None) -> ModelCall | None:
    """``asked`` when its key is ``key``, else a call this process built (:meth:`ModelCall.build`,
    among the last it kept) whose key is ``key``, or None: a stored answer read by key keeps it
    instead of a call rebuilt from its record (the same call: its key hashes everything that
    identifies it)."""
    if asked is not None and asked.key == key:
        return asked
    return _BY_KEY.get(key)


def _endpoint_digest(model: str, api_base: str | None, version: str | None, request: Any) -> str:
    blob = json.dumps(
        {"model": model, "api_base": api_base, "version": version, "request": request},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=1024)
def _endpoint(model: str, api_base: str | None, version: str | None) -> str:
    """:func:`_endpoint_digest` of a model that is no HTTP application, once per model."""
    return _endpoint_digest(model, api_base, version, None)


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
    #: where the endpoint returned log-probabilities and the answer holds a digit: the answer's
    #: tokens from its first one that holds a digit through the first after it that is not all
    #: digits (at most :data:`NUMBER_POSITIONS`), each as (token, its alternatives): where a judge's
    #: score is, whichever token it follows (see :func:`answer_alternatives`)
    number_logprobs: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] | None = None

    @property
    def key(self) -> str:
        return self.call.key

    def collected_under(self, fingerprint: str | None) -> Response:
        """This response with ``fingerprint``: what ``dataclasses.replace`` gives, without the
        generated ``__init__`` nor ``copy.copy`` (which looks for ``__copy__`` and
        ``__reduce_ex__`` first: three times the cost, once a fresh answer)."""
        fields = dict(vars(self))
        fields["fingerprint"] = fingerprint
        return construct(type(self), fields)

    def to_dict(self, *, answer_first: bool = False) -> dict[str, Any]:
        """The response as a record: its call's key and request fields, then its answer's;
        ``answer_first``: the answer's first, as the stores keep it (see
        :mod:`pytest_llmbias.store.records`)."""
        request = {"key": self.call.key, **{k: v for k, v in self.call.canonical().items() if k != "v"}}
        answer = {
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
            **({"number_logprobs": number_record(self.number_logprobs)} if self.number_logprobs is not None else {}),
        }
        return {**answer, **request} if answer_first else {**request, **answer}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str, call: ModelCall | None = None) -> Response:
        """Rebuild a response; raises ``KeyError``/``TypeError``/``ValueError`` on a malformed record.
        ``call``: the call the record answers, when the caller has it (its key the record's), kept
        as the response's call instead of one rebuilt from the record."""
        if call is None:
            call = ModelCall(
                model=data["model"],
                api_base=data.get("api_base"),
                messages=tuple((m["role"], m["content"]) for m in data["messages"]),
                params=dict(data["params"]),
                sample=int(data["sample"]),
                version=data.get("version"),
                request=data.get("request"),
            )
        elif data["model"] != call.model or "messages" not in data:  # read by key: still a whole record
            raise ValueError("the record's request fields are another call's or missing")
        return cls.answering(call, data, source=source)

    @classmethod
    def answering(cls, call: ModelCall, data: Mapping[str, Any], *, source: str) -> Response:
        """The response to ``call`` whose answer fields (``text``, ``usage``, ...) ``data``
        holds, the record's request fields unread; raises ``KeyError``/``TypeError``/``ValueError``
        on malformed ones."""
        text = data["text"]
        if not isinstance(text, str):
            raise TypeError("'text' must be a string")
        usage = data.get("usage") or {}
        top = data.get("top_logprobs")
        number = data.get("number_logprobs")
        response = object.__new__(cls)  # as construct() does, inline: once a stored answer read
        vars(response).update(
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
            number_logprobs=None if number is None else number_positions(number),
        )
        return response
