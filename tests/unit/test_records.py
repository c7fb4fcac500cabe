"""The stores' record layout: the answer's fields first, parsed alone when the call is known
(pytest_llmbias.store.records), and read as the whole record always was."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.store import ResponseStore, records
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.disk import encode_value
from pytest_llmbias.store.records import answer_fields, record, record_text

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
        if i % 4 == 0:  # a judge's score position, kept with its alternatives
            r = answer(prompt, text, number_logprobs=(("7", (("7", -0.2), ("8", -1.7))), (",", ())))
        raw = raw_of(r, run=rng.choice([None, "run-1"]))
        head = answer_fields(r.key, raw)
        assert head is not None
        assert "messages" not in head and head["key"] == r.key
        cut = Response.answering(r.call, head, source="store")
        whole = Response.from_dict(json.loads(raw), source="store", call=r.call)
        assert cut == whole == r
        assert cut.fingerprint == r.fingerprint
        assert answer_fields(r.key, raw.encode("utf-8")) == head  # the team store's bytes


STRINGS = st.text(alphabet=st.characters(codec="utf-8"), max_size=30) | st.sampled_from(TRICKY)
SCALARS = st.none() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=True, allow_infinity=True) | STRINGS
PARAMS = st.dictionaries(STRINGS, SCALARS | st.booleans() | st.lists(SCALARS, max_size=3), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(st.tuples(st.sampled_from(["system", "user", "assistant"]), STRINGS), min_size=1, max_size=3),
    params=PARAMS,
    text=STRINGS,
    counts=st.tuples(SCALARS | st.booleans(), SCALARS | st.booleans()),
    times=st.tuples(SCALARS, SCALARS),
    finish=st.none() | STRINGS,
    top=st.none() | st.lists(st.tuples(STRINGS, st.floats(-50, 0)), max_size=3),
    number=st.none()
    | st.lists(st.tuples(STRINGS, st.lists(st.tuples(STRINGS, st.floats(-50, 0)), max_size=2)), max_size=3),
    marks=st.tuples(st.none() | STRINGS, st.none() | STRINGS),
    run=st.none() | STRINGS,
    sample=st.integers(0, 3),
    version=st.none() | STRINGS,
    api_base=st.none() | STRINGS,
    request=st.none() | st.dictionaries(STRINGS, SCALARS, max_size=3),
)
def test_record_text_is_the_encoders_text_of_the_record(
    messages, params, text, counts, times, finish, top, number, marks, run, sample, version, api_base, request
) -> None:
    """The stores write record_text: character for character what the encoder writes of the
    record, whatever the values (those the shortcut does not write go through the encoder)."""
    call = ModelCall(
        model="openai/m",
        api_base=api_base,
        messages=tuple(messages),
        params=params,
        sample=sample,
        version=version,
        request=request,
    )
    response = Response(
        call=call,
        text=text,
        finish_reason=finish,
        prompt_tokens=counts[0],
        completion_tokens=counts[1],
        latency_s=times[0],
        created=times[1],
        top_logprobs=None if top is None else tuple(top),
        system_fingerprint=marks[0],
        fingerprint=marks[1],
        number_logprobs=None if number is None else tuple((t, tuple(a)) for t, a in number),
    )
    try:
        expected = encode_value(record(response, run))
    except (TypeError, ValueError) as exc:  # no JSON value: the same error either way
        with pytest.raises(type(exc)):
            record_text(response, run)
        return
    assert record_text(response, run) == expected
    assert record_text(response, run) == expected  # the call's parts, kept, give the same


def test_record_text_of_the_calls_of_one_model_shares_their_parts() -> None:
    """Two samples and two prompts of one model: each its own record, their parts kept apart."""
    responses = [answer(f"prompt {i}", f"text {i}") for i in range(3)]
    responses += [
        Response(call=ModelCall.build(SPEC, "prompt 0", GEN, sample=s), text="t", created=1.0) for s in (1, 2)
    ]
    for r in responses:
        assert records._call_parts(r.call) is not None  # written by the shortcut, not the encoder
        assert record_text(r, "run-1") == encode_value(record(r, "run-1"))
        assert json.loads(record_text(r)) == record(r)


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


def test_cut_record_with_a_malformed_answer_is_unreadable(tmp_path: Path) -> None:
    r = answer("Malformed?", "an answer")
    fields = record(r)
    fields["text"] = 42
    store = stored(tmp_path, r.key, json.dumps(fields, separators=(",", ":")))
    assert store.fetch_many([r.key], {r.key: r.call}) == {}  # a miss: asked again
    (notice,) = store.notices
    assert "1 answer(s) that could not be read" in notice and "'text' must be a string" in notice
    store.close()


def test_answer_first_record_without_request_fields_is_unreadable(tmp_path: Path) -> None:
    r = answer("No request?", "an answer")
    store = stored(tmp_path, r.key, json.dumps({"text": "t", "key": r.key}))
    assert store.get(r.key) is None
    assert "could not be read" in store.notices[0]
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
