"""The team store on Redis: several CI machines, each call paid once, one provider quota.

    python benchmarks/team_store.py [--calls 1000] [--latency 1.0] [--machines 4] [--quota 30]
                                    [--json out.json]

Starts Debian's ``redis-server`` (on a free port, in a temporary folder) and the local
OpenAI-compatible server (``tests/openai_server.py``, its own process, ``--latency`` seconds a
call), and runs pytest projects that each need the same ``--calls`` distinct prompts to one model,
each project in its own folder (one per machine):

1. **shared**: ``--machines`` processes at once on one Redis, no rate cap: calls the server received
   (target: exactly ``--calls``), and wall time from the first start to the last exit against one
   process alone on a fresh Redis, whole and for the collection (the ``in X s`` of the calls line,
   the longest of the processes': pytest's start-up, four at once on a small machine, is the rest);
2. **quota**: the same processes with ``rpm = 60 × --quota`` (the cap shared through Redis): the
   achieved rate from the first request to the last, and the busiest rolling second and 5 seconds,
   against the cap (target: >= 85 % of it, never above it by more than 5 %), counted twice: at
   the *grants*, the times on the Redis server's clock at which the shared schedule granted each
   start (each process logs them, ``pytest_llmbias.clients.shared_limits`` at DEBUG, to a file
   of its folder), which is what the limiter controls; and at the *arrivals* the server
   timestamps, where a process's event loop starved of CPU on a small machine sends a few granted
   requests late and together;
3. **warm overhead**: the stored answers read back, one store read per call as a warm re-run
   makes them, from the Redis store and from a disk store holding the same records (``llmbias
   store migrate``): microseconds a call, and the difference.

Last, each target with "met" or "NOT met".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._server import admin, start_server, stop_server  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

MODEL = "openai/bench-model"
TEST = """
import pytest


@pytest.mark.bias_responses("bench", models="target")
def test_collected(bias_responses):
    assert len(bias_responses) == {n}
"""
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:randomly")
CALLS_LINE = re.compile(
    r"llmbias: (\d+) calls: (\d+) from store, (\d+) fetched, (\d+) failed, (\d+) missing, in ([\d.]+)s"
)


def write_project(folder: Path, base: str, n: int, *, url: str | None, rpm: int = 0) -> Path:
    (folder / "domains").mkdir(parents=True)
    questions = "".join(f"      - {{id: q{i:05d}, text: 'question {i}: is this prompt distinct?'}}\n" for i in range(n))
    (folder / "domains" / "bench.yaml").write_text(
        "name: bench\ndescription: distinct prompts for the benchmark\nfocus: nothing\n"
        "instruction: Represent the answer\ncategories:\n  - id: all\n    questions:\n" + questions
    )
    config = {
        "target": {
            "model": MODEL,
            "alias": "target",
            "api_base": base,
            "api_key_env": "BENCH_KEY",
            "transport": "openai",
        },
        "domains": {"paths": ["domains"]},
        "collection": {"concurrency": 32, "rpm": rpm},
    }
    if url:
        config["store"] = {"url": url}
    (folder / "llmbias.yaml").write_text(json.dumps(config))
    (folder / "test_collected.py").write_text(TEST.format(n=n))
    return folder


GRANTS_LOG = "grants.log"
GRANTED = re.compile(r"start granted at (\d+) us")
#: each process's grants of the shared schedule, in its folder (see the module's docstring)
LOG_GRANTS = ("--log-file", GRANTS_LOG, "--log-file-level", "DEBUG", "--log-file-format", "%(message)s")


def launch(folder: Path, *options: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LLMBIAS_"))}
    env.update(BENCH_KEY="sk-bench", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, *options],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def run_all(folders: list[Path], *options: str) -> tuple[float, list[str]]:
    """Start every project at once; wall time to the last exit, and each one's output."""
    t0 = time.perf_counter()
    procs = [launch(f, *options) for f in folders]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    for out in outputs:
        if " 1 passed" not in out:
            raise SystemExit("a run failed:\n" + out[-3000:])
    return time.perf_counter() - t0, outputs


def arrival_times(base: str) -> list[float]:
    return sorted(admin(base, "/_admin/stats?times=1")["times"])


def grant_times(folders: list[Path]) -> list[float]:
    """Every start the shared schedule granted to the processes of ``folders``, in seconds on the
    Redis server's clock."""
    return sorted(
        int(m.group(1)) / 1e6 for f in folders for m in GRANTED.finditer((f / GRANTS_LOG).read_text(errors="replace"))
    )


def busiest(times: list[float], window: float) -> int:
    """The most of ``times`` (sorted) in any ``window`` seconds, [t, t + window)."""
    most, first = 0, 0
    for last, t in enumerate(times):
        while times[first] <= t - window:
            first += 1
        most = max(most, last - first + 1)
    return most


def rate_of(times: list[float]) -> float:
    span = times[-1] - times[0]
    return (len(times) - 1) / span if span > 0 else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--machines", type=int, default=4)
    parser.add_argument("--quota", type=float, default=30.0, help="the shared cap, calls a second")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    n, m = args.calls, args.machines
    work = Path(tempfile.mkdtemp(prefix="llmbias-team-"))
    server, base = start_server(latency=args.latency)
    out: dict = {"calls": n, "machines": m, "latency_s": args.latency, "quota_per_s": args.quota}
    try:
        # 1. one process alone, then the machines together, each on a fresh Redis database
        with RedisServer(work / "redis") as redis:
            admin(base, "/_admin/reset", post=True)
            alone, (alone_out,) = run_all([write_project(work / "alone", base, n, url=redis.url[:-1] + "1")])
            alone_phase = float(CALLS_LINE.search(alone_out).group(6))  # type: ignore[union-attr]
            alone_calls = admin(base, "/_admin/stats")["requests"]
            admin(base, "/_admin/reset", post=True)
            together, outputs = run_all([write_project(work / f"m{i}", base, n, url=redis.url) for i in range(m)])
            made = admin(base, "/_admin/stats")["requests"]
            fetched = [int(CALLS_LINE.search(o).group(3)) for o in outputs]  # type: ignore[union-attr]
            phase = max(float(CALLS_LINE.search(o).group(6)) for o in outputs)  # type: ignore[union-attr]
            out["shared"] = {
                "alone_s": round(alone, 2),
                "alone_calls": alone_calls,
                "together_s": round(together, 2),
                "calls_made": made,
                "fetched_by_each": fetched,
                "speedup": round(alone / together, 2),
                "alone_collection_s": alone_phase,
                "together_collection_s": phase,
                "collection_speedup": round(alone_phase / phase, 2),
            }
            print(
                f"shared: {m} machines made {made} calls for {n} distinct ({fetched} each) in {together:.1f} s "
                f"(collection {phase:.1f} s); one alone {alone:.1f} s (collection {alone_phase:.1f} s): "
                f"{alone / together:.2f}x whole, {alone_phase / phase:.2f}x collection",
                flush=True,
            )

            # 2. the shared quota, on a fresh database
            admin(base, "/_admin/reset", post=True)
            rpm = int(round(60 * args.quota))
            url2 = redis.url[:-1] + "2"
            quota_folders = [write_project(work / f"q{i}", base, n, url=url2, rpm=rpm) for i in range(m)]
            run_all(quota_folders, *LOG_GRANTS)
            quota_made = admin(base, "/_admin/stats")["requests"]
            figures = {}
            for name, times in (("grants", grant_times(quota_folders)), ("arrivals", arrival_times(base))):
                b1, b5 = busiest(times, 1.0), busiest(times, 5.0)
                figures[name] = {
                    "count": len(times),
                    "span_s": round(times[-1] - times[0], 2),
                    "rate_per_s": round(rate_of(times), 2),
                    "share_of_cap": round(rate_of(times) / args.quota, 3),
                    "busiest_1s": b1,
                    "busiest_1s_share": round(b1 / args.quota, 3),
                    "busiest_5s": b5,
                    "busiest_5s_share": round(b5 / (5 * args.quota), 3),
                }
            out["quota"] = {"rpm": rpm, "calls_made": quota_made, **figures}
            for name, f in figures.items():
                print(
                    f"quota ({name}): {f['count']} at {f['rate_per_s']:.1f}/s against a shared cap of {args.quota:g} "
                    f"({f['share_of_cap']:.1%}); busiest second {f['busiest_1s']} ({f['busiest_1s_share']:.1%} of the "
                    f"cap), busiest 5 s {f['busiest_5s']} ({f['busiest_5s_share']:.1%})",
                    flush=True,
                )

            # 3. a warm re-run: the team store against a disk store with the same answers
            from pytest_llmbias.cli.command import main as cli

            disk = write_project(work / "disk", base, n, url=None)
            cli(["store", "migrate", "--store", redis.url, "--to", str(disk / ".llmbias")])
            from pytest_llmbias.store.locations import StoreLocation
            from pytest_llmbias.store.response_store import ResponseStore

            keys = [k for k, _ in StoreLocation(disk / ".llmbias").entries()]
            warm = {}
            for name, make in (
                ("redis", lambda: ResponseStore(work / "m0" / ".llmbias", url=redis.url)),
                ("disk", lambda: ResponseStore(disk / ".llmbias")),
            ):
                runs = []
                for _ in range(5):
                    store = make()  # a fresh instance: nothing in its memory
                    store.get(keys[0])  # opened (connected) before the clock starts
                    t0 = time.perf_counter()
                    assert all(store.get(k) is not None for k in keys)
                    runs.append((time.perf_counter() - t0) / len(keys) * 1e6)
                    store.close()
                warm[name] = sorted(runs)[2]
            per_call_us = warm["redis"] - warm["disk"]
            out["warm"] = {
                "redis_us_per_call": round(warm["redis"], 1),
                "disk_us_per_call": round(warm["disk"], 1),
                "overhead_us_per_call": round(per_call_us, 1),
            }
            print(
                f"warm read of {len(keys)} stored calls: {warm['redis']:.0f} us a call from Redis, {warm['disk']:.0f} "
                "us "
                f"from disk ({per_call_us:+.0f} us a call)",
                flush=True,
            )
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    grants = out["quota"]["grants"]
    targets = [
        (f"calls made == distinct calls ({m} machines, no cap)", out["shared"]["calls_made"] == n),
        (f"calls made == distinct calls ({m} machines, shared cap)", out["quota"]["calls_made"] == n),
        ("achieved rate >= 85 % of the cap (grants)", grants["share_of_cap"] >= 0.85),
        ("achieved rate >= 85 % of the cap (arrivals)", out["quota"]["arrivals"]["share_of_cap"] >= 0.85),
        ("busiest second of grants <= 105 % of the cap", grants["busiest_1s_share"] <= 1.05),
        ("busiest 5 s of grants <= 105 % of the cap", grants["busiest_5s_share"] <= 1.05),
    ]
    out["targets"] = {name: ok for name, ok in targets}
    for name, ok in targets:
        print(f"target: {name}: {'met' if ok else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
