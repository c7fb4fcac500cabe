"""The collector's gate (the fingerprint probes, run beside a collection): the calls the store holds
nothing of go out at once, but no answer is stored before the gate ends and each is stored under the
fingerprint it tells; the calls the store holds an answer of wait for it, then are served or asked
again as it says; a gate that fails stops the collection, drops the answers held and is raised.

The model is the scripted in-process client of ``test_pipeline.py`` (the network path, with the
real probes, is covered by tests/integration/test_fingerprints.py and test_newcomer_errors.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from pytest_llmbias.errors import ProviderError
from pytest_llmbias.planning.collector import collect
from pytest_llmbias.store import ResponseStore
from pytest_llmbias.store.fingerprints import Serving
from tests.unit.test_pipeline import ScriptedClient, answer_calls, settings


def plain(planned):  # noqa: ANN001, ANN201
    """The planned answers without their judge follow-ups: the gate's effect on answers alone."""
    return [dataclasses.replace(p, then=()) for p in planned]


def test_calls_go_out_beside_the_gate_and_are_stored_under_its_fingerprint(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "store")
    planned = plain(answer_calls(settings(tmp_path), n=2))  # 8 answers
    client = ScriptedClient(delay=0.01)
    endpoint = planned[0].call.endpoint
    seen_while_open: list[int] = []

    async def gate() -> None:
        await asyncio.sleep(0.1)  # the probes' round trip, longer than the calls'
        seen_while_open.append(sum(e == "end" for e, _ in client.log))
        assert not store.may_serve([p.call.key for p in planned])  # nothing stored yet
        store.serve_fingerprints({endpoint: Serving("fp-now", "fp-now")})

    report = asyncio.run(collect(planned, store=store, client=lambda a: client, concurrency=8, gate=gate()))
    assert report.fetched == 8 and not report.errors
    assert seen_while_open == [8]  # every call was answered before the gate ended
    tgt = [p for p in planned if p.call.endpoint == endpoint]
    assert {store.get(p.call.key).fingerprint for p in tgt} == {"fp-now"}


def test_stored_answers_wait_for_the_gate_and_are_served_only_as_it_says(tmp_path: Path) -> None:
    planned = plain(answer_calls(settings(tmp_path), n=2))
    endpoint = planned[0].call.endpoint
    first = ResponseStore(tmp_path / "store")
    first.serve_fingerprints({endpoint: Serving("fp-old", "fp-old")})
    asyncio.run(collect(planned, store=first, client=lambda a: ScriptedClient(), concurrency=8))
    first.close()

    store = ResponseStore(tmp_path / "store")
    client = ScriptedClient()

    async def gate() -> None:  # the target's model changed: its stored answers are refused
        await asyncio.sleep(0.05)
        assert client.log == []  # every call is stored: none went out before the gate ended
        store.serve_fingerprints({endpoint: Serving("fp-new", "fp-old")})

    report = asyncio.run(collect(planned, store=store, client=lambda a: client, concurrency=8, gate=gate()))
    assert report.fetched == 2 and report.from_store == 6  # the target's two asked again
    assert {m for _, m in client.log} == {planned[0].call.model}
    assert {store.get(p.call.key).fingerprint for p in planned if p.call.endpoint == endpoint} == {"fp-new"}


def test_a_failed_gate_stops_the_collection_drops_what_it_held_and_is_raised(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "store")
    planned = plain(answer_calls(settings(tmp_path), n=5))  # 20 answers
    client = ScriptedClient(delay=0.01)

    async def gate() -> None:
        await asyncio.sleep(0.03)
        raise ProviderError("model 'tgt': HTTP 401 (the fingerprint probes)", status=401)

    with pytest.raises(ProviderError, match="HTTP 401"):
        asyncio.run(collect(planned, store=store, client=lambda a: client, concurrency=4, gate=gate()))
    started = sum(e == "start" for e, _ in client.log)
    assert started == 4  # the first calls (the concurrency's), then none
    assert not store.may_serve([p.call.key for p in planned])  # their answers were not stored
