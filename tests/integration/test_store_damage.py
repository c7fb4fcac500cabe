"""A real store damaged between two runs against the local OpenAI-compatible server: the run
completes, only the damaged answers are asked again (the server counts the calls), the warning says
how many, and nothing else is lost (a third run makes no call). A run killed mid-collection loses no
stored answer. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import random
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from pytest_llmbias.store.checkup import check
from tests.integration._data import BASELINES, TARGET, requests_of
from tests.integration.test_collection import kill_mid_collection, output, write_marked_test
from tests.openai_server import OpenAIServer

ALL = 30


@pytest.fixture
def transport() -> str:
    """One transport: the store is what these tests damage, not the network path."""
    return "openai"


def store_of(pytester: pytest.Pytester) -> Path:
    return pytester.path / ".llmbias"


def db_of(pytester: pytest.Pytester) -> Path:
    return store_of(pytester) / "responses" / "cache.db"


def settle(db: Path) -> None:
    """Fold the write-ahead log into the database file (what a damaged file then holds)."""
    con = sqlite3.connect(str(db))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for extra in db.parent.glob("cache.db-*"):
        extra.unlink()


def answer_keys(db: Path) -> list[str]:
    con = sqlite3.connect(str(db))
    keys = [k for (k,) in con.execute("SELECT key FROM Cache WHERE key LIKE 'response:%' ORDER BY key")]
    con.close()
    return keys


def first_run(pytester, server, write_config, run_project) -> None:
    write_config(server)
    write_marked_test(pytester)
    run_project().assert_outcomes(passed=1)
    assert server.count() == ALL
    settle(db_of(pytester))


def asked_again_said(text: str) -> int:
    """The answers the run's warnings say are asked again, all told."""
    rebuilt = sum(
        int(n) for n in re.findall(r"(\d+) answer\(s\) this run needs are not in it and are asked again", text)
    )
    unread = sum(int(n) for n in re.findall(r"held (\d+) answer\(s\) that could not be read", text))
    emptied = ALL if "was emptied or reset" in text else 0
    return rebuilt + unread + emptied


ROWS = {
    "invalid-json": "{not json",
    "wrong-shape": '{"answer": "no text, no request"}',
    "number-for-text": None,  # the record with its text a number
    "binary-bytes": b"\x80\xff\x00\xfe binary",
}


@pytest.mark.parametrize("damage", list(ROWS))
def test_a_damaged_answer_row_is_asked_again_alone(pytester, server, write_config, run_project, damage):
    first_run(pytester, server, write_config, run_project)
    db = db_of(pytester)
    con = sqlite3.connect(str(db))
    damaged = answer_keys(db)[:3]
    for key in damaged:
        if ROWS[damage] is None:
            (text,) = con.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchone()
            value: object = re.sub(r'"text":"[^"]*"', '"text":42', text, count=1)
        elif isinstance(ROWS[damage], bytes):
            value = sqlite3.Binary(ROWS[damage])  # type: ignore[arg-type]
            con.execute("UPDATE Cache SET value = CAST(? AS TEXT) WHERE key = ?", (value, key))
            continue
        else:
            value = ROWS[damage]
        con.execute("UPDATE Cache SET value = ? WHERE key = ?", (value, key))
    con.commit()
    con.close()

    second = run_project()
    second.assert_outcomes(passed=1)
    text = output(second)
    assert server.count() == ALL + 3  # the three damaged answers, and nothing else
    assert "held 3 answer(s) that could not be read, each asked again alone" in text
    assert "question cn-tib-" in text and "rm -rf" not in text
    second.stdout.fnmatch_lines([f"llmbias: {ALL} calls: {ALL - 3} from store, 3 fetched*"])

    third = run_project()  # the answers asked again were written over the damaged rows
    third.assert_outcomes(passed=1)
    assert server.count() == ALL + 3 and "could not be read" not in output(third)


def flip(data: bytes, count: int, seed: int) -> bytes:
    out = bytearray(data)
    for spot in random.Random(seed).sample(range(len(data) // 2), count):
        out[2 * spot] ^= 0xFF
    return bytes(out)


FILES = {
    "truncated": lambda b: b[: len(b) // 2],
    "garbage-header": lambda b: b"\x00garbage header\xff" * 6 + b[102:],
    "random-bytes": lambda b: random.Random(7).randbytes(len(b)),
    "flipped-1": lambda b: flip(b, 1, 1),
    "flipped-64": lambda b: flip(b, 64, 2),
    "flipped-1024": lambda b: flip(b, 1024, 3),
}


@pytest.mark.parametrize("damage", [*FILES, "replaced-by-a-folder", "folder-deleted", "table-dropped"])
def test_a_damaged_database_is_healed_and_the_rest_served(pytester, server, write_config, run_project, damage):
    first_run(pytester, server, write_config, run_project)
    db = db_of(pytester)
    original = db.read_bytes()
    if damage in FILES:
        db.write_bytes(FILES[damage](original))
    elif damage == "replaced-by-a-folder":
        db.unlink()
        db.mkdir()
    elif damage == "folder-deleted":
        shutil.rmtree(db.parent)
    else:
        con = sqlite3.connect(str(db))
        con.execute("DROP TABLE Cache")
        con.commit()
        con.close()
    damaged = check(store_of(pytester)).damaged

    second = run_project()
    second.assert_outcomes(passed=1)  # the run completes
    text = output(second)
    asked = server.count() - ALL
    assert asked == asked_again_said(text), text  # the warning says how many are asked again
    assert "rm -rf" not in text
    if damage in ("truncated", "garbage-header", "random-bytes", "replaced-by-a-folder"):
        assert damaged and "moved aside to" in text and asked > 0
        (aside,) = [p for p in db.parent.glob("cache.db.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
        if damage != "replaced-by-a-folder":
            assert aside.read_bytes() == FILES[damage](original)  # kept for inspection, as found
    if damage in ("folder-deleted", "table-dropped"):
        assert damaged and asked == ALL and "emptied or reset" in text
    if asked:
        assert damaged or "could not be read" in text

    third = run_project()  # nothing else lost: every answer is stored again
    third.assert_outcomes(passed=1)
    assert server.count() == ALL + asked
    assert not check(store_of(pytester)).damaged


def test_a_run_killed_mid_collection_loses_no_stored_answer(pytester, write_config, run_project):
    with OpenAIServer(latency=0.5) as server:
        write_config(server)
        write_marked_test(pytester, name="baselines", which="baselines")
        run_project().assert_outcomes(passed=1)  # the baselines' 20 answers are stored
        assert server.count() == 20
        write_marked_test(pytester, name="all", which="all")
        kill_mid_collection(pytester, server, calls=24, concurrency=3)
        time.sleep(0.6)  # the requests in flight at the kill reach the server
        killed = server.count() - 20
        assert 4 <= killed < 10
        assert not check(store_of(pytester)).damaged  # a kill is no damage

        third = run_project()
        third.assert_outcomes(passed=2)
        assert {a: len(requests_of(server, a)) for a in BASELINES} == {a: 10 for a in BASELINES}  # none asked again
        target = len(requests_of(server, TARGET))
        assert target <= 10 + 3  # at most the calls in flight at the kill are asked twice
        assert "emptied" not in output(third) and "could not be read" not in output(third)
