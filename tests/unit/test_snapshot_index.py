"""A checked snapshot's index: what a run reads instead of parsing every line's prompt again."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import pytest

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import StoreError
from pytest_llmbias.store import ResponseStore, calls as calls_module, read_snapshot, write_snapshot
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.snapshot import CheckedSnapshots, SnapshotLayer, read_labels
from pytest_llmbias.store.snapshot_index import INDEX_DIR, load_index, write_index

GEN = GenerationSettings(temperature=0.5, max_tokens=100, samples=3, seed=40)
SPEC = ModelSpec(model="openai/m", alias="m")


def call(prompt: str, sample: int = 0) -> ModelCall:
    return ModelCall.build(SPEC, prompt, GEN, sample=sample)


def snapshot(path: Path) -> list[ModelCall]:
    """Three answers of every kind of field: plain, with log-probabilities and fingerprints, and
    one whose prompt and answer are not ASCII; the first two labelled."""
    calls = [call("one"), call("two\nlines", sample=1), call("drei — «vier»")]
    responses = [
        Response(calls[0], "an answer", "stop", 3, 5, 0.25, 1700000000.0),
        Response(
            calls[1],
            "B.",
            "length",
            7,
            1,
            None,
            None,
            top_logprobs=(("B", -0.01), ("A", -4.5)),
            system_fingerprint="fp_1",
            fingerprint="abcdef0123456789",
            number_logprobs=(("1", (("1", -0.1), ("2", -2.4))), ("0", (("0", -0.05),)), (",", ())),
        ),
        Response(calls[2], "ja — «oui»\n", None),
    ]
    labels = {calls[0].key: {"alias": "m", "domain": "d", "question": "q1"}, calls[1].key: {"alias": "m"}}
    write_snapshot(path, responses, labels)
    return calls


def layer(store: Path, *paths: Path) -> SnapshotLayer:
    out = SnapshotLayer(CheckedSnapshots(store / "checked-snapshots.json"))
    for path in paths:
        out.add(path)
    return out


def index_file(store: Path, snap: Path) -> Path:
    return store / INDEX_DIR / f"{hashlib.sha256(snap.read_bytes()).hexdigest()}.pickle"


def test_a_checked_snapshot_reads_from_its_index_what_its_lines_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap, store = tmp_path / "snap.jsonl", tmp_path / "store"
    store.mkdir()
    calls = snapshot(snap)
    expected = read_snapshot(snap)
    first = layer(store, snap)  # checks every line, then writes the index
    assert index_file(store, snap).is_file()
    assert load_index(store, hashlib.sha256(snap.read_bytes()).hexdigest(), snap.stat().st_size) is not None

    again = layer(store, snap)  # reads the index
    assert set(again.responses) == set(expected) == {c.key for c in calls}
    assert len(again.responses) == 3 and again.labels == first.labels == read_labels(snap)
    for c in calls:
        asked = again.responses.answer(c.key, c)
        assert asked is not None and asked.call is c  # the call asked, not one parsed from the line
        assert asked.to_dict() == expected[c.key].to_dict()
        assert asked.source == "snapshot:snap.jsonl" and asked.fingerprint == expected[c.key].fingerprint
    known = layer(store, snap)
    for c in calls:  # asked by key alone: the call this process built for that key
        assert known.responses[c.key].call is c
    fresh = layer(store, snap)
    monkeypatch.setattr(calls_module, "_BY_KEY", {})
    for c in calls:  # no such call built: the line is parsed for it
        whole = fresh.responses[c.key]
        assert whole.call == c and whole.call is not c and whole.to_dict() == expected[c.key].to_dict()
    assert fresh.responses.answer("0" * 64, None) is None and "0" * 64 not in fresh.responses


def test_the_index_is_what_is_read(tmp_path: Path) -> None:
    """An index is trusted as the store is (it is named by the file's digest): what it says is
    served. A run that reads it does not parse the lines' prompts."""
    snap, store = tmp_path / "snap.jsonl", tmp_path / "store"
    store.mkdir()
    calls = snapshot(snap)
    layer(store, snap)
    digest = hashlib.sha256(snap.read_bytes()).hexdigest()
    rows = load_index(store, digest, snap.stat().st_size)
    assert rows is not None
    edited = [(k, (*row[:3], "from the index", *row[4:])) for k, row in rows]
    write_index(store, digest, edited, [digest])
    answer = layer(store, snap).responses.answer(calls[0].key, calls[0])
    assert answer is not None and answer.text == "from the index"


@pytest.mark.parametrize(
    "broken",
    [
        b"not a pickle",
        pickle.dumps(os.getcwd),  # a reference to a function: refused, never called
        pickle.dumps({"v": 99, "rows": []}),
        "rows out of the file",
    ],
)
def test_an_index_that_cannot_be_read_is_ignored_and_written_again(tmp_path: Path, broken: bytes | str) -> None:
    snap, store = tmp_path / "snap.jsonl", tmp_path / "store"
    store.mkdir()
    calls = snapshot(snap)
    layer(store, snap)
    target = index_file(store, snap)
    digest = target.stem
    if isinstance(broken, str):
        rows = load_index(store, digest, snap.stat().st_size)
        assert rows is not None
        write_index(store, digest, [(k, (r[0], 10**9, *r[2:])) for k, r in rows], [digest])
        assert load_index(store, digest, snap.stat().st_size) is None
    else:
        target.write_bytes(broken)
    again = layer(store, snap)
    got = again.responses.answer(calls[1].key, calls[1])
    assert got is not None and got.text == "B." and got.top_logprobs == (("B", -0.01), ("A", -4.5))
    assert got.number_logprobs == (("1", (("1", -0.1), ("2", -2.4))), ("0", (("0", -0.05),)), (",", ()))
    assert load_index(store, digest, snap.stat().st_size) is not None  # written again


def test_line_endings_and_blank_lines_keep_each_line_where_it_is(tmp_path: Path) -> None:
    snap, store = tmp_path / "snap.jsonl", tmp_path / "store"
    store.mkdir()
    calls = snapshot(snap)
    lines = sorted(snap.read_bytes().splitlines(), key=lambda line: b"oui" in line)  # that one last
    snap.write_bytes(b"\r\n".join([b"", lines[0], b"  ", lines[1], lines[2]]) + b"\r\n")
    layer(store, snap)
    fresh = layer(store, snap)
    for c in calls:
        assert fresh.responses[c.key].call == c
    snap.write_bytes(snap.read_bytes() + lines[2].replace(b"oui", b"non") + b"\r\n")
    with pytest.raises(StoreError, match=r"snap\.jsonl:6: the same call as .*snap\.jsonl:5 with a different answer"):
        layer(store, snap)


def test_two_files_that_answer_one_call_differently_are_refused_from_the_index_too(tmp_path: Path) -> None:
    a, b, store = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "store"
    store.mkdir()
    calls = snapshot(a)
    write_snapshot(b, [Response(calls[2], "another answer")])
    layer(store, a)
    layer(store, b)  # both indexed
    assert len(list((store / INDEX_DIR).glob("*.pickle"))) == 2
    with pytest.raises(StoreError, match=r"b\.jsonl:1: the same call as .*a\.jsonl:\d with a different answer"):
        layer(store, a, b)


def test_nothing_is_written_where_the_store_has_no_folder_and_old_indexes_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = tmp_path / "snap.jsonl"
    snapshot(snap)
    assert layer(tmp_path / "missing", snap).responses
    assert not (tmp_path / "missing").exists()

    store = tmp_path / "store"
    store.mkdir()
    monkeypatch.setattr(CheckedSnapshots, "KEPT", 1)
    layer(store, snap)
    old = index_file(store, snap)
    snap.write_bytes(snap.read_bytes().replace(b"an answer", b"an edited answer"))
    layer(store, snap)
    assert index_file(store, snap).is_file() and not old.exists()


def test_a_store_serves_a_snapshot_through_its_index(tmp_path: Path) -> None:
    snap = tmp_path / "snap.jsonl"
    calls = snapshot(snap)
    ResponseStore(tmp_path / "s", snapshots=[snap]).close()
    first = ResponseStore(tmp_path / "s", snapshots=[snap])
    assert first.get(calls[0].key) is not None  # checked, then indexed
    first.close()
    assert index_file(tmp_path / "s", snap).is_file()
    store = ResponseStore(tmp_path / "s", snapshots=[snap])
    got = store.fetch_many([c.key for c in calls], {c.key: c for c in calls})
    assert [got[c.key].text for c in calls] == ["an answer", "B.", "ja — «oui»\n"]
    assert all(got[c.key].call is c for c in calls) and set(store.used) == {c.key for c in calls}
    store.close()
