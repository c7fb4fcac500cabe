"""A call built once per run, and stored answers read in batches: the same keys and answers as
building and reading each afresh."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.store import ResponseStore
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.disk import DiskCache
from pytest_llmbias.store.fingerprints import Serving

GEN = GenerationSettings(temperature=0.5, max_tokens=100, samples=3, seed=40)
SPECS = [
    ModelSpec(model="openai/m", alias="m"),
    ModelSpec(
        model="openai/m",
        alias="n",
        api_base="https://user:pw@h/v1",
        params={"top_p": 0.9, "api_key": "sk-x", "extra_headers": {"X-Team": "a", "Authorization": "Bearer t"}},
        system='Sÿstem "quoted"\n',
        messages=(("user", "hi"), ("assistant", "hello")),
        version="2026-01",
    ),
]


def canonical_key(call: ModelCall) -> str:
    blob = json.dumps(call.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("spec", SPECS, ids=["plain", "deployment"])
@pytest.mark.parametrize("prompt", ['Héllo \u2028 "q"?', [{"role": "user", "content": "a"}]], ids=["text", "turns"])
@pytest.mark.parametrize("params", [None, {"logprobs": True, "stop": ["x"]}], ids=["bare", "params"])
def test_the_key_computed_at_build_is_the_canonical_one(spec, prompt, params) -> None:
    call = ModelCall.build(spec, prompt, GEN, sample=2, params=params)
    assert call.key == canonical_key(call)
    assert "sk-x" not in json.dumps(call.canonical()) and "pw@" not in json.dumps(call.canonical())
    # the messages' JSON its record and request share: each message's strings as the encoder
    # writes them; the fields left at their defaults are read from the class
    assert call.messages_json == tuple(
        (json.dumps(r, ensure_ascii=False), json.dumps(c, ensure_ascii=False)) for r, c in call.messages
    )
    again = ModelCall(
        model=call.model,
        api_base=call.api_base,
        messages=call.messages,
        params=call.params,
        sample=2,
        version=spec.version,
        request=None,
    )
    assert again == call and hash(again) == hash(call) and again.key == call.key
    assert call.version == spec.version and call.request is None


def test_the_same_call_asked_again_is_one_object() -> None:
    first = ModelCall.build(SPECS[1], "Q?", GEN, sample=1)
    assert ModelCall.build(SPECS[1], "Q?", GEN, sample=1) is first
    assert ModelCall.build(SPECS[1], "Q?", GEN, sample=2) is not first


def test_equal_settings_that_differ_in_a_number_s_type_keep_their_own_keys() -> None:
    spec = ModelSpec(model="openai/m", alias="m")
    as_int = ModelCall.build(spec, "Q?", GenerationSettings(temperature=0))
    as_float = ModelCall.build(spec, "Q?", GenerationSettings(temperature=0.0))
    assert as_int.key != as_float.key
    assert as_int.key == canonical_key(as_int) and as_float.key == canonical_key(as_float)


def test_params_that_are_no_json_values_still_say_so_on_the_key() -> None:
    call = ModelCall.build(SPECS[0], "Q?", GEN, params={"x": object()})
    with pytest.raises(ConfigError, match="JSON"):
        _ = call.key


def stored(tmp_path: Path, n: int) -> list[ModelCall]:
    calls = [ModelCall.build(SPECS[0], f"question {i}", GEN) for i in range(n)]
    store = ResponseStore(tmp_path)
    for i, c in enumerate(calls):
        store.put(Response(call=c, text=f"answer {i}", finish_reason="stop", created=1.0))
    store.close()
    return calls


def test_a_batched_read_gives_what_reading_key_by_key_gives(tmp_path: Path) -> None:
    calls = stored(tmp_path, 1203)  # more than one query's worth
    keys = [c.key for c in calls] + ["0" * 64]
    one_by_one = ResponseStore(tmp_path)
    expected = {k: r for k in keys if (r := one_by_one.get(k)) is not None}
    batched = ResponseStore(tmp_path)
    got = batched.fetch_many(keys, {c.key: c for c in calls})
    assert got == expected and len(got) == 1203
    assert got[calls[5].key].call is calls[5]  # the planned call kept, not rebuilt
    assert got[calls[5].key].source == "store"
    assert set(batched.used) == set(expected)
    assert DiskCache(tmp_path / "responses").get_many([]) == {}


def test_a_batched_read_serves_no_answer_of_another_fingerprint(tmp_path: Path) -> None:
    calls = stored(tmp_path, 3)
    store = ResponseStore(tmp_path)
    store.serve_fingerprints({calls[0].endpoint: Serving(current="new", first="old")})
    assert store.fetch_many([c.key for c in calls]) == {}


def test_a_batched_read_of_answers_of_another_fingerprint_serves_the_snapshots_as_one_read_does(tmp_path: Path) -> None:
    from pytest_llmbias.store import write_snapshot

    calls = stored(tmp_path / "s", 3)  # every answer on disk, collected under no fingerprint
    snap = tmp_path / "snap.jsonl"
    write_snapshot(snap, [Response(call=calls[1], text="from the snapshot")])
    served = {}
    for batched in (False, True):
        store = ResponseStore(tmp_path / "s", snapshots=[snap])
        store.serve_fingerprints({calls[0].endpoint: Serving(current="new", first="old")})
        keys = [c.key for c in calls]
        got = store.fetch_many(keys, {c.key: c for c in calls}) if batched else {k: store.get(k) for k in keys}
        served[batched] = {k: r.text for k, r in got.items() if r is not None}
        store.close()
    assert served[True] == served[False] == {calls[1].key: "from the snapshot"}


def test_an_answer_read_by_key_alone_keeps_the_call_built_for_that_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_llmbias.store import calls as calls_module

    calls = stored(tmp_path, 2)
    store = ResponseStore(tmp_path)
    first = store.get(calls[0].key)
    assert first is not None and first.call is calls[0] and first.text == "answer 0"
    store.close()
    monkeypatch.setattr(calls_module, "_BY_KEY", {})  # a call this process never built: rebuilt from the record
    store = ResponseStore(tmp_path)
    again = store.get(calls[1].key)
    assert again is not None and again.call == calls[1] and again.call is not calls[1]
    store.close()


def test_a_key_built_string_by_string_is_the_canonical_jsons() -> None:
    """The key computed at build writes the messages' JSON string by string: the same bytes as
    ``json.dumps(canonical, sort_keys=True, ensure_ascii=False)`` for quotes, escapes, control
    characters, non-ASCII text, system prompts, primer turns and endpoints."""
    import random

    rng = random.Random(3)
    alphabet = 'aé"\\\n\t\x00\x1f\u2028😀</>{}[],:'
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        spec = ModelSpec(
            model="openai/m",
            alias="m",
            api_base=rng.choice([None, "http://h/v1", 'http://é/"x']),
            system=rng.choice([None, text[::-1]]),
            messages=rng.choice([(), (("assistant", "ok " + text),)]),
        )
        built = ModelCall.build(spec, text, GenerationSettings(temperature=0.5, max_tokens=9, samples=1, seed=1))
        blob = json.dumps(built.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert vars(built)["key"] == hashlib.sha256(blob.encode("utf-8")).hexdigest()
