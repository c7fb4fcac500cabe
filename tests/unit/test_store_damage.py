"""A damaged disk store heals what it can and loses nothing else (store/repair.py, store/disk.py,
store/response_store.py): an unreadable answer is a miss alone, a database that cannot be read is
moved aside, kept, and rebuilt from its readable rows and the journals; an emptied, deleted or
dropped store says so; a folder where a file belongs is an error naming it."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import StoreError
from pytest_llmbias.store import ResponseStore, journal, repair
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.checkup import check
from pytest_llmbias.store.disk import DiskCache

GEN = GenerationSettings(temperature=0.5, max_tokens=100, samples=1, seed=0)
SPEC = ModelSpec(model="openai/m", alias="m", api_base="http://127.0.0.1:9/v1")
N = 400


def answer(i: int) -> Response:
    call = ModelCall.build(SPEC, f"Question {i}?", GEN)
    return Response(call=call, text=f"answer {i} " + "words " * 30, finish_reason="stop", created=1.7e9)


ANSWERS = [answer(i) for i in range(N)]


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A store holding the N answers, closed, its write-ahead files folded into the database."""
    directory = tmp_path / "store"
    store = ResponseStore(directory)
    for r in ANSWERS:
        store.put(r)
    store.close()
    con = sqlite3.connect(str(directory / "responses" / "cache.db"))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for extra in (directory / "responses").glob("cache.db-*"):
        extra.unlink()
    return directory


def db_of(directory: Path) -> Path:
    return directory / "responses" / "cache.db"


def served(directory: Path, **kwargs) -> tuple[dict[str, Response], ResponseStore]:
    store = ResponseStore(directory, **kwargs)
    for r in ANSWERS:
        store.label(r.key, alias="m", domain="dom", question=f"q{r.call.messages[-1][1].split()[1][:-1]}")
    got = store.fetch_many([r.key for r in ANSWERS], {r.key: r.call for r in ANSWERS})
    return got, store


def flip(data: bytes, count: int, seed: int) -> bytes:
    """``data`` with ``count`` bytes, none next to another, inverted."""
    out = bytearray(data)
    spots = random.Random(seed).sample(range(0, len(data) // 2), count)
    for spot in spots:
        out[2 * spot] ^= 0xFF
    return bytes(out)


DAMAGE = {
    "truncated": lambda b: b[: len(b) // 2],
    "garbage-header": lambda b: b"not a database, no" * 4 + b[72:],
    "random-bytes": lambda b: random.Random(1).randbytes(len(b)),
    "flipped-1": lambda b: flip(b, 1, 2),
    "flipped-16": lambda b: flip(b, 16, 3),
    "flipped-1024": lambda b: flip(b, 1024, 4),
}


@pytest.mark.parametrize("damage", [*DAMAGE, "a-folder"])
def test_a_damaged_database_serves_only_true_answers_and_loses_none_it_can_read(store_dir: Path, damage: str) -> None:
    db = db_of(store_dir)
    original = db.read_bytes()
    if damage == "a-folder":
        db.unlink()
        db.mkdir()
        (db / "something").write_text("x")
    else:
        db.write_bytes(DAMAGE[damage](original))

    got, store = served(store_dir)
    notices = store.notices
    store.close()
    by_key = {r.key: r for r in ANSWERS}
    assert all(got[k].text == by_key[k].text for k in got)  # never another answer's text
    asides = sorted((store_dir / "responses").glob("cache.db.damaged-*"))
    if damage in ("truncated", "garbage-header", "random-bytes", "a-folder"):
        (aside,) = asides
        assert "moved aside" in notices[0] and str(aside) in notices[0]
        assert f"{N - len(got)} answer(s) this run needs are not in it and are asked again" in notices[0]
        if damage != "a-folder":
            assert aside.read_bytes() == DAMAGE[damage](original)  # kept as it was found
    if damage == "truncated":
        assert 0 < len(got) < N  # what half a file holds is kept
    if damage in ("flipped-1", "flipped-16"):
        assert len(got) >= N - 16  # each flip costs at most its own answer
    if len(got) < N:
        assert notices, "answers were lost without a word"
    assert all("rm -rf" not in n for n in notices)

    again, later = served(store_dir)  # the next run: healed, nothing moved again
    assert set(again) == set(got) and later.notices == [n for n in later.notices if "could not be read," in n]
    later.close()
    assert sorted((store_dir / "responses").glob("cache.db.damaged-*")) == asides


def test_pages_found_broken_while_read_are_healed_then(store_dir: Path) -> None:
    """The schema reads, so the database opens; a page of the table is broken: the read that meets
    it moves the database aside, rebuilds it from the rows that read, and reads again."""
    db = db_of(store_dir)
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    middle = len(data) // page // 2
    data[middle * page : (middle + 3) * page] = bytes(3 * page)
    db.write_bytes(bytes(data))
    assert repair.inspect(db).damage is None  # not seen at open

    got, store = served(store_dir)
    notices = store.notices
    store.close()
    (aside,) = (store_dir / "responses").glob("cache.db.damaged-*")
    assert N // 2 < len(got) < N and "moved aside" in notices[0] and str(aside) in notices[0]


def test_a_row_that_is_not_text_is_one_miss_and_its_batch_is_served(store_dir: Path) -> None:
    bad = ANSWERS[7]
    con = sqlite3.connect(str(db_of(store_dir)))
    con.execute("UPDATE Cache SET value = CAST(X'80FF00FE' AS TEXT) WHERE key = ?", ("response:" + bad.key,))
    con.commit()
    con.close()
    got, store = served(store_dir)
    (notice,) = store.notices
    store.close()
    assert set(got) == {r.key for r in ANSWERS} - {bad.key}
    assert "1 answer(s) that could not be read" in notice and "question q7" in notice and "not UTF-8" in notice


@pytest.mark.parametrize("record", ['{"text": 5, "key": "K"', "[]", '{"text": 42}', "\ud800"])
def test_each_unreadable_answer_is_a_miss_counted_with_its_question(store_dir: Path, record: str) -> None:
    import diskcache

    bad = ANSWERS[3:6]
    with diskcache.Cache(str(store_dir / "responses")) as cache:
        for r in bad:
            cache.set("response:" + r.key, record.replace("K", r.key).encode("utf-8", "surrogatepass"))
    got, store = served(store_dir)
    (notice,) = store.notices
    assert set(got) == {r.key for r in ANSWERS} - {r.key for r in bad}
    assert "3 answer(s) that could not be read, each asked again alone" in notice
    assert all(f"question q{i}" in notice for i in (3, 4, 5))
    for r in bad:
        store.put(r)  # asked again: written over the unreadable record
    store.close()
    again, later = served(store_dir)
    assert len(again) == N and later.notices == []
    later.close()


def test_a_deleted_folder_and_a_dropped_table_warn_as_an_emptied_file_does(store_dir: Path) -> None:
    con = sqlite3.connect(str(db_of(store_dir)))
    con.execute("DROP TABLE Cache")
    con.commit()
    con.close()
    got, store = served(store_dir)
    (notice,) = store.notices
    store.close()
    assert got == {} and "emptied or reset" in notice and "no Cache table (dropped)" in notice

    shutil.rmtree(store_dir / "responses")
    got, store = served(store_dir)
    (notice,) = store.notices
    store.close()
    assert got == {} and "emptied or reset" in notice and "its folder responses/ is missing" in notice

    shutil.rmtree(store_dir)  # the whole store deleted: a reset, said by nothing
    got, store = served(store_dir)
    assert got == {} and store.notices == []
    store.close()


def test_offline_a_damaged_store_changes_nothing_and_says_so(store_dir: Path) -> None:
    db = db_of(store_dir)
    db.write_bytes(b"junk" * 100)
    got, store = served(store_dir, read_only=True)
    (notice,) = store.notices
    store.close()
    assert got == {} and "offline, nothing is served from it and nothing is changed" in notice
    assert db.read_bytes() == b"junk" * 100 and not list(db.parent.glob("cache.db.damaged-*"))


@pytest.mark.skipif(not journal.available(), reason="no journal without fcntl")
def test_a_rebuilt_database_takes_in_the_journals_of_interrupted_runs(store_dir: Path) -> None:
    folder = store_dir / "responses"
    new = answer(10_000)
    line = f"response:{new.key}\t" + __import__("json").dumps(new.to_dict()) + "\n"
    (folder / "journal-host-1-dead.log").write_text(line, encoding="utf-8")
    db_of(store_dir).write_bytes(b"x" * 4096)
    store = ResponseStore(store_dir)
    assert store.get(new.key).text == new.text
    (notice,) = store.notices
    assert "1 answer(s) from the journals of interrupted runs" in notice
    store.close()


def test_a_folder_where_a_journal_or_the_repair_lock_belongs_is_an_error_naming_it(store_dir: Path) -> None:
    folder = store_dir / "responses"
    stale = folder / "journal-host-9-x.log"
    stale.mkdir()
    with pytest.raises(StoreError, match=f"{stale} is a folder, where the store keeps its journal"):
        ResponseStore(store_dir).get(ANSWERS[0].key)
    stale.rmdir()
    (folder / "repair.lock").mkdir()
    db_of(store_dir).write_bytes(b"x" * 4096)
    with pytest.raises(StoreError, match="repair.lock is a folder, where the store keeps its repair lock"):
        ResponseStore(store_dir).get(ANSWERS[0].key)
    assert db_of(store_dir).read_bytes() == b"x" * 4096  # nothing moved


def test_a_database_rebuilt_by_another_process_is_not_moved_twice(store_dir: Path) -> None:
    db = db_of(store_dir)
    db.write_bytes(b"x" * 4096)
    found = db.stat().st_ino
    first = DiskCache(store_dir / "responses")
    assert first.get("response:" + ANSWERS[0].key) is None and len(first.repairs) == 1
    second = DiskCache(store_dir / "responses")
    second._heal("found damaged before the other rebuilt it", found)  # it waited on the lock meanwhile
    assert second.repairs == [] and len(list(db.parent.glob("cache.db.damaged-*"))) == 1
    first.close()
    second.close()


@pytest.mark.skipif(not journal.available(), reason="no journal without fcntl")
def test_answers_written_while_another_process_rebuilt_the_database_reach_the_new_one(store_dir: Path) -> None:
    writer = DiskCache(store_dir / "responses")
    writer.set_later("response:late", {"late": 1})  # in the journal, the database open
    healer = DiskCache(store_dir / "responses")
    healer._heal("damaged, found by another process", db_of(store_dir).stat().st_ino)
    healer.close()
    writer.flush()  # to the database moved aside, then to the new one
    writer.close()
    fresh = DiskCache(store_dir / "responses")
    assert fresh.get("response:late") == {"late": 1}
    assert fresh.get("response:" + ANSWERS[0].key) is not None  # the rows of the old one kept
    fresh.close()


def test_is_damage_tells_corruption_from_a_busy_database() -> None:
    assert repair.is_damage(sqlite3.DatabaseError("file is not a database"))
    assert not repair.is_damage(sqlite3.OperationalError("database is locked"))
    assert not repair.is_damage(OSError("disk full"))


def test_a_byte_changed_inside_an_answer_is_told_by_its_seal(store_dir: Path) -> None:
    """SQLite keeps no checksum of a page: a changed letter still reads as text and JSON. The
    record's seal tells it, and that answer alone is asked again."""
    bad = ANSWERS[11]
    con = sqlite3.connect(str(db_of(store_dir)))
    con.execute(
        "UPDATE Cache SET value = replace(value, 'answer 11 words', 'answer 11 wordz') WHERE key = ?",
        ("response:" + bad.key,),
    )
    con.commit()
    con.close()
    got, store = served(store_dir)
    (notice,) = store.notices
    store.close()
    assert set(got) == {r.key for r in ANSWERS} - {bad.key}
    assert "question q11" in notice and "do not match the checksum" in notice


def test_answers_stored_without_a_seal_by_earlier_releases_are_read(tmp_path: Path) -> None:
    import diskcache

    from pytest_llmbias.store.disk import encode_value
    from pytest_llmbias.store.records import record
    from pytest_llmbias.store.seal import seal, unseal

    with diskcache.Cache(str(tmp_path / "responses")) as cache:
        for r in ANSWERS[:5]:
            cache.set("response:" + r.key, encode_value(record(r)))
    got, store = served(tmp_path)
    store.close()
    assert len(got) == 5 and store.notices == []
    text = encode_value(record(ANSWERS[0]))
    assert unseal(seal(text)) == text and unseal(text) == text
    assert __import__("json").loads(seal(text))["crc32"] >= 0  # one more member, to a reader that does not look


def test_a_rebuilt_sealed_store_keeps_only_the_answers_it_can_vouch_for(store_dir: Path) -> None:
    """From a damaged file, a row whose seal fails or is gone may have been changed: in a store
    whose answers are sealed it is left out of the rebuilt database, and asked again."""
    con = sqlite3.connect(str(db_of(store_dir)))
    for i, r in enumerate(ANSWERS[:4]):
        old = "replace(value, 'words', 'wordz')" if i % 2 else "replace(value, ',\"crc32\":', ',\"crd32\":')"
        con.execute(f"UPDATE Cache SET value = {old} WHERE key = ?", ("response:" + r.key,))
    con.commit()
    con.close()
    data = bytearray(db_of(store_dir).read_bytes())
    data[:100] = bytes(100)  # the header gone: the store is rebuilt from its rows
    db_of(store_dir).write_bytes(bytes(data))
    got, store = served(store_dir)
    store.close()
    assert set(got) == {r.key for r in ANSWERS[4:]}
    assert "4 of its rows could not be read" in store.notices[0]


_PRISTINE: list[bytes] = []


def pristine_database() -> bytes:
    """The bytes of a closed store's ``cache.db`` holding the first 60 answers (built once)."""
    if not _PRISTINE:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            store = ResponseStore(Path(tmp))
            for r in ANSWERS[:60]:
                store.put(r)
            store.close()
            _PRISTINE.append((Path(tmp) / "responses" / "cache.db").read_bytes())
    return _PRISTINE[0]


@settings(max_examples=40, deadline=None)
@given(
    changes=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), max_size=64),
    keep=st.one_of(st.none(), st.floats(0, 1)),
)
def test_whatever_the_damage_a_run_never_fails_nor_serves_a_changed_answer(changes, keep) -> None:
    """Bytes changed at any places, the file cut at any length: reading the store raises nothing,
    and every answer it serves is the one stored."""
    import tempfile

    data = bytearray(pristine_database())
    for where, by in changes:
        data[int(where * len(data))] ^= by
    if keep is not None:
        del data[int(keep * len(data)) :]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "responses").mkdir()
        (Path(tmp) / "responses" / "cache.db").write_bytes(bytes(data))
        store = ResponseStore(Path(tmp))
        got = store.fetch_many([r.key for r in ANSWERS[:60]], {r.key: r.call for r in ANSWERS[:60]})
        notices = store.notices
        store.close()
        # a loss is said; one a run cannot see (a key changed in the index) the check finds
        assert notices or len(got) == 60 or not data or check(Path(tmp)).damaged
    assert all(got[r.key].text == r.text for r in ANSWERS[:60] if r.key in got)


def test_a_key_changed_in_the_index_is_found_by_the_check_and_repaired(tmp_path: Path) -> None:
    """A run cannot tell an index entry whose key a byte changed (the answer is not found, and is
    asked again); the check reads every index entry, and the repair rebuilds the index."""
    from pytest_llmbias.store.checkup import repair_store

    data = bytearray(pristine_database())
    target = ("response:" + ANSWERS[5].key).encode()
    spots = []
    at = data.find(target)
    while at >= 0:
        spots.append(at)
        at = data.find(target, at + 1)
    index = [at for at in spots if data[at // 4096 * 4096 + (100 if at < 4096 else 0)] == 0x0A]  # an index leaf
    data[index[0] + 20] ^= 1
    (tmp_path / "responses").mkdir()
    (tmp_path / "responses" / "cache.db").write_bytes(bytes(data))
    assert check(tmp_path).damaged
    done = repair_store(tmp_path)
    assert not done.after.damaged and done.rebuilt is not None
    store = ResponseStore(tmp_path)
    got = store.fetch_many([r.key for r in ANSWERS[:60]], {r.key: r.call for r in ANSWERS[:60]})
    store.close()
    assert len(got) == 60 and got[ANSWERS[5].key].text == ANSWERS[5].text


def test_a_side_entry_that_cannot_be_read_is_written_afresh_and_counts_no_answer(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path)
    store.write_meta("fingerprints:m", {"seen": 1})
    store.close()
    con = sqlite3.connect(str(db_of(tmp_path)))
    con.execute("UPDATE Cache SET value = CAST(X'80FF' AS TEXT) WHERE key = 'fingerprints:m'")
    con.commit()
    con.close()
    again = ResponseStore(tmp_path)
    assert again.read_meta("fingerprints:m") is None  # as for a model seen for the first time
    assert again.notices == []
    again.write_meta("fingerprints:m", {"seen": 2})
    assert again.read_meta("fingerprints:m") == {"seen": 2}
    again.close()
