"""Fingerprints: the digest, a model's history (first adopted on one ask, a change believed only
when seen twice, a model that varies by itself named on its next run), which stored answers are
served, and keys unchanged."""

from __future__ import annotations

import json

import pytest

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.planning.probes import PROBES, probe_calls
from pytest_llmbias.report import json_report
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.fingerprints import (
    CHANGED,
    NEW,
    UNCHANGED,
    VARIES,
    History,
    ModelFingerprint,
    Serving,
    digest,
    judge,
    needs_second_ask,
)
from pytest_llmbias.store.response_store import ResponseStore

SPEC = ModelSpec(model="openai/m", alias="m", api_base="http://127.0.0.1:9/v1", system="Be brief.")


def test_the_digest_reads_the_answers_and_the_system_fingerprint_not_their_spacing() -> None:
    base = digest(["ready", "42"])
    assert base == digest(["  ready\n", "42 "]) and len(base) == 16
    assert base != digest(["ready", "43"]) and base != digest(["42", "ready"])
    assert base != digest(["ready", "42"], ["fp_abc"])
    assert digest(["ready"], ["fp_a", None, "fp_b", "fp_a"]) == digest(["ready"], ["fp_b", "fp_a"])


def test_the_first_fingerprint_is_adopted_on_one_ask() -> None:
    empty = History()
    assert not needs_second_ask(empty, "a")
    state, history = judge(empty, "a", None, now=10.0, system_fingerprint="fp_1", run="r1")
    assert state == NEW and history.current == history.first == "a" and history.since == 10.0
    assert history.epochs[0].system_fingerprint == "fp_1" and (history.run, history.state) == ("r1", NEW)
    # a second ask, where one was made, is judged as ever: agreeing it adopts, differing it varies
    assert judge(empty, "a", "a", now=10.0, system_fingerprint="fp_1", run="r1") == (state, history)
    assert judge(empty, "a", "b", now=10.0)[0] == VARIES
    assert not needs_second_ask(history, "a")
    state, same = judge(history, "a", None, now=20.0)
    assert state == UNCHANGED and same.epochs == history.epochs
    assert needs_second_ask(history, "b")
    with pytest.raises(ValueError):
        judge(history, "b", None, now=20.0)


def test_a_model_that_varies_is_adopted_then_found_unfingerprintable_on_its_next_run() -> None:
    # first run: one ask, adopted
    state, history = judge(History(), "a", None, now=10.0, run="r1")
    assert state == NEW
    # next run: the first ask differs from the adoption, so a second is asked; it differs too
    assert needs_second_ask(history, "b")
    state, varied = judge(history, "b", "c", now=20.0, run="r2")
    assert state == VARIES and varied.varies_since == 20.0 and varied.epochs == history.epochs
    assert varied.current == "a" and (varied.run, varied.state) == ("r2", VARIES)
    # and the run after: still found varying, since the first time
    state, again = judge(varied, "d", "e", now=30.0, run="r3")
    assert state == VARIES and again.varies_since == 20.0 and again.current == "a"


def test_two_agreeing_asks_that_differ_from_the_one_ask_adoption_read_changed() -> None:
    _, adopted = judge(History(), "a", None, now=10.0)
    assert needs_second_ask(adopted, "b")
    state, changed = judge(adopted, "b", "b", now=20.0)
    assert state == CHANGED and changed.current == "b" and changed.first == "a"
    # the answers collected under the adoption are not served: they are asked again
    serving = Serving(changed.current, changed.first)
    assert not serving.serves("a") and not serving.serves(None) and serving.serves("b")


def test_a_change_seen_twice_becomes_current_and_one_seen_once_is_a_model_that_varies() -> None:
    _, history = judge(History(), "a", None, now=10.0)
    state, varied = judge(history, "b", "c", now=20.0)
    assert state == VARIES and varied.epochs == history.epochs and varied.varies_since == 20.0
    state, changed = judge(history, "b", "b", now=30.0)
    assert state == CHANGED and changed.current == "b" and changed.first == "a" and changed.previous.digest == "a"
    assert changed.since == 30.0
    state, back = judge(changed, "a", "a", now=40.0)  # back to the first model: a change again
    assert state == CHANGED and back.current == back.first == "a" and len(back.epochs) == 3


def test_a_history_survives_the_store_and_an_unreadable_one_is_empty() -> None:
    _, history = judge(History(), "a", None, now=10.0, system_fingerprint="fp", run="r")
    assert History.from_dict(json.loads(json.dumps(history.to_dict()))) == history
    assert History.from_dict(None) == History() == History.from_dict({"epochs": [{"since": 1}]})


def test_serving_keeps_untagged_answers_for_the_adopted_fingerprint_only() -> None:
    assert Serving("a", "a").serves(None) and Serving("a", "a").serves("a") and not Serving("a", "a").serves("b")
    assert not Serving("b", "a").serves(None) and Serving("b", "a").serves("b") and not Serving("b", "a").serves("a")


def test_probes_are_greedy_seeded_short_and_without_the_deployments_system_prompt() -> None:
    calls = probe_calls(SPEC)
    assert [c.messages for c in calls] == [(("user", p),) for p in PROBES]
    assert all(c.params["temperature"] == 0.0 and c.params["max_tokens"] <= 64 and "seed" in c.params for c in calls)
    assert len({c.endpoint for c in calls}) == 1
    # one model endpoint whatever the deployment: the version and the endpoint tell models apart
    other = ModelCall.build(SPEC, "a question", GenerationSettings())
    assert other.endpoint == calls[0].endpoint
    assert (
        ModelCall.build(
            ModelSpec(model="openai/m", alias="m", api_base="http://127.0.0.1:9/v1", version="2"),
            "q",
            GenerationSettings(),
        ).endpoint
        != other.endpoint
    )


def test_keys_and_records_of_an_existing_store_are_unchanged() -> None:
    call = ModelCall.build(SPEC, "Describe Tibet.", GenerationSettings())
    record = Response(call=call, text="an answer").to_dict()
    assert "fingerprint" not in record and "system_fingerprint" not in record
    tagged = Response(call=call, text="an answer", fingerprint="a", system_fingerprint="fp").to_dict()
    assert tagged["key"] == record["key"]
    back = Response.from_dict(tagged, source="store")
    assert (back.fingerprint, back.system_fingerprint) == ("a", "fp")


KNOWN_KEY = ModelCall(
    model="openai/m",
    api_base=None,
    messages=(("user", "hi"),),
    params={"temperature": 0.7, "max_tokens": 512, "seed": 0},
)


def test_a_key_computed_before_fingerprints_is_the_same() -> None:
    # sha256 of the canonical call, as version 1 of the key always wrote it
    import hashlib

    blob = json.dumps(
        {
            "v": 1,
            "model": "openai/m",
            "api_base": None,
            "messages": [{"role": "user", "content": "hi"}],
            "params": {"max_tokens": 512, "seed": 0, "temperature": 0.7},
            "sample": 0,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert KNOWN_KEY.key == hashlib.sha256(blob.encode()).hexdigest()


def test_the_store_serves_only_answers_of_the_current_fingerprint(tmp_path) -> None:
    old = Response(call=ModelCall.build(SPEC, "q1", GenerationSettings()), text="before fingerprints")
    tagged = Response(call=ModelCall.build(SPEC, "q2", GenerationSettings()), text="under a", fingerprint="a")
    store = ResponseStore(tmp_path)
    store.put(old)
    store.put(tagged)
    store.close()

    adopted = ResponseStore(tmp_path)  # the first fingerprint adopted: the old store keeps serving
    assert adopted.get(old.key) is not None  # read before the probes, forgotten if refused
    adopted.serve_fingerprints({old.call.endpoint: Serving("a", "a")})
    assert adopted.get(old.key).text == "before fingerprints" and adopted.get(tagged.key).text == "under a"
    adopted.close()

    changed = ResponseStore(tmp_path)
    assert changed.get(old.key) is not None
    changed.serve_fingerprints({old.call.endpoint: Serving("b", "a")})
    assert changed.get(old.key) is None and changed.get(tagged.key) is None and not changed.has(old.key)
    assert old.key not in changed.used
    changed.put(Response(call=old.call, text="asked again"))  # written under the current fingerprint
    changed.close()
    again = ResponseStore(tmp_path)
    again.serve_fingerprints({old.call.endpoint: Serving("b", "a")})
    assert again.get(old.key).text == "asked again" and again.get(old.key).fingerprint == "b"
    again.close()


def test_the_json_document_carries_the_fingerprints_and_validates() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    _, history = judge(History(), "a", None, now=10.0)
    _, history = judge(history, "b", "b", now=20.0)
    entry = ModelFingerprint.of("tgt", "openai/m", CHANGED, history, probes=6)
    doc = json_report.document(
        settings={},
        plan={
            "calls": 0,
            "from_store": 0,
            "fetched": 0,
            "failed": 0,
            "missing": 0,
            "usage": {},
            "tokens": 0,
            "cost_usd": 0.0,
        },
        gates=[],
        version="0",
        fingerprints=[entry.to_dict()],
    )
    jsonschema.validate(doc, json_report.schema())
    (got,) = doc["fingerprints"]
    assert got["state"] == "changed" and got["previous"] == "a" and got["since"].startswith("1970-01-01T00:00:20")
    assert "the model behind this name changed" in got["text"]


def test_a_failed_probe_reads_as_any_calls_failure_and_offers_no_false_fix() -> None:
    from pytest_llmbias.errors import ConfigError, ProviderError
    from pytest_llmbias.planning.probes import probe_failed

    refused = ProviderError(
        "model 'm' (openai/m at http://127.0.0.1:9/v1): HTTP 401: no (not retryable); "
        "likely cause: the key was refused: check $K",
        status=401,
        likely_cause="the key was refused: check $K",
    )
    error = probe_failed(SPEC, refused)
    assert str(error).startswith(str(refused)) and "fingerprint probes" in str(error)
    assert "--llmbias-no-fingerprint" not in str(error) and error.status == 401
    # a failure with no known cause may be the probes' own: turning them off is offered; the model
    # is named where the error did not name it; a configuration error (a missing key) is every call's
    odd = probe_failed(SPEC, ProviderError("malformed reply: not JSON"))
    assert str(odd).startswith("model 'm' (openai/m at http://127.0.0.1:9/v1): malformed reply: not JSON")
    assert "--llmbias-no-fingerprint turns them off" in str(odd)
    assert "--llmbias-no-fingerprint" not in str(probe_failed(SPEC, ConfigError("model 'm' needs an API key")))


def test_the_plan_counts_probes_once_and_twice_over_for_a_model_whose_answers_vary(tmp_path, monkeypatch) -> None:
    """A model with no fingerprint yet adopts its first ask, one with a fingerprint is asked once:
    the plan counts the probes once; a fingerprinted model whose answers were last seen to vary
    has its first ask checked by a second: the plan counts both."""
    from types import SimpleNamespace

    import pytest_llmbias.planning.probes as probes
    from pytest_llmbias.config.settings import Settings, StoreSettings
    from pytest_llmbias.store.fingerprints import HISTORY_PREFIX

    monkeypatch.setattr(probes, "expected_follow_ups", lambda planned, get: [])
    store = ResponseStore(tmp_path)
    from pytest_llmbias.config.settings import GenerationSettings
    from pytest_llmbias.planning.collector import PlannedCall
    from pytest_llmbias.store.calls import ModelCall

    planned = [PlannedCall("m", ModelCall.build(SPEC, "a question", GenerationSettings()), "d", "q1")]
    session = SimpleNamespace(
        settings=Settings(target=SPEC, store=StoreSettings(dir=tmp_path)),
        planned=planned,
        model=lambda alias: SPEC,
        store=store,
    )
    new = probes.with_probes({}, session)["m"]
    assert new["probes"] == new["calls"] == new["to_fetch"] == len(PROBES)
    key = HISTORY_PREFIX + probe_calls(SPEC)[0].endpoint
    _, history = judge(History(), "a" * 16, None, now=1.0)
    store.write_meta(key, history.to_dict())
    known = probes.with_probes({}, session)["m"]
    assert known["probes"] == known["to_fetch"] == len(PROBES)
    _, varied = judge(history, "b" * 16, "c" * 16, now=2.0)
    store.write_meta(key, varied.to_dict())
    restless = probes.with_probes({}, session)["m"]
    assert restless["probes"] == restless["to_fetch"] == 2 * len(PROBES)
