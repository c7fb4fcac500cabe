"""How the disk and team stores keep an answer: one JSON object, the answer's fields first
(``text``, ``finish_reason``, ``usage``, ...), then the call's (its ``key``, model, endpoint,
messages, parameters and sample).

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
from typing import Any

from pytest_llmbias.store.calls import Response

_KEY_MEMBER = ',"key":"'
#: the JSON decoder's scanner: one value from an index, without ``json.loads``' checks around it
#: (the text cut here starts with its object and ends with it)
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


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
