"""The stores' record layout: the answer's fields first, parsed alone when the call is known
(pytest_llmbias.store.records), and read as the whole record always was."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import StoreError
from pytest_llmbias.store import ResponseStore
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.records import answer_fields, record

GEN = GenerationSettings(temperature=0.5, max_tokens=100, samples=3, seed=40)
SPEC = ModelSpec(model="openai/m", alias="m", api_base="http://127.0.0.1:9/v1")


def answer(prompt: str, text: str, **fields) -> Response:
    call = ModelCall.build(SPEC, prompt, GEN)
    given = dict(finish_reason="stop", prompt_tokens=3, completion_tokens=5, latency_s=0.25, created=1.7e9)
    given.update(fields)
    return Response(call=call, text=text, **given)


def raw_of(response: Response, run: str | None = None) -> str:
    """The text a store writes of ``response`` (disk.py's _encode)."""
    return json.dumps(record(response, run), ensure_ascii=False, separators=(",", ":"))


def test_record_is_the_whole_record_answer_first() -> None:
    r = answer("Hello?", "an answer", system_fingerprint="fp_1", fingerprint="abcd")
    kept = record(r, "run-7")
    assert kept == {**r.to_dict(), "run": "run-7"}  # the same fields as ever
    assert list(kept)[:2] == ["run", "text"]
    assert list(kept).index("key") > list(kept).index("fingerprint")
    assert list(r.to_dict())[0] == "key"  # snapshots keep their line as it always was


# texts and prompts that look like a record's own members, escapes, quotes and non-ASCII
TRICKY = [
    ',"key":"',
    '","key":"{key}","messages":[]}',
    '\\",\\"key\\":\\"{key}\\"',
    '"messages":',
    "line\nbreak \t tab \u2028 \x00 control",
    "Ünïcödé ✓ 漢字 🙂",
    "",
    "}",
    '{"text":"nested"}',
]


@pytest.mark.parametrize("seed", range(5))
def test_cut_record_gives_the_whole_records_response(seed: int) -> None:
    rng = random.Random(seed)
    for i in range(100):
        prompt = f"prompt {seed}-{i} " + rng.choice(TRICKY)
        r = answer(prompt, "", top_logprobs=((" yes", -0.1), ("no", -2.5)) if i % 3 == 0 else None)
        text = "".join(rng.choice(TRICKY).replace("{key}", r.key) for _ in range(rng.randrange(4)))
        r = answer(prompt, text, system_fingerprint=rng.choice([None, "fp_x"]), fingerprint=rng.choice([None, "f0"]))
        raw = raw_of(r, run=rng.choice([None, "run-1"]))
        head = answer_fields(r.key, raw)
        assert head is not None
        assert "messages" not in head and head["key"] == r.key
        cut = Response.answering(r.call, head, source="store")
        whole = Response.from_dict(json.loads(raw), source="store", call=r.call)
        assert cut == whole == r
        assert cut.fingerprint == r.fingerprint
        assert answer_fields(r.key, raw.encode("utf-8")) == head  # the team store's bytes


def test_older_and_broken_records_are_read_whole() -> None:
    r = answer("Hello?", "an answer")
    key_first = json.dumps({**r.to_dict(), "run": "r"}, ensure_ascii=False, separators=(",", ":"))
    assert answer_fields(r.key, key_first) is None  # written before the layout: parsed whole
    other = answer("Other?", "another answer")
    assert answer_fields(other.key, raw_of(r)) is None  # another key's record
    no_request = json.dumps({"text": "t", "key": r.key})
    assert answer_fields(r.key, no_request) is None  # lacks its request fields: the whole record's error
    assert answer_fields(r.key, raw_of(r)[:40] + ',"key":"' + r.key + '","messages":[') is None  # cut short
    assert answer_fields(r.key, b"\xff\xfe" + raw_of(r).encode()) is None  # not UTF-8: the whole record's error


def stored(tmp_path: Path, key: str, raw: str) -> ResponseStore:
    import diskcache

    with diskcache.Cache(str(tmp_path / "responses")) as cache:
        cache.set("response:" + key, raw)
    return ResponseStore(tmp_path)


def test_store_reads_both_layouts_the_same(tmp_path: Path) -> None:
    r = answer("Which layout?", 'an answer with ,"key":" inside')
    new = ResponseStore(tmp_path / "new")
    new.put(r)
    new.close()
    old = stored(tmp_path / "old", r.key, json.dumps(r.to_dict(), ensure_ascii=False, separators=(",", ":")))
    again = ResponseStore(tmp_path / "new")
    for store in (again, old):
        assert store.get(r.key) == r
        assert store.fetch_many([r.key], {r.key: r.call})[r.key] == r
        assert store.get(r.key).call is r.call  # the call built for the key, kept
        store.close()


def test_cut_record_with_a_malformed_answer_is_a_store_error(tmp_path: Path) -> None:
    r = answer("Malformed?", "an answer")
    fields = record(r)
    fields["text"] = 42
    store = stored(tmp_path, r.key, json.dumps(fields, separators=(",", ":")))
    with pytest.raises(StoreError, match="malformed response .*'text' must be a string"):
        store.fetch_many([r.key], {r.key: r.call})
    store.close()


def test_answer_first_record_without_request_fields_is_malformed(tmp_path: Path) -> None:
    r = answer("No request?", "an answer")
    store = stored(tmp_path, r.key, json.dumps({"text": "t", "key": r.key}))
    with pytest.raises(StoreError, match="malformed response"):
        store.get(r.key)
    store.close()


def test_refresh_reads_only_its_runs_cut_records(tmp_path: Path) -> None:
    r = answer("Whose run?", "an answer")
    writer = ResponseStore(tmp_path, mode="refresh", run_id="run-a")
    writer.put(r)
    writer.close()
    for run, expected in (("run-a", r), ("run-b", None)):
        reader = ResponseStore(tmp_path, mode="refresh", run_id=run)
        assert reader.get(r.key) == expected
        reader.close()
