from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import ConfigError, StoreError
from pytest_llmbias.planning.collector import PlannedCall, deduplicate
from pytest_llmbias.store import ResponseStore, read_snapshot, write_snapshot
from pytest_llmbias.store.calls import KEY_VERSION, ModelCall, Response, as_messages
from pytest_llmbias.store.snapshot import read_labels

GEN = GenerationSettings(temperature=0.5, max_tokens=100, samples=3, seed=40)
SPEC = ModelSpec(model="openai/m", alias="m")


def call(
    prompt: str = "Hello?", *, spec: ModelSpec = SPEC, sample: int = 0, gen: GenerationSettings = GEN
) -> ModelCall:
    return ModelCall.build(spec, prompt, gen, sample=sample)


def response(c: ModelCall | None = None, text: str = "an answer", **kwargs) -> Response:
    c = c or call()
    defaults = dict(finish_reason="stop", prompt_tokens=3, completion_tokens=5, latency_s=0.25, created=1700000000.0)
    defaults.update(kwargs)
    return Response(call=c, text=text, **defaults)


# --------------------------------------------------------------------------------------------
# ModelCall keys


def test_key_matches_canonical_json_sha256() -> None:
    c = ModelCall.build(
        ModelSpec(model="openai/m", alias="m", api_base="http://h/v1", params={"top_p": 0.9}), "Héllo?", GEN, sample=2
    )
    canonical = {
        "v": 1,
        "model": "openai/m",
        "api_base": "http://h/v1",
        "messages": [{"role": "user", "content": "Héllo?"}],
        "params": {"max_tokens": 100, "seed": 42, "temperature": 0.5, "top_p": 0.9},
        "sample": 2,
    }
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert KEY_VERSION == 1
    assert c.key == hashlib.sha256(blob.encode("utf-8")).hexdigest()
    # A literal pin too: changing the key derivation silently invalidates every store and snapshot.
    assert c.key == "86117c44983077935835c1968d5865c259482beb0107067555a77b765ede248b"


def test_key_is_stable_across_instances_and_param_order() -> None:
    a = ModelCall(model="m", api_base=None, messages=(("user", "x"),), params={"a": 1, "b": 2}, sample=0)
    b = ModelCall(model="m", api_base=None, messages=(("user", "x"),), params={"b": 2, "a": 1}, sample=0)
    assert a.key == b.key
    assert len(a.key) == 64 and int(a.key, 16) >= 0


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda: call(sample=1), id="sample"),
        pytest.param(lambda: call(spec=ModelSpec(model="openai/m2", alias="m")), id="model"),
        pytest.param(lambda: call(spec=ModelSpec(model="openai/m", alias="m", api_base="http://x")), id="api_base"),
        pytest.param(lambda: call(spec=ModelSpec(model="openai/m", alias="m", params={"top_p": 0.1})), id="params"),
        pytest.param(lambda: call(gen=GenerationSettings(temperature=0.6, max_tokens=100, seed=40)), id="temperature"),
        pytest.param(lambda: call("Hello!"), id="content"),
        pytest.param(lambda: ModelCall.build(SPEC, [{"role": "system", "content": "Hello?"}], GEN), id="role"),
    ],
)
def test_key_differs(other) -> None:
    assert other().key != call().key


def test_key_ignores_alias_and_api_key_env() -> None:
    base = call()
    assert call(spec=ModelSpec(model="openai/m", alias="renamed")).key == base.key
    assert call(spec=ModelSpec(model="openai/m", alias="m", api_key_env="SOME_KEY")).key == base.key


def test_seed_is_generation_seed_plus_sample() -> None:
    assert [call(sample=s).params["seed"] for s in range(3)] == [40, 41, 42]
    no_seed = call(gen=GenerationSettings(seed=None))
    assert "seed" not in no_seed.params


def test_param_precedence() -> None:
    spec = ModelSpec(model="openai/m", alias="m", params={"temperature": 0.0, "top_p": 0.5})
    c = ModelCall.build(spec, "q", GEN, params={"top_p": 0.7})
    assert c.params == {"temperature": 0.0, "max_tokens": 100, "seed": 40, "top_p": 0.7}


def test_messages() -> None:
    assert as_messages("hi") == (("user", "hi"),)
    assert as_messages([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]) == (
        ("system", "s"),
        ("user", "u"),
    )
    with pytest.raises(ConfigError):
        as_messages([])
    with pytest.raises(ConfigError):
        as_messages([{"role": "user"}])


def test_non_json_params_rejected() -> None:
    c = ModelCall.build(ModelSpec(model="m", alias="m", params={"x": object()}), "q", GEN)
    with pytest.raises(ConfigError, match="JSON"):
        _ = c.key


def test_response_dict_round_trip() -> None:
    r = response(call(sample=1, spec=ModelSpec(model="openai/m", alias="m", params={"stop": ["\n"]})))
    again = Response.from_dict(json.loads(json.dumps(r.to_dict())), source="x")
    assert again == r
    assert again.key == r.key
    assert again.source == "x"


def test_deduplicate_keeps_first_per_key() -> None:
    first = PlannedCall(alias="m", call=call(), question="q1")
    same = PlannedCall(alias="m2", call=call(spec=ModelSpec(model="openai/m", alias="m2")), question="q2")
    other = PlannedCall(alias="m", call=call(sample=1), question="q1")
    unique = deduplicate([first, same, other])
    assert list(unique.values()) == [first, other]
    assert list(unique) == [first.call.key, other.call.key]


def test_a_duplicate_s_follow_ups_see_their_own_domain_and_question() -> None:
    """Two domains that share a question's text plan the same call; it is made once, and each
    domain's follow-up (a judge's, whose retest sample is chosen by question id) is told its own
    domain and question, not the first one's."""
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Seen:
        name: str
        log: list = field(default_factory=list, compare=False, hash=False)

        def __call__(self, item, response):
            self.log.append((self.name, item.domain, item.question))
            return ()

    log: list = []
    d1 = PlannedCall(alias="m", call=call(), domain="d1", question="d1-q1", then=(Seen("one", log),))
    d2 = PlannedCall(alias="m", call=call(), domain="d2", question="d2-q7", then=(Seen("two", log),))
    again = PlannedCall(alias="m", call=call(), domain="d1", question="d1-q1", then=(Seen("one", log),))
    (merged,) = deduplicate([d1, d2, again]).values()
    assert len(merged.then) == 2
    for follow in merged.then:
        follow(merged, response())
    assert log == [("one", "d1", "d1-q1"), ("two", "d2", "d2-q7")]


# --------------------------------------------------------------------------------------------
# ResponseStore on disk


def test_put_then_get_from_new_instance(tmp_path: Path) -> None:
    r = response()
    store = ResponseStore(tmp_path)
    store.put(r)
    assert store.get(r.key) is r  # memory first
    store.close()

    again = ResponseStore(tmp_path)
    got = again.get(r.key)
    assert got == r
    assert got is not r
    assert got.source == "store"
    assert got.key == r.key
    assert again.used == {r.key: got}
    assert again.get(call("unknown").key) is None
    again.close()


def test_refresh_does_not_serve_but_overwrites(tmp_path: Path) -> None:
    old = response(text="old")
    store = ResponseStore(tmp_path)
    store.put(old)
    store.close()

    refresh = ResponseStore(tmp_path, mode="refresh")
    assert refresh.get(old.key) is None
    new = response(text="new")
    refresh.put(new)
    assert refresh.get(old.key) is new  # this session's own answer is served
    refresh.close()

    use = ResponseStore(tmp_path)
    got = use.get(old.key)
    assert got is not None and got.text == "new"
    use.close()


def test_off_creates_no_files(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    store = ResponseStore(directory, mode="off", snapshots=[tmp_path / "absent.jsonl"])
    r = response()
    store.put(r)
    assert store.get(r.key) is r
    assert store.get(call("other").key) is None
    store.close()
    assert not directory.exists()
    assert list(tmp_path.iterdir()) == []


def test_read_only_store_creates_nothing_and_reads_an_existing_one(tmp_path: Path) -> None:
    empty = ResponseStore(tmp_path / "none", read_only=True)
    assert empty.get(call().key) is None
    empty.close()
    assert not (tmp_path / "none").exists()

    writer = ResponseStore(tmp_path / "s")
    writer.put(response())
    writer.close()
    reader = ResponseStore(tmp_path / "s", read_only=True)
    got = reader.get(call().key)
    assert got is not None and got.text == "an answer"
    with pytest.raises(StoreError, match="read-only"):
        reader.put(response(call("new")))
    reader.close()


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_an_emptied_store_says_so(tmp_path: Path, damage: str) -> None:
    writer = ResponseStore(tmp_path)
    writer.put(response())
    writer.close()
    db = tmp_path / "responses" / "cache.db"
    for extra in (tmp_path / "responses").glob("cache.db-*"):
        extra.unlink()
    db.write_bytes(b"") if damage == "truncate" else db.unlink()

    store = ResponseStore(tmp_path)
    assert store.get(call().key) is None
    (notice,) = store.notices
    assert "emptied or reset" in notice and str(tmp_path / "responses") in notice
    assert ("0 bytes" if damage == "truncate" else "missing") in notice
    store.close()
    fresh = ResponseStore(tmp_path / "new")
    assert fresh.get(call().key) is None and fresh.notices == []
    fresh.close()


def test_unknown_mode_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sometimes"):
        ResponseStore(tmp_path, mode="sometimes")


def test_put_refuses_non_responses(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path)
    with pytest.raises(TypeError):
        store.put({"text": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.put(RuntimeError("a failed call"))  # type: ignore[arg-type]
    assert store.used == {}
    store.close()


def test_snapshot_layer_beneath_store(tmp_path: Path) -> None:
    c_both, c_snap = call("both"), call("snapshot only")
    snap = tmp_path / "snap.jsonl"
    write_snapshot(snap, [response(c_both, "from snapshot"), response(c_snap, "snapshot answer")])

    disk = ResponseStore(tmp_path / "s")
    disk.put(response(c_both, "from disk"))
    disk.close()

    store = ResponseStore(tmp_path / "s", snapshots=[snap])
    both = store.get(c_both.key)
    assert both is not None and both.text == "from disk" and both.source == "store"
    only = store.get(c_snap.key)
    assert only is not None and only.text == "snapshot answer" and only.source == "snapshot:snap.jsonl"
    assert set(store.used) == {c_both.key, c_snap.key}
    store.close()


def test_one_call_answered_twice_differently_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    c, other = call(), call("other")
    write_snapshot(tmp_path / "a.jsonl", [response(c, "a"), response(other, "same text")])
    write_snapshot(tmp_path / "b.jsonl", [response(other, "same text")])
    agreeing = ResponseStore(tmp_path / "s", snapshots=[tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    got = agreeing.get(other.key)
    assert got is not None and got.text == "same text"  # the same answer twice is one response
    agreeing.close()

    write_snapshot(tmp_path / "b.jsonl", [response(c, "b")])
    store = ResponseStore(tmp_path / "s", snapshots=[tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    with pytest.raises(StoreError) as info:
        store.get(c.key)
    lines = {r.key: i for i, r in enumerate(read_snapshot(tmp_path / "a.jsonl").values(), 1)}
    assert f"{tmp_path / 'b.jsonl'}:1: the same call as {tmp_path / 'a.jsonl'}:{lines[c.key]}" in str(info.value)
    store.close()

    one_file = tmp_path / "twice.jsonl"
    line = json.dumps(response(c, "first").to_dict())
    one_file.write_text(line + "\n\n" + line.replace('"first"', '"second"') + "\n", encoding="utf-8")
    with pytest.raises(StoreError, match="twice.jsonl:3: the same call as .*twice.jsonl:1 with a different answer"):
        read_snapshot(one_file)


def test_a_line_that_is_not_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    snap = tmp_path / "snap.jsonl"
    write_snapshot(snap, [response(call("one")), response(call("two"))])
    lines = snap.read_bytes().splitlines(keepends=True)
    snap.write_bytes(lines[0] + lines[1].replace(b"an answer", b"an \xff\xfe answer"))
    with pytest.raises(StoreError, match=r"snap\.jsonl:2: not UTF-8 text"):
        read_snapshot(snap)


def test_a_snapshot_is_checked_once_per_content(tmp_path: Path) -> None:
    """The store remembers the digest of a file whose every key it checked: the same bytes are
    read again with each line's key as written; other bytes (an edited line) are checked again."""
    import hashlib

    from pytest_llmbias.store.response_store import CHECKED_SNAPSHOTS

    snap = tmp_path / "snap.jsonl"
    one, two = call("one"), call("two")
    write_snapshot(snap, [response(one), response(two)])
    store = ResponseStore(tmp_path / "s", snapshots=[snap])
    assert store.get(one.key) is not None
    store.close()
    checked = json.loads((tmp_path / "s" / CHECKED_SNAPSHOTS).read_text(encoding="utf-8"))
    assert checked == [hashlib.sha256(snap.read_bytes()).hexdigest()]

    again = ResponseStore(tmp_path / "s", snapshots=[snap])
    got = again.get(two.key)
    assert got is not None and got.call.key == two.key and got.text == response(two).text
    again.close()

    # a line whose key no longer matches its prompt: new bytes, so checked again, and refused
    snap.write_text(snap.read_text(encoding="utf-8").replace('"content": "one"', '"content": "uno"'), encoding="utf-8")
    edited = ResponseStore(tmp_path / "s", snapshots=[snap])
    with pytest.raises(StoreError, match=r"snap\.jsonl:\d: the line's key does not match its request fields"):
        edited.get(two.key)
    edited.close()
    # the same edited bytes, listed as checked (as a store that had checked them would list them),
    # are read with the keys as written: what the list promises is that they were checked
    (tmp_path / "s" / CHECKED_SNAPSHOTS).write_text(
        json.dumps([hashlib.sha256(snap.read_bytes()).hexdigest()]), encoding="utf-8"
    )
    trusted = ResponseStore(tmp_path / "s", snapshots=[snap])
    assert trusted.get(one.key) is not None
    trusted.close()


@pytest.mark.parametrize("mode", ["refresh", "off"])
def test_snapshots_ignored_outside_use_mode(tmp_path: Path, mode: str) -> None:
    c = call()
    snap = tmp_path / "snap.jsonl"
    write_snapshot(snap, [response(c, "from snapshot")])
    store = ResponseStore(tmp_path / "s", mode=mode, snapshots=[snap])
    assert store.get(c.key) is None
    store.close()


def test_refresh_with_run_id_serves_same_run_only(tmp_path: Path) -> None:
    c1, c2 = call("one"), call("two")
    writer = ResponseStore(tmp_path, mode="refresh", run_id="run-1")
    writer.put(response(c1, "fresh"))
    writer.close()
    plain = ResponseStore(tmp_path)
    plain.put(response(c2, "no run"))
    plain.close()

    same = ResponseStore(tmp_path, mode="refresh", run_id="run-1")
    got = same.get(c1.key)
    assert got is not None and got.text == "fresh" and got.source == "store"
    assert same.get(c2.key) is None  # written without a run id
    same.close()

    other = ResponseStore(tmp_path, mode="refresh", run_id="run-2")
    assert other.get(c1.key) is None
    other.close()

    no_run = ResponseStore(tmp_path, mode="refresh")
    assert no_run.get(c1.key) is None
    no_run.close()

    use = ResponseStore(tmp_path)
    got = use.get(c1.key)
    assert got is not None and got.text == "fresh"  # the run stamp does not hide it from 'use'
    use.close()


def test_a_database_that_is_no_database_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path)
    store.put(response())
    store.close()
    db = tmp_path / "responses" / "cache.db"
    for extra in (tmp_path / "responses").glob("cache.db-*"):
        extra.unlink()
    garbage = b"\x00garbage, not a database\xff" * 200
    db.write_bytes(garbage)

    healed = ResponseStore(tmp_path)
    assert healed.get(response().key) is None  # nothing of it could be read: asked again
    (notice,) = healed.notices
    (aside,) = (tmp_path / "responses").glob("cache.db.damaged-*")
    assert aside.read_bytes() == garbage  # kept for inspection, as it was
    assert str(aside) in notice and "moved aside" in notice and "rm -rf" not in notice
    assert "1 answer(s) this run needs are not in it and are asked again" in notice
    healed.put(response())
    healed.close()
    again = ResponseStore(tmp_path)
    assert again.get(response().key) is not None and again.notices == []
    again.close()


@pytest.mark.parametrize(
    "record",
    ["not json {", json.dumps({"key": "k", "text": "no request fields"}), json.dumps([1, 2, 3]), "wrong key"],
    ids=["invalid-json", "no-request-fields", "a-list", "wrong-key"],
)
def test_an_unreadable_disk_entry_is_a_miss_and_said(tmp_path: Path, record: str) -> None:
    import diskcache

    r, other = response(), response(call("other"), text="kept")
    if record == "wrong key":
        record = json.dumps(other.to_dict())
    with diskcache.Cache(str(tmp_path / "responses")) as cache:
        cache.set("response:" + r.key, record)
        cache.set("response:" + other.key, json.dumps(other.to_dict()))
    store = ResponseStore(tmp_path)
    store.label(r.key, alias="m", domain="d", question="q7")
    assert store.get(r.key) is None  # asked again
    assert store.get(other.key).text == "kept"  # the rest served
    (notice,) = store.notices
    assert "held 1 answer(s) that could not be read" in notice and "question q7" in notice
    assert r.key[:16] in notice and "rm -rf" not in notice
    assert store.notices == [notice]  # told once
    store.close()


# --------------------------------------------------------------------------------------------
# Snapshots


def many_responses() -> list[Response]:
    out = []
    for prompt in ("b question", "a question", "c question"):
        for sample in (1, 0):
            out.append(response(call(prompt, sample=sample), text=f"answer to {prompt} #{sample}"))
    return out


def test_export_round_trip_sorted_and_stable(tmp_path: Path) -> None:
    responses = many_responses()
    store = ResponseStore(tmp_path / "s")
    for i, r in enumerate(responses):
        store.put(r)
        store.label(r.key, alias="m", domain="d", question=f"q{5 - i // 2}", unused=None)
    out1, out2 = tmp_path / "one.jsonl", tmp_path / "sub" / "two.jsonl"
    assert store.export(out1) == len(responses)
    # the same responses put in another order export identically
    store2 = ResponseStore(tmp_path / "s2", mode="off")
    for r in reversed(responses):
        store2.put(r)
    for i, r in enumerate(responses):
        store2.label(r.key, alias="m", domain="d", question=f"q{5 - i // 2}")
    assert store2.export(out2) == len(responses)
    assert out1.read_bytes() == out2.read_bytes()
    store.close()

    back = read_snapshot(out1)
    assert set(back) == {r.key for r in responses}
    for r in responses:
        assert back[r.key] == r
        assert back[r.key].source == "snapshot:one.jsonl"

    lines = out1.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    order = [(rec["labels"]["question"], rec["sample"], rec["key"]) for rec in records]
    assert order == sorted(order)
    assert all(line == json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True) for line in lines)
    labels = read_labels(out1)
    assert all(lab["alias"] == "m" and "unused" not in lab for lab in labels.values())
    assert not list(tmp_path.glob("**/*.tmp"))


def test_write_snapshot_without_labels_sorted_by_sample_then_key(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_snapshot(path, many_responses())
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    order = [(rec["sample"], rec["key"]) for rec in records]
    assert order == sorted(order)
    assert "labels" not in records[0]


def test_a_snapshot_gets_the_users_default_file_mode(tmp_path: Path) -> None:
    import os
    import stat

    umask = os.umask(0o022)
    try:
        write_snapshot(tmp_path / "shared.jsonl", many_responses())
        assert stat.S_IMODE((tmp_path / "shared.jsonl").stat().st_mode) == 0o644  # not mkstemp's 0600
        os.umask(0o077)
        write_snapshot(tmp_path / "private.jsonl", many_responses())
        assert stat.S_IMODE((tmp_path / "private.jsonl").stat().st_mode) == 0o600
    finally:
        os.umask(umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["private.jsonl", "shared.jsonl"]  # no temporary left


def test_snapshot_blank_lines_ignored(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_snapshot(path, many_responses()[:2])
    path.write_text("\n" + path.read_text(encoding="utf-8") + "\n\n", encoding="utf-8")
    assert len(read_snapshot(path)) == 2


def test_snapshot_tampered_key(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_snapshot(path, many_responses())
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[2])
    record["messages"][0]["content"] = "edited by hand"
    lines[2] = json.dumps(record, sort_keys=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(StoreError) as info:
        read_snapshot(path)
    assert f"{path}:3" in str(info.value)
    assert "key does not match" in str(info.value)


def test_snapshot_edited_key_field(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_snapshot(path, many_responses())
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["key"] = "0" * 64
    lines[0] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(StoreError, match=rf"{path}:1\b"):
        read_snapshot(path)


def test_snapshot_text_edit_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_snapshot(path, many_responses()[:1])
    record = json.loads(path.read_text(encoding="utf-8"))
    record["text"] = "a hand-corrected answer"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    (got,) = read_snapshot(path).values()
    assert got.text == "a hand-corrected answer"


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        '{"key": "x"}',
        '["a", "list"]',
        '{"model": "m", "messages": [], "params": {}, "sample": 0, "text": 5}',
    ],
)
def test_snapshot_malformed_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "s.jsonl"
    write_snapshot(path, many_responses()[:2])
    path.write_text(path.read_text(encoding="utf-8") + bad + "\n", encoding="utf-8")
    with pytest.raises(StoreError) as info:
        read_snapshot(path)
    assert f"{path}:3" in str(info.value)


def test_missing_snapshot(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="absent.jsonl"):
        read_snapshot(tmp_path / "absent.jsonl")
    store = ResponseStore(tmp_path / "s", snapshots=[tmp_path / "absent.jsonl"])
    with pytest.raises(StoreError, match="absent.jsonl"):
        store.get(call().key)
    store.close()


def test_merge_export_parts_joins_the_given_parts_and_removes_them(tmp_path: Path) -> None:
    from pytest_llmbias.store.snapshot import export_part_path, merge_export_parts

    responses = many_responses()
    export = tmp_path / "out" / "used.jsonl"
    gw0, gw1 = export_part_path(export, "gw0", "0123456789ab"), export_part_path(export, "gw1", "0123456789ab")
    assert gw0 == tmp_path / "out" / "used.jsonl.01234567.gw0.part"
    assert export_part_path(export, "gw0", "fedcba9876") != gw0  # another run never touches it
    labels = {responses[0].key: {"alias": "m", "domain": "d", "question": "q1"}}
    write_snapshot(gw0, responses[:3], labels)
    write_snapshot(gw1, responses[2:])  # responses[2] is in both parts
    stale = export_part_path(export, "gw7")
    write_snapshot(stale, [response(call("not this run"))])

    assert merge_export_parts(export, [gw0, gw1]) == len(responses)
    assert set(read_snapshot(export)) == {r.key for r in responses}
    assert read_labels(export) == labels
    assert not gw0.exists() and not gw1.exists()
    assert stale.exists()  # only the parts it is given


def test_merge_export_parts_without_parts_writes_nothing(tmp_path: Path) -> None:
    from pytest_llmbias.store.snapshot import merge_export_parts

    assert merge_export_parts(tmp_path / "used.jsonl", []) == 0
    assert not (tmp_path / "used.jsonl").exists()


def test_a_thread_that_releases_its_connection_leaves_the_store_free_to_reset(tmp_path: Path) -> None:
    """diskcache opens a connection per thread and closes only the caller's; the loop thread that
    writes the answers releases its own, or a store emptied before the next run of the same process
    stays locked ("database is locked", after diskcache's 60 s wait) until the garbage collector
    happens to run."""
    import gc
    import threading

    from pytest_llmbias.store.disk import DiskCache

    cache = DiskCache(tmp_path / "responses")

    def write() -> None:
        cache.set("k", {"v": 1})
        cache.release_thread()

    gc.disable()  # as when the collector has not run yet
    try:
        writer = threading.Thread(target=write)
        writer.start()
        writer.join()
        del writer
        cache.close()
        (tmp_path / "responses" / "cache.db").write_bytes(b"")
        again = DiskCache(tmp_path / "responses", timeout=0.2)
        again.set("k", {"v": 2})
        assert again.get("k") == {"v": 2} and again.notices  # emptied, said so, and written afresh
        again.close()
    finally:
        gc.enable()


def test_blob_reads_in_batches_give_what_key_by_key_reads_give(tmp_path: Path) -> None:
    from pytest_llmbias.store.blobs import BlobCache

    blobs = BlobCache.for_store(tmp_path / "store", folder="features")
    small, large = b"\x00\x01" * 10, bytes(range(256)) * 400  # the large one is kept in a file of its own
    blobs.set_many({"small": small, "large": large, "empty": b""})
    keys = ["small", "absent", "large", "empty"] * 300  # more keys than one query reads
    assert blobs.get_many(keys) == {"small": small, "large": large, "empty": b""}
    assert blobs.get_many(keys) == {k: v for k in keys if (v := blobs._open().get(k)) is not None}
    blobs.close()


def test_a_cache_whose_reads_count_is_read_key_by_key(tmp_path: Path) -> None:
    """With statistics on, a read updates the cache: the batched read leaves it to ``Cache.get``,
    which counts each hit and miss, and gives the same values."""
    import diskcache

    from pytest_llmbias.store.disk import select_many

    cache = diskcache.Cache(str(tmp_path / "counted"), statistics=True, eviction_policy="none")
    cache.set("a", b"1")
    cache.set("b", "two")
    assert select_many(cache, ["a", "absent", "b"]) == {"a": b"1", "b": "two"}
    assert cache.stats() == (2, 1)  # hits, misses: each key was read by Cache.get
    cache.close()


def test_an_answer_collected_under_a_fingerprint_is_what_replace_gives() -> None:
    """The store stamps a fresh answer with its model's fingerprint on a copy (the answer itself is
    frozen and may be held elsewhere): the same as ``dataclasses.replace``, every other field kept."""
    import dataclasses

    call = ModelCall.build(ModelSpec(model="openai/m", alias="m"), "Q?", GenerationSettings(seed=1))
    fresh = Response(
        call=call, text="t", finish_reason="stop", prompt_tokens=1, completion_tokens=2, latency_s=0.5,
        created=1.0, source="network", top_logprobs=(("a", -0.1),), system_fingerprint="fp",
    )  # fmt: skip
    stamped = fresh.collected_under("abcd")
    expected = dataclasses.replace(fresh, fingerprint="abcd")
    assert stamped is not fresh and fresh.fingerprint is None
    assert stamped == expected and stamped.fingerprint == "abcd"
    assert {f.name: getattr(stamped, f.name) for f in dataclasses.fields(Response)} == {
        f.name: getattr(expected, f.name) for f in dataclasses.fields(Response)
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        stamped.text = "changed"  # type: ignore[misc]
