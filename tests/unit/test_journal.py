"""The store's journal (``store/journal.py``): a collection's answers are on disk as each arrives
and reach the database a batch at a time; a killed writer's answers are recovered by the next
process that opens the store, a live writer's journal is left alone, and a line cut off is left out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import diskcache
import pytest

from pytest_llmbias.store import journal
from pytest_llmbias.store.disk import WRITE_BATCH, DiskCache

pytestmark = pytest.mark.skipif(not journal.available(), reason="no journal without fcntl")


def in_database(directory: Path) -> dict[str, object]:
    """What the database itself holds, read with diskcache alone (no journal looked at)."""
    with diskcache.Cache(str(directory)) as cache:
        return {k: json.loads(cache[k]) for k in cache.iterkeys()}


def journals(directory: Path) -> list[Path]:
    return sorted(directory.glob("journal-*.log"))


def test_answers_are_in_the_journal_at_once_and_in_the_database_a_batch_at_a_time(tmp_path: Path) -> None:
    store = DiskCache(tmp_path)
    for i in range(WRITE_BATCH - 1):
        store.set_later(f"response:{i}", {"i": i})
    (written,) = journals(tmp_path)
    assert len(written.read_text().splitlines()) == WRITE_BATCH - 1
    assert in_database(tmp_path) == {}  # the batch is not full
    assert store.get("response:3") == {"i": 3}  # this process reads what waits
    assert store.get_many(["response:1", "response:2", "nothing"]) == {"response:1": {"i": 1}, "response:2": {"i": 2}}

    store.set_later("response:last", {"i": "last"})  # the batch is full: one transaction
    assert len(in_database(tmp_path)) == WRITE_BATCH
    assert written.read_text() == ""  # emptied once its answers are in the database

    store.set_later("response:after", {"i": "after"})
    store.close()  # the rest is written, the journal deleted
    assert in_database(tmp_path)["response:after"] == {"i": "after"}
    assert journals(tmp_path) == []


def test_a_flush_writes_what_waits(tmp_path: Path) -> None:
    store = DiskCache(tmp_path)
    store.set_later("response:a", {"a": 1})
    store.flush()
    assert in_database(tmp_path) == {"response:a": {"a": 1}}
    store.flush()  # nothing waits: nothing to do
    store.close()


WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from pytest_llmbias.store.disk import DiskCache
    store = DiskCache(Path(sys.argv[1]))
    for i in range(int(sys.argv[2])):
        store.set_later(f"response:{i}", {"i": i})
    if sys.argv[3] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    print("waiting", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


def test_the_answers_of_a_killed_writer_are_recovered_by_the_next_opener(tmp_path: Path) -> None:
    n = WRITE_BATCH + 10  # one batch in the database, ten only in the journal
    done = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), str(n), "kill"], check=False)
    assert done.returncode == -signal.SIGKILL
    assert len(in_database(tmp_path)) == WRITE_BATCH
    assert len(journals(tmp_path)) == 1

    store = DiskCache(tmp_path)
    assert store.get(f"response:{n - 1}") == {"i": n - 1}  # opening the store recovered it
    assert len(in_database(tmp_path)) == n
    assert journals(tmp_path) == []
    store.close()


def test_a_live_writers_journal_is_left_alone(tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), "3", "wait"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "waiting\n"
        store = DiskCache(tmp_path)
        assert store.recover() == 0
        assert store.get("response:0") is None  # not the database's yet, and not this process's
        assert len(journals(tmp_path)) == 1
        store.close()
    finally:
        writer.communicate("\n", timeout=30)  # the writer closes its store: its answers are written
    assert writer.returncode == 0
    assert in_database(tmp_path) == {f"response:{i}": {"i": i} for i in range(3)}
    assert journals(tmp_path) == []


def test_a_line_cut_off_is_left_out_and_the_database_keeps_its_own_answer(tmp_path: Path) -> None:
    with diskcache.Cache(str(tmp_path)) as cache:
        cache.set("response:b", json.dumps({"kept": "database"}))
    dead = tmp_path / "journal-host-1-dead.log"
    dead.write_bytes(
        b'response:a\t{"a":1}\n'
        b'response:b\t{"kept":"journal"}\n'
        b'response:c\t{"c":'  # the writer died in the middle of this line
    )
    store = DiskCache(tmp_path)
    assert store.get("response:a") == {"a": 1}
    assert store.get("response:b") == {"kept": "database"}
    assert store.get("response:c") is None
    assert not dead.exists()
    store.close()


def test_a_read_only_store_recovers_too_and_creates_nothing(tmp_path: Path) -> None:
    existing = DiskCache(tmp_path)
    existing.set("response:old", {"old": 1})
    existing.close()
    (tmp_path / "journal-host-2-dead.log").write_bytes(b'response:a\t{"a":1}\n')
    store = DiskCache(tmp_path, create=False)
    assert store.get("response:a") == {"a": 1}
    store.close()
    assert journals(tmp_path) == []
    missing = tmp_path / "none"
    assert DiskCache(missing, create=False).get("response:a") is None
    assert not missing.exists()


def test_a_journal_line_holds_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="without tabs or newlines"):
        journal.Journal(tmp_path).append("a\tb", "{}")
    with pytest.raises(ValueError, match="one line of JSON"):
        journal.Journal(tmp_path).append("a", "{\n}")
    assert os.listdir(tmp_path) == []


def test_a_batch_is_written_as_diskcache_writes_each_key(tmp_path: Path) -> None:
    """The batch's own statements leave the database as ``Cache.set`` would: diskcache reads each
    value back, counts each key once (an overwrite too), keeps a large value in a file of its own
    and removes the file of a large value overwritten."""
    large = {"text": "x" * 40_000}  # over diskcache's 32 KB: kept in a file
    store = DiskCache(tmp_path)
    store.set("response:kept", {"v": 0})
    store.set("response:large", large)
    with diskcache.Cache(str(tmp_path)) as cache:
        (large_file,) = [f for (f,) in cache._sql("SELECT filename FROM Cache WHERE filename IS NOT NULL")]
    store.set_later("response:kept", {"v": 1})  # overwritten in the batch
    store.set_later("response:large", {"v": "small now"})
    store.set_later("response:new", large)
    store.flush()
    store.close()
    assert in_database(tmp_path) == {
        "response:kept": {"v": 1},
        "response:large": {"v": "small now"},
        "response:new": large,
    }
    with diskcache.Cache(str(tmp_path)) as cache:
        assert len(cache) == 3 and cache.volume() > 40_000
        assert cache.check() == []  # diskcache's own consistency check: no stray file, no missing one
    assert not (tmp_path / large_file).exists()
