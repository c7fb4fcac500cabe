"""The team store end to end: several pytest processes, each in its own project folder (as on its
own CI machine), on one real ``redis-server`` (``tests/redis_server.py``) and the scripted local
server, which counts every request it receives. Nothing stands in for Redis. A machine whose run
alone is checked (a fresh machine, the run after a failure) runs in the test's own process.

Each distinct call is made once across processes; a killed claimant's calls are taken over; a
Redis lost mid-run stops the run without losing an answer, and the next run pays nothing twice; a
shared rpm cap holds across processes; an unreachable or full Redis is a clear error.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.integration._data import BASELINES, KEY_ENV, MODELS, QUIET, TARGET, start_pytest
from tests.openai_server import OpenAIServer
from tests.redis_server import RedisServer, free_port

pytest.importorskip("redis", reason="the team store needs redis-py (pytest-llmbias[redis])")

#: 30 calls: the three models, the 10 Tibet questions
TEST = """
import pytest


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"])
def test_answers(bias_responses):
    assert len(bias_responses) == 30
"""

#: a gate on those answers, rated by the judge
JUDGED = """

@pytest.mark.bias_equivalent("china_sensitive", categories=["tibet"], method="judge")
def test_judged(bias_result):
    pass
"""


@pytest.fixture
def redis_server(tmp_path: Path):
    with RedisServer(tmp_path / "redis") as server:
        yield server


def project(folder: Path, server: OpenAIServer, url: str, **collection) -> Path:
    """A project folder (one CI machine) whose store is the team store at ``url``."""
    folder.mkdir(parents=True, exist_ok=True)

    def model(alias: str) -> dict:
        return {
            "model": f"openai/{MODELS[alias]}",
            "alias": alias,
            "api_base": server.base_url,
            "api_key_env": KEY_ENV,
            "transport": "openai",
        }

    # no fingerprint probes (unless ``fingerprint=True``): these tests count each call the CI
    # machines make between them, and every machine asks the probes live
    config = {
        "target": model(TARGET),
        "baselines": [model(a) for a in BASELINES],
        "store": {"url": url},
        "collection": {"concurrency": 4, "fingerprint": False, **collection},
    }
    (folder / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (folder / "test_team.py").write_text(TEST, encoding="utf-8")
    return folder


def start(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return start_pytest(folder, *args, key="sk-team-test", env=env)


def run_here(pytester: pytest.Pytester, folder: Path, *args: str) -> str:
    """A run in this process, in ``folder``, and what it printed (stdout, then stderr, as a
    subprocess's screen): for a machine whose run alone is what a test checks (a fresh machine, the
    run after a failure), where a subprocess would only add Python's start and the plugin's imports.
    Machines that run side by side, or are killed or stopped, are processes (:func:`start`)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        result = pytester.runpytest_inprocess(*QUIET, "-p", "no:randomly", *args)
    return "\n".join([*result.outlines, *result.errlines])


def start_and_wait(folder: Path, server: OpenAIServer, *, requests: int) -> subprocess.Popen[str]:
    """A run started, once the server has received ``requests`` of its calls."""
    run = start(folder)
    deadline = time.monotonic() + 60
    while server.count() < requests and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return run


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    out, _ = proc.communicate(timeout=timeout)
    return out


def asked(server: OpenAIServer) -> Counter:
    return Counter((r["model"], r["messages"][-1]["content"]) for r in server.requests)


def stored(url: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return sum(1 for _ in client.scan_iter(match="llmbias:response:*"))
    finally:
        client.close()


@pytest.mark.parametrize("machines", [2, 4])
def test_several_machines_on_one_redis_make_each_call_once(tmp_path, pytester, redis_server, machines):
    with OpenAIServer(latency=0.3) as server:
        folders = [project(tmp_path / f"m{i}", server, redis_server.url) for i in range(machines)]
        outputs = [finish(p) for p in [start(f) for f in folders]]
        for out in outputs:
            assert " 1 passed" in out, out[-3000:]
        counts = asked(server)
        assert len(counts) == 30 and set(counts.values()) == {1}, counts.most_common(3)
        fetched = [
            int(line.split(", ")[1].split()[0])
            for out in outputs
            for line in out.splitlines()
            if line.startswith("llmbias: 30 calls:")
        ]
        assert len(fetched) == machines and sum(fetched) == 30, outputs[0][-2000:]
        assert stored(redis_server.url) == 30
        # nothing was written to a local response store: the team store is the store
        assert not any((f / ".llmbias" / "responses").exists() for f in folders)
        # a re-run on a fresh machine makes no call
        again = run_here(pytester, project(tmp_path / "fresh", server, redis_server.url))
        assert "llmbias: 30 calls: 30 from store, 0 fetched" in again and server.count() == 30


def test_a_killed_claimant_s_calls_are_taken_over_and_none_is_paid_twice(tmp_path, pytester, redis_server):
    with OpenAIServer(latency=2.0) as server:
        first = start(project(tmp_path / "a", server, redis_server.url, lock_timeout=3))
        try:
            deadline = time.monotonic() + 60
            while server.count() < 4 and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert first.poll() is None and server.count() >= 4
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                first.kill()
        time.sleep(0.3)
        in_flight_at_kill = server.count() - stored(redis_server.url)
        assert in_flight_at_kill >= 1
        answered_before = {key for key, n in asked(server).items()}
        took_over = time.monotonic()
        # the machine taking over asks all it may at once: the rest at once, the dead claims'
        # calls once they lapse (at least 2 s after the kill: their last renewal was at most
        # 1 s before it), each then answered after the server's 2 s
        out = run_here(pytester, project(tmp_path / "b", server, redis_server.url, lock_timeout=3, concurrency=30))
        assert " 1 passed" in out, out[-3000:]
        assert time.monotonic() - took_over >= 2.5  # it waited for the dead claims to lapse
        counts = asked(server)
        assert len(counts) == 30 and stored(redis_server.url) == 30
        twice = {key for key, n in counts.items() if n > 1}
        # only calls that were in flight when the claimant died were asked again: none it had answered
        assert len(twice) == in_flight_at_kill and twice <= answered_before
        assert max(counts.values()) == 2


def test_redis_lost_mid_run_keeps_every_answer_and_the_next_run_pays_nothing_twice(tmp_path, pytester, redis_server):
    with OpenAIServer(latency=0.5) as server:
        folder = project(tmp_path / "a", server, redis_server.url)
        run = start_and_wait(folder, server, requests=6)
        redis_server.stop()
        out = finish(run)
        assert "the Redis store at redis://127.0.0.1:" in out and "stopped answering" in out, out[-3000:]
        assert "Traceback" not in out
        redis_server.start()
        before = server.count()
        kept = stored(redis_server.url)
        assert kept < before  # some answers arrived after the loss: they are in the spool, not in Redis
        server.latency = 0.0  # the rest at once
        out = run_here(pytester, folder)
        assert " 1 passed" in out, out[-3000:]
        assert f"uploaded {before - kept} answer(s) kept in" in out
        counts = asked(server)
        assert len(counts) == 30 and set(counts.values()) == {1}, "an answer received before the loss was bought again"


def test_redis_restarted_mid_run_loses_nothing_and_pays_nothing_twice(tmp_path, pytester, redis_server):
    with OpenAIServer(latency=0.5) as server:
        folder = project(tmp_path / "a", server, redis_server.url)
        run = start_and_wait(folder, server, requests=6)
        redis_server.restart()  # its append-only file keeps what it held
        out = finish(run)
        # the client reconnects within its retries, or the run stops and keeps the answers in flight
        assert " 1 passed" in out or "stopped answering" in out, out[-3000:]
        assert "Traceback" not in out
        server.latency = 0.0  # the rest at once
        out = run_here(pytester, folder)
        assert " 1 passed" in out, out[-3000:]
        counts = asked(server)
        assert len(counts) == 30 and set(counts.values()) == {1}
        assert stored(redis_server.url) == 30


def test_a_shared_rpm_cap_holds_across_processes(tmp_path, redis_server):
    with OpenAIServer(latency=0.05) as server:
        folders = [project(tmp_path / f"m{i}", server, redis_server.url, rpm=120) for i in range(3)]
        outputs = [finish(p) for p in [start(f) for f in folders]]
        for out in outputs:
            assert " 1 passed" in out, out[-3000:]
        assert server.count() == 30
        # 120 a minute per model is one start every 0.5 s for the three processes together; each
        # alone keeps that pace, so three unshared would send a model's ten calls within about 1.5 s
        for model in MODELS.values():
            times = sorted(r["time"] for r in server.requests if r["model"] == model)
            # at most four slots in two seconds; the server's arrival stamps on a loaded two-core
            # machine (a request sent late beside the next one) allow up to two more
            busiest = max(sum(1 for t in times if s <= t < s + 2.0) for s in times)
            span = times[-1] - times[0]  # nine slots, 4 s and more, less a late first arrival
            assert len(times) == 10 and busiest <= 6 and span >= 3.5, (model, busiest, span)


def test_a_429_seen_by_one_process_backs_off_every_process(tmp_path, redis_server):
    """Machine A's first call to the target is answered 429 with Retry-After 8 s. Machine B, started
    once A has been told, asks other questions of the same models: its baselines' calls go out at
    once, its target's wait for the end of A's 8 s (no threshold of milliseconds: B's own startup
    takes far less than the wait)."""
    from pytest_llmbias.domains import load_domain

    wait = 8.0
    with OpenAIServer(latency=0.05) as server:
        model = MODELS[TARGET]
        server.script(model, {"status": 429, "headers": {"Retry-After": f"{wait:g}"}})  # its first request only
        a = project(tmp_path / "a", server, redis_server.url)
        # (room for all of B's calls at once: its waiting target calls must not hold the others' slots)
        b = project(tmp_path / "b", server, redis_server.url, concurrency=40)
        (b / "test_team.py").write_text(TEST.replace("tibet", "taiwan_status"), encoding="utf-8")
        run_a = start_and_wait(a, server, requests=1)
        deadline = time.monotonic() + 60
        while not any(r["model"] == model for r in server.requests) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # A reads the 429 and tells Redis within milliseconds of it
        run_b = start(b)
        for out in (finish(run_a), finish(run_b)):
            assert " 1 passed" in out, out[-3000:]
        first = next(r["time"] for r in server.requests if r["model"] == model)  # the request answered 429
        taiwan = {q.text for q in load_domain("china_sensitive").select(["taiwan_status"])}
        of_b = [r for r in server.requests if r["messages"][-1]["content"] in taiwan]
        assert len(of_b) == 30
        b_target = [r["time"] - first for r in of_b if r["model"] == model]
        b_baselines = [r["time"] - first for r in of_b if r["model"] != model]
        assert min(b_baselines) < wait - 1  # B was calling the other models meanwhile ...
        assert min(b_target) >= wait - 0.5, sorted(b_target)  # ... and held its target's calls until A's wait was out


def test_an_unreachable_redis_is_one_error_naming_the_url_with_its_password_masked(tmp_path, pytester):
    with OpenAIServer(latency=0.0) as server:
        url = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"
        out = run_here(pytester, project(tmp_path / "a", server, url))
        assert "ERROR: pytest-llmbias: the Redis store at redis://***@127.0.0.1:" in out, out[-3000:]
        assert "cannot be reached" in out and "is the server running" in out
        assert "hunter2-secret" not in out and "Traceback" not in out
        assert server.count() == 0


def test_a_full_redis_is_an_error_naming_maxmemory_and_the_answer_is_kept(tmp_path, pytester, redis_server):
    client = redis_server.client()
    client.set("filler", "x" * 65536)
    client.config_set("maxmemory-policy", "noeviction")
    # below what it holds: reads are served, every write is refused
    client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) - 32768))
    client.close()
    with OpenAIServer(latency=0.0) as server:
        out = run_here(pytester, project(tmp_path / "a", server, redis_server.url))
        assert "is full" in out and "maxmemory" in out, out[-3000:]
        # the first write refused was a call's claim: no call was made, so none is lost or unpaid for
        assert server.count() == 0 and "Traceback" not in out


def test_a_full_redis_refusing_an_answer_already_paid_for_keeps_it_and_the_next_run_uploads_it(
    tmp_path, pytester, redis_server
):
    """The calls are claimed and in flight when Redis fills up: their answers arrive, Redis refuses
    to store them, and they go to the spool; the next run uploads them and pays for none again."""
    client = redis_server.client()
    client.config_set("maxmemory-policy", "noeviction")
    client.set("filler", "x" * 65536)
    try:
        with OpenAIServer(latency=2.0) as server:
            folder = project(tmp_path / "a", server, redis_server.url)
            run = start_and_wait(folder, server, requests=4)  # concurrency 4: four claimed calls in flight
            # below what it holds: every write refused from now on
            client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) - 32768))
            out = finish(run)
            assert "is full" in out and "maxmemory" in out, out[-3000:]
            assert "Traceback" not in out
            paid, kept = server.count(), stored(redis_server.url)
            assert paid - kept >= 1, (paid, kept)  # answers Redis refused: in the spool
            client.config_set("maxmemory", "0")
            server.latency = 0.0  # the rest at once
            out = run_here(pytester, folder)
            assert " 1 passed" in out, out[-3000:]
            assert f"uploaded {paid - kept} answer(s) kept in" in out, out[-3000:]
            counts = asked(server)
            assert len(counts) == 30 and set(counts.values()) == {1}, (
                "an answer refused by a full Redis was bought again"
            )
    finally:
        client.close()


def test_a_password_from_store_password_env_opens_the_store_and_is_shown_and_stored_nowhere(
    tmp_path, pytester, capsys, monkeypatch
):
    from pytest_llmbias.cli.command import main

    secret = "Team-Redis-Pw-7f3c9e41"
    with (
        RedisServer(tmp_path / "redis", extra={"requirepass": secret}) as redis_server,
        OpenAIServer(latency=0.0, judges=("judge-model",)) as server,
    ):
        folder = project(tmp_path / "a", server, redis_server.url)
        config = json.loads((folder / "llmbias.yaml").read_text())
        config["store"]["password_env"] = "TEAM_REDIS_PASSWORD"
        config["judge"] = {**config["target"], "model": "openai/judge-model", "alias": "judge"}
        (folder / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
        (folder / "test_team.py").write_text(TEST + JUDGED, encoding="utf-8")  # a gate: the run writes its JSON report
        monkeypatch.setenv("TEAM_REDIS_PASSWORD", secret)
        out = run_here(
            pytester,
            folder,
            "-l",
            "--tb=long",
            "-rA",
            "--log-cli-level=DEBUG",
            "--llmbias-json=report.json",
            "--llmbias-export=snapshot.jsonl",
        )
        # the answers' test passes; the gate's verdict (on scripted answers) is no matter here
        assert "PASSED test_team.py::test_answers" in out and "JSON document is written" in out, out[-3000:]
        monkeypatch.chdir(folder)
        assert main(["store", "export", "exported.jsonl"]) == 0 and main(["store", "stats"]) == 0
        out += "".join(capsys.readouterr())
        exported = (folder / "exported.jsonl").read_text().splitlines()
        assert len(exported) > 30 and f"{len(exported)} responses" in out  # the answers and the judge's ratings
        import redis

        client = redis.Redis.from_url(redis_server.url, password=secret)
        try:
            records = {key: client.dump(key) for key in client.scan_iter()}
        finally:
            client.close()
    assert sum(1 for key in records if key.startswith(b"llmbias:response:")) == len(exported)
    assert secret not in out
    assert not [key for key, value in records.items() if secret.encode() in key + value]
    files = [f for f in folder.rglob("*") if f.is_file()]
    assert {"report.json", "snapshot.jsonl", "exported.jsonl"} <= {f.name for f in files}
    assert not [f for f in files if secret.encode() in f.read_bytes()]


def test_the_store_commands_work_on_the_team_store_and_migrate_both_ways(
    tmp_path, pytester, redis_server, capsys, monkeypatch
):
    from pytest_llmbias.cli.command import main

    with OpenAIServer(latency=0.0) as server:
        folder = project(tmp_path / "a", server, redis_server.url)
        assert " 1 passed" in run_here(pytester, folder)
    monkeypatch.chdir(folder)  # the project's llmbias.yaml names the team store
    assert main(["store", "stats"]) == 0
    out = capsys.readouterr().out
    assert "30 responses" in out and f"in {redis_server.url}" in out, out
    assert main(["store", "verify"]) == 0 and "30 checked, 0 problem(s)" in capsys.readouterr().out
    assert main(["store", "export", str(tmp_path / "all.jsonl")]) == 0
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 30
    # into a folder, then from it into another Redis database: the same records
    assert main(["store", "migrate", "--to", str(tmp_path / "disk")]) == 0
    assert "30 responses copied" in capsys.readouterr().out
    other = redis_server.url[:-1] + "1"
    assert main(["store", "migrate", "--store", str(tmp_path / "disk"), "--to", other]) == 0
    assert "30 responses copied" in capsys.readouterr().out
    assert main(["store", "migrate", "--store", str(tmp_path / "disk"), "--to", other]) == 0
    assert "0 responses copied" in (again := capsys.readouterr().out) and "(30 already there)" in again
    client = redis_server.client()
    try:
        db0 = {k: client.get(k) for k in client.scan_iter(match="llmbias:response:*")}
    finally:
        client.close()
    import redis

    one = redis.Redis.from_url(other)
    try:
        assert {k: one.get(k) for k in one.scan_iter(match="llmbias:response:*")} == db0
    finally:
        one.close()
    # a snapshot imported into the team store; clearing it
    assert main(["store", "import", "--store", other, str(tmp_path / "all.jsonl")]) == 0
    assert "0 imported, 30 already stored" in capsys.readouterr().out
    assert main(["store", "clear", "--store", other, "--yes"]) == 0
    capsys.readouterr()
    assert main(["store", "stats", "--store", other]) == 0 and "0 responses" in capsys.readouterr().out
