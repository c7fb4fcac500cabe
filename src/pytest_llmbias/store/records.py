"""How the disk and team stores keep an answer: one JSON object, the answer's fields first
(``text``, ``finish_reason``, ``usage``, ...), then the call's (its ``key``, model, endpoint,
messages, parameters and sample).

The text is sealed (:mod:`pytest_llmbias.store.seal`): a last member ``"crc32"`` holds the CRC-32 of
the rest, so a byte changed on disk is told from an answer, and the answer asked again.

A run reads back answers to calls it has built (it planned them), so it parses the answer's fields
alone (:func:`answer_fields`): the record's text up to its top-level ``"key"`` member, closed. On a
warm run that halves the JSON a stored answer costs, the prompt (however long) never parsed.

Why the cut is sound: JSON escapes every quote inside a string, so ``,"key":"<key>"`` can only be a
member of an object, and no answer field is an object with a ``key`` member; the full key must
follow, so a record is only ever cut at its own key. Records written key first (before this
layout) hold no such text and are parsed whole, as is every record read without its call, or one
whose cut part does not parse (whose error is then the whole record's, as it always was).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pytest_llmbias.store.calls import ModelCall, Response, number_record
from pytest_llmbias.store.disk import encode_value
from pytest_llmbias.store.kept import IdentityCache
from pytest_llmbias.store.seal import seal, unseal

__all__ = ["answer_fields", "record", "record_text", "seal", "unseal"]

_KEY_MEMBER = ',"key":"'
#: the JSON decoder's scanner: one value from an index, without ``json.loads``' checks around it
#: (the text cut here starts with its object and ends with it)
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
#: one string as :func:`~pytest_llmbias.store.disk.encode_value` writes it (ensure_ascii off)
_str = json.encoder.encode_basestring


def record(response: Response, run: str | None = None) -> dict[str, Any]:
    """The record a store keeps of ``response``: the answer's fields first, then the call's; with
    ``run`` (the pytest-xdist run that wrote it) before them."""
    fields = response.to_dict(answer_first=True)
    return {"run": run, **fields} if run else fields


def answer_fields(key: str, raw: str | bytes) -> dict[str, Any] | None:
    """The answer fields of the record stored as ``raw`` under ``key``, its call's fields unread
    (see the module's promise), with ``key``; None where the record is not laid out answer first,
    lacks its request fields or does not parse so cut: parse it whole."""
    try:
        text = raw if isinstance(raw, str) else raw.decode("utf-8")
        at = text.find(_KEY_MEMBER + key + '"')
        if at < 0 or text.find('"messages":', at) < 0:
            return None
        head, end = _scan(text[:at] + "}", 0)
    except (ValueError, StopIteration):  # read whole, its error as it always was
        return None
    if end != at + 1 or not isinstance(head, dict):
        return None
    head["key"] = key
    return head


def record_text(response: Response, run: str | None = None) -> str:
    """The JSON text a store writes of ``response``: ``encode_value(record(response, run))``, the
    same characters, for a fraction of the work. The call's messages are written once per call
    (:attr:`ModelCall.messages_json`, which its request shares), its part after them once per
    model, parameters and sample (a run's calls share those objects), the constant member names
    never encoded; a value of a type the shortcut does not write (a boolean token count, a float
    that is no finite number) sends the record through the encoder as before."""
    call = response.call
    answer = _answer_text(response, run)
    parts = _call_parts(call) if answer is not None else None
    key = call.key
    if answer is None or parts is None or not (key.isascii() and key.isalnum()):
        return encode_value(record(response, run))
    head, tail = parts
    try:
        written = call.messages_json
    except (TypeError, ValueError):
        return encode_value(record(response, run))
    if len(written) == 1:
        ((role, content),) = written
        listed = '{"role":' + role + ',"content":' + content + "}"
    else:
        listed = ",".join('{"role":' + r + ',"content":' + c + "}" for r, c in written)
    return answer + ',"key":"' + key + '"' + head + listed + tail


def _scalar(value: Any) -> str | None:
    """``value`` as the encoder writes it, for None, a string, an int or a finite float; else None."""
    kind = type(value)
    if kind is str:
        return _str(value)
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return None


def _answer_text(response: Response, run: str | None) -> str | None:
    """The record's opening brace and answer fields (see :meth:`Response.to_dict`); None where a
    value is not one :func:`_scalar` writes."""
    fields = [
        _scalar(response.text),
        _scalar(response.finish_reason),
        _scalar(response.prompt_tokens),
        _scalar(response.completion_tokens),
        _scalar(response.latency_s),
        _scalar(response.created),
    ]
    if None in fields or (run and type(run) is not str):
        return None
    text, finish, prompt, completion, latency, created = fields
    out = (
        ('{"run":' + _str(run) + ',"text":' if run else '{"text":')
        + f'{text},"finish_reason":{finish},"usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion}}}'
        + f',"latency_s":{latency},"created":{created}'
    )
    if response.top_logprobs is not None:
        out += ',"top_logprobs":' + encode_value([list(t) for t in response.top_logprobs])
    for name, value in (("system_fingerprint", response.system_fingerprint), ("fingerprint", response.fingerprint)):
        if value:
            written = _scalar(value)
            if written is None:
                return None
            out += f',"{name}":{written}'
    if response.number_logprobs is not None:
        out += ',"number_logprobs":' + encode_value(number_record(response.number_logprobs))
    return out


def _call_parts(call: ModelCall) -> tuple[str, str] | None:
    """The call's record members around its messages: ``,"model":...,"messages":[`` and
    ``],"params":...}``, kept per model, endpoint, parameters, sample, version and request shape
    (by the identity of its mappings, which the calls of one model and sample share); None where
    one is not a JSON value or the call is no plain :class:`ModelCall`."""
    if type(call) is not ModelCall or type(call.sample) is not int:
        return None
    memo = (call.model, call.api_base, id(call.params), id(call.request), call.sample, call.version)
    kept = _PARTS.find(memo)
    if kept is not None and kept[0] is call.params and kept[1] is call.request:
        return kept[2]
    try:
        base = "null" if call.api_base is None else _str(call.api_base)
        head = ',"model":' + _str(call.model) + ',"api_base":' + base
        params = encode_value(dict(sorted(call.params.items())))
        tail = '],"params":' + params + ',"sample":' + int.__repr__(call.sample)
        if call.version is not None:
            tail += ',"version":' + _str(call.version)
        if call.request is not None:
            tail += ',"request":' + encode_value(call.request)
    except (TypeError, ValueError):  # no JSON value: the encoder says so, as it always did
        return None
    return _PARTS.put(memo, (head + ',"messages":[', tail + "}"), call.params, call.request)


_PARTS: IdentityCache[tuple[str, str]] = IdentityCache(1024)
