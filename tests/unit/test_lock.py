"""The store's collection lock: one holder at a time, released when its holder exits, and a
waiter that gives up (naming the lock file) when the holder shows no sign of life."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_llmbias.errors import StoreError
from pytest_llmbias.store.lock import CollectionLock

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from filelock import FileLock

    directory, beat_for = Path(sys.argv[1]), float(sys.argv[2])
    lock = FileLock(str(directory / "collect.lock"))
    lock.acquire()
    print("held", flush=True)
    end = time.time() + beat_for
    while time.time() < end:  # a live holder: beats, then releases
        (directory / "collect.lock.alive").touch()
        time.sleep(0.1)
    if beat_for == 0:  # a stuck holder: holds and never beats
        time.sleep(60)
    lock.release()
    """
)


def hold(directory: Path, beat_for: float) -> subprocess.Popen[str]:
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), str(beat_for)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_stuck_holder_makes_the_waiter_fail_naming_the_lock_file(tmp_path: Path) -> None:
    (tmp_path / "collect.lock.alive").touch()  # an old beat, as an earlier run leaves it
    holder = hold(tmp_path, beat_for=0)
    try:
        with pytest.raises(StoreError) as info:
            with CollectionLock(tmp_path, stale_after=1.5):
                pytest.fail("acquired a lock that another process holds")
    finally:
        holder.kill()
        holder.wait()
    message = str(info.value)
    assert str(tmp_path / "collect.lock") in message
    assert "no sign of life" in message and "collection.lock_timeout is 1.5s" in message
    assert "Stop that process" in message


def test_a_live_holder_is_waited_for_and_a_dead_one_releases(tmp_path: Path) -> None:
    holder = hold(tmp_path, beat_for=2.5)  # beats for longer than stale_after, then releases
    try:
        with CollectionLock(tmp_path, stale_after=1.5):
            assert holder.wait(timeout=10) == 0  # it let go (and exited) before we got the lock
    finally:
        holder.kill()
        holder.wait()

    killed = hold(tmp_path, beat_for=0)
    killed.kill()  # the operating system releases a dead holder's lock
    killed.wait()
    with CollectionLock(tmp_path, stale_after=1.5) as lock:
        assert lock.heartbeat.is_file()


def test_beating_keeps_the_heartbeat_while_the_work_runs(tmp_path: Path, monkeypatch) -> None:
    import pytest_llmbias.store.lock as lock_module

    monkeypatch.setattr(lock_module, "BEAT_S", 0.05)
    beats: list[float] = []

    async def work() -> str:
        for _ in range(5):
            beats.append((tmp_path / "collect.lock.alive").stat().st_mtime)
            await asyncio.sleep(0.06)
        return "done"

    with CollectionLock(tmp_path, stale_after=10) as lock:
        assert asyncio.run(lock.beating(work())) == "done"
    assert len(set(beats)) >= 2  # touched again while the work ran
