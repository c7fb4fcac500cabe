"""What the direct transport sends on the lean HTTP client, written from parts kept per model and
parameters (OpenAITransport._prepared, http1._head) and the call's own messages' JSON: the body
``json.dumps(..., ensure_ascii=False)`` writes of the request and the same head, whatever the
values; the calls it cannot write so take the general way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from pytest_llmbias.clients.http1 import _head
from pytest_llmbias.clients.openai_transport import _NOT_BODY, OpenAITransport, _messages_json, wire_model
from pytest_llmbias.store.calls import ModelCall

STRINGS = st.text(alphabet=st.characters(codec="utf-8"), max_size=20) | st.sampled_from(['"', "\\", "\n", "ü✓🙂"])
VALUES = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats(allow_nan=False) | STRINGS
PARAMS = st.dictionaries(
    st.sampled_from(["temperature", "max_tokens", "seed", "stop", "top_p", "extra_body", "extra_headers", "timeout"])
    | STRINGS,
    VALUES | st.lists(VALUES, max_size=3) | st.dictionaries(STRINGS, VALUES, max_size=2),
    max_size=5,
)


def body_as_before(model: str, messages: Any, params: dict[str, Any]) -> str:
    """The body the transport's general way builds: model, messages, the parameters that go in
    the body, then ``extra_body``'s members; written by ``json.dumps``, UTF-8 as it is."""
    body: dict[str, Any] = {"model": wire_model(model), "messages": [{"role": r, "content": c} for r, c in messages]}
    body.update((k, v) for k, v in params.items() if k not in _NOT_BODY)
    if isinstance(params.get("extra_body"), dict):
        body.update(params["extra_body"])
    return json.dumps(body, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(
    model=st.sampled_from(["openai/m", "hosted_vllm/org/m", "lm_studio/x", "openai/ünï"]),
    messages=st.lists(st.tuples(st.sampled_from(["system", "user", "assistant"]), STRINGS), min_size=1, max_size=3),
    params=PARAMS,
    api_key=st.none() | st.sampled_from(["sk-1", ""]),
)
def test_a_lean_body_is_what_json_dumps_writes_of_the_request(model, messages, params, api_key) -> None:
    transport = OpenAITransport()
    prepared = transport._prepared(model, params, "http://127.0.0.1:9/v1", api_key)
    extra = params.get("extra_body") if isinstance(params.get("extra_body"), dict) else {}
    members = {**{k: v for k, v in params.items() if k not in _NOT_BODY}, **extra}
    if "model" in members or "messages" in members:
        assert prepared is None  # a member that would replace the model or messages: the general way
        return
    assert prepared is not None
    target, headers, opening, closing = prepared
    assert target == ("127.0.0.1", 9, "/v1/chat/completions")
    call = ModelCall(model=model, api_base=None, messages=tuple(messages), params={})
    assert opening + _messages_json(call.messages_json) + closing == body_as_before(model, messages, params)
    assert json.loads(opening + _messages_json(call.messages_json) + closing)["messages"] == [
        {"role": r, "content": c} for r, c in messages
    ]
    expected_headers = {"Content-Type": "application/json"}
    if api_key:
        expected_headers["Authorization"] = f"Bearer {api_key}"
    if isinstance(params.get("extra_headers"), dict):
        expected_headers.update({str(k): str(v) for k, v in params["extra_headers"].items()})
    assert headers == expected_headers
    assert transport._prepared(model, params, "http://127.0.0.1:9/v1", api_key) is prepared  # kept


def test_calls_the_lean_client_does_not_write_from_parts_take_the_general_way() -> None:
    transport = OpenAITransport()
    base = "http://127.0.0.1:9/v1"
    assert transport._prepared("openai/m", {"extra_query": {"v": "1"}}, base, None) is None
    assert transport._prepared("openai/m", {}, "https://example.invalid/v1", None) is None  # aiohttp's
    assert transport._prepared("openai/m", {"stop": {1, 2}}, base, None) is None  # no JSON value
    assert transport._prepared("openai/m", {"extra_body": {"messages": []}}, base, None) is None
    with pytest.raises(TypeError):  # such a call is written by json.dumps, which says what is wrong
        _ = ModelCall(model="openai/m", api_base=None, messages=(("user", 5),), params={}).messages_json  # type: ignore[arg-type]
    # equal parameters in another object: worked out again, to the same parts
    first = transport._prepared("openai/m", {"temperature": 0.0}, base, "k")
    again = transport._prepared("openai/m", {"temperature": 0.0}, base, "k")
    assert first == again
    # the user:password@ of an endpoint is a Basic header unless a key gives a bearer token
    _, headers, _, _ = transport._prepared("openai/m", {}, "http://u:p@127.0.0.1:9/v1", None)
    assert headers["Authorization"].startswith("Basic ")


def test_a_requests_head_names_host_and_length_once_and_refuses_line_breaks() -> None:
    opening, closing = _head("::1", 8000, "/v1/chat/completions", {"Host": "evil", "content-length": "9", "A": "b"})
    assert opening + b"12" + closing == (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: [::1]:8000\r\nContent-Length: 12\r\nA: b\r\n\r\n"
    )
    assert _head("h", 80, "/", {}) == (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ", b"\r\n\r\n")
    with pytest.raises(ValueError, match="line break"):
        _head("h", 80, "/", {"X-Evil": "a\r\nInjected: yes"})
