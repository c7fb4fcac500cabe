"""``llmbias store check`` reports damage and changes nothing; ``llmbias store repair`` heals it
as a run would, keeping every answer that can be read (store/checkup.py, cli/store.py)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from pytest_llmbias.cli.command import main
from pytest_llmbias.store import ResponseStore
from pytest_llmbias.store.checkup import check, repair_store
from tests.unit.test_store_damage import ANSWERS, N, db_of, served, store_dir  # noqa: F401 - the fixture


def tree(directory: Path) -> dict[str, str]:
    """Every path under ``directory`` with its bytes' digest (a folder: 'dir')."""
    return {
        str(p.relative_to(directory)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
    }


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(args), out), out.getvalue()


def unreadable_row(directory: Path, i: int) -> None:
    con = sqlite3.connect(str(db_of(directory)))
    con.execute("UPDATE Cache SET value = 'not json {' WHERE key = ?", ("response:" + ANSWERS[i].key,))
    con.commit()
    con.close()


def drop_table(directory: Path) -> None:
    con = sqlite3.connect(str(db_of(directory)))
    con.execute("DROP TABLE Cache")
    con.commit()
    con.close()


DAMAGES = {
    "garbage": lambda d: db_of(d).write_bytes(b"garbage" * 600),
    "truncated": lambda d: db_of(d).write_bytes(db_of(d).read_bytes()[: db_of(d).stat().st_size // 2]),
    "dropped": drop_table,
    "deleted": lambda d: shutil.rmtree(d / "responses"),
    "unreadable-row": lambda d: unreadable_row(d, 5),
    "journal-folder": lambda d: (d / "responses" / "journal-h-1-x.log").mkdir(),
    "lock-folder": lambda d: (d / "collect.lock").mkdir(),
}


def test_a_sound_store_checks_clean(store_dir: Path) -> None:  # noqa: F811
    found = check(store_dir)
    assert not found.damaged and found.answers == N
    code, out = run("store", "check", "--store", str(store_dir))
    assert code == 0 and f"{N} answers read, no damage" in out


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_check_reports_damage_and_changes_nothing(store_dir: Path, damage: str) -> None:  # noqa: F811
    DAMAGES[damage](store_dir)
    before = tree(store_dir)
    code, out = run("store", "check", "--store", str(store_dir))
    assert code == 1 and "damage:" in out, out
    assert tree(store_dir) == before  # not a byte changed, nothing made
    assert "rm -rf" not in out
    words = {
        "garbage": "cannot be read",
        "truncated": "cannot be read",
        "dropped": "no Cache table (dropped)",
        "deleted": "is missing (deleted)",
        "unreadable-row": "1 stored answer(s) cannot be read",
        "journal-folder": "journal-h-1-x.log is a folder",
        "lock-folder": "collect.lock is a folder",
    }
    assert words[damage] in out


@pytest.mark.parametrize("damage", ["garbage", "truncated", "dropped", "deleted", "unreadable-row"])
def test_repair_heals_what_a_run_would_and_keeps_what_reads(store_dir: Path, damage: str) -> None:  # noqa: F811
    DAMAGES[damage](store_dir)
    code, out = run("store", "repair", "--store", str(store_dir))
    assert code == 0 and "no damage" in out, out
    assert not check(store_dir).damaged
    got, store = served(store_dir)
    assert store.notices == []  # the run after a repair has nothing to say
    store.close()
    if damage == "unreadable-row":
        assert len(got) == N - 1
        (kept,) = (store_dir / "responses").glob("unreadable-*.jsonl")
        line = json.loads(kept.read_text(encoding="utf-8"))
        assert line["stored"] == "not json {" and line["key"] == "response:" + ANSWERS[5].key
        assert "moved out: 1 answer(s)" in out
    if damage == "truncated":
        assert 0 < len(got) < N and "rebuilt:" in out
        assert list((store_dir / "responses").glob("cache.db.damaged-*"))


def test_repair_of_a_sound_store_changes_no_answer(store_dir: Path) -> None:  # noqa: F811
    code, out = run("store", "repair", "--store", str(store_dir))
    assert code == 0 and "nothing to repair" in out
    got, store = served(store_dir)
    store.close()
    assert len(got) == N


def test_a_folder_where_a_file_belongs_is_left_to_the_user(store_dir: Path) -> None:  # noqa: F811
    DAMAGES["lock-folder"](store_dir)
    done = repair_store(store_dir)
    assert done.after.damaged and "mv " in done.after.problems[0]
    assert (store_dir / "collect.lock").is_dir()


def test_check_of_a_team_store_is_refused_clearly(tmp_path: Path) -> None:
    code, _ = run("store", "check", "--store", "redis://127.0.0.1:1/0")
    assert code == 3


def test_a_store_never_made_is_no_damage(tmp_path: Path) -> None:
    found = check(tmp_path / "none")
    assert not found.damaged and found.answers == 0
    ResponseStore(tmp_path / "none", mode="off").close()
