"""Throughput benchmark for pytest-llmbias's collection path, in one run.

    python benchmarks/collect.py [--calls 1280] [--concurrency 64] [--latency 1.0] [--rounds 2]
                                 [--startup-runs 10] [--profile] [--json out.json]

Measures, against the local OpenAI-compatible server (tests/openai_server.py, run as a separate
process so its CPU is not charged to the client):

1. plugin collection: ``collect()`` over N distinct calls, fresh store (mode "use"), no rate cap,
   no retries: calls/s, ratio to the ideal concurrency/latency, client CPU ms per call;
2. bare litellm: N other distinct calls via ``litellm.acompletion`` under an asyncio.Semaphore,
   same parameters: calls/s, CPU ms per call, and the plugin/bare ratio (target >= 0.95).
   Both paths are warmed first; the two alternate over ``--rounds`` rounds (bare first in odd
   rounds, plugin first in even ones) and the median of each is reported;
3. warm store: a new ResponseStore on the store of step 1, ``collect(offline=True)`` on the same
   planned calls (all store hits): responses/s (target >= 20,000), plus raw ``store.get`` on a
   fresh instance; profiled with cProfile when below target (or with --profile);
4. pytest start-up: ``python -m pytest -q -p no:cacheprovider`` on a trivial test, with the plugin
   vs ``-p no:llmbias``, alternating, medians and ratio (target <= 1.05).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("LITELLM_LOG", "ERROR")
os.environ["BENCH_KEY"] = "sk-bench"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from _server import admin, start_server, stop_server  # noqa: E402
from pytest_llmbias.calls import ModelCall  # noqa: E402
from pytest_llmbias.planning.collector import PlannedCall, collect  # noqa: E402
from pytest_llmbias.clients.litellm_client import ModelClient, import_litellm  # noqa: E402
from pytest_llmbias.clients.ratelimit import RateLimiter  # noqa: E402
from pytest_llmbias.clients.retry import RetryPolicy  # noqa: E402
from pytest_llmbias.settings import GenerationSettings, ModelSpec  # noqa: E402
from pytest_llmbias.store.response_store import ResponseStore  # noqa: E402

MODEL = "openai/bench"
ALIAS = "bench"
GENERATION = GenerationSettings()


# -- the server ------------------------------------------------------------------------------


def server_requests(base: str) -> int:
    return int(admin(base, "/_admin/stats")["requests"])


# -- the two paths ---------------------------------------------------------------------------


def make_client(spec: ModelSpec) -> ModelClient:
    return ModelClient(spec, timeout=60.0, policy=RetryPolicy(retries=0), limiter=RateLimiter(0))


def plan(spec: ModelSpec, tag: str, n: int) -> list[PlannedCall]:
    return [
        PlannedCall(alias=ALIAS, call=ModelCall.build(spec, f"[{tag}] question {i}: is this prompt distinct?", GENERATION))
        for i in range(n)
    ]


async def run_plugin(spec: ModelSpec, tag: str, n: int, concurrency: int, store_dir: Path) -> dict:
    planned = plan(spec, tag, n)
    for p in planned:  # keys are computed during planning in the plugin too, not during collection
        p.call.key
    store = ResponseStore(store_dir, mode="use")
    clients = {ALIAS: make_client(spec)}
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    report = await collect(planned, store=store, client=clients.__getitem__, concurrency=concurrency)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    store.close()
    if report.fetched != n or report.errors:
        raise RuntimeError(f"plugin run {tag}: fetched {report.fetched}/{n}, errors {dict(list(report.errors.items())[:3])}")
    return {"calls": n, "wall_s": wall, "calls_per_s": n / wall, "cpu_ms_per_call": 1000 * cpu / n, "planned": planned}


async def run_bare(base: str, tag: str, n: int, concurrency: int) -> dict:
    litellm = import_litellm()
    semaphore = asyncio.Semaphore(concurrency)
    # the same request body as the plugin sends (GenerationSettings defaults)
    params = {"temperature": GENERATION.temperature, "max_tokens": GENERATION.max_tokens, "seed": GENERATION.seed}

    async def one(i: int) -> None:
        async with semaphore:
            raw = await litellm.acompletion(
                model=MODEL,
                api_base=base,
                api_key=os.environ["BENCH_KEY"],
                messages=[{"role": "user", "content": f"[{tag}] question {i}: is this prompt distinct?"}],
                max_retries=0,
                num_retries=0,
                timeout=60,
                **params,
            )
            if not raw.choices[0].message.content:
                raise RuntimeError("empty completion")

    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"calls": n, "wall_s": wall, "calls_per_s": n / wall, "cpu_ms_per_call": 1000 * cpu / n}


# -- warm store ------------------------------------------------------------------------------


async def warm_store(spec: ModelSpec, planned: list[PlannedCall], store_dir: Path, concurrency: int) -> dict:
    n = len(planned)
    fresh = [PlannedCall(alias=p.alias, call=ModelCall.build(spec, p.call.messages[-1][1], GENERATION)) for p in planned]
    for p in fresh:
        p.call.key
    store = ResponseStore(store_dir, mode="use")  # new instance: nothing in memory, disk opened lazily
    clients = {ALIAS: make_client(spec)}
    gc.collect()
    t0 = time.perf_counter()
    report = await collect(fresh, store=store, client=clients.__getitem__, concurrency=concurrency, offline=True)
    collect_s = time.perf_counter() - t0
    store.close()
    if report.from_store != n:
        raise RuntimeError(f"warm store: {report.from_store}/{n} served from the store, missing {len(report.missing)}")

    keys = [p.call.key for p in fresh]
    store = ResponseStore(store_dir, mode="use")
    gc.collect()
    t0 = time.perf_counter()
    for key in keys:
        if store.get(key) is None:
            raise RuntimeError("raw get: a stored key was not found")
    get_s = time.perf_counter() - t0
    store.close()

    # the same on a store whose disk cache is already open (a miss opens it), i.e. per-get cost only
    store = ResponseStore(store_dir, mode="use")
    t0 = time.perf_counter()
    store.get("0" * 64)
    open_s = time.perf_counter() - t0
    gc.collect()
    t0 = time.perf_counter()
    for key in keys:
        store.get(key)
    open_get_s = time.perf_counter() - t0
    store.close()
    return {
        "store_open_s": open_s,
        "raw_get_opened_per_s": n / open_get_s,
        "responses": n,
        "collect_s": collect_s,
        "collect_per_s": n / collect_s,
        "raw_get_s": get_s,
        "raw_get_per_s": n / get_s,
        "fresh": fresh,
    }


async def profile_warm(fresh: list[PlannedCall], store_dir: Path, concurrency: int, spec: ModelSpec) -> str:
    store = ResponseStore(store_dir, mode="use")
    clients = {ALIAS: make_client(spec)}
    prof = cProfile.Profile()
    prof.enable()
    await collect(fresh, store=store, client=clients.__getitem__, concurrency=concurrency, offline=True)
    prof.disable()
    store.close()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(15)
    return out.getvalue()


# -- pytest start-up -------------------------------------------------------------------------


def pytest_startup(runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="llmbias-startup-") as tmp:
        Path(tmp, "test_ok.py").write_text("def test_ok():\n    pass\n")
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}

        def once(extra: list[str]) -> float:
            t0 = time.perf_counter()
            done = subprocess.run(base + extra, cwd=tmp, env=env, capture_output=True, text=True)
            elapsed = time.perf_counter() - t0
            if done.returncode != 0:
                raise RuntimeError(f"pytest failed ({done.returncode}): {done.stdout[-500:]}{done.stderr[-500:]}")
            return elapsed

        once([])  # warm the file cache and .pyc files
        once(["-p", "no:llmbias"])
        with_plugin, without = [], []
        for i in range(runs):
            pair = [(with_plugin, []), (without, ["-p", "no:llmbias"])]
            for times, extra in pair if i % 2 == 0 else reversed(pair):
                times.append(once(extra))
    med_with, med_without = statistics.median(with_plugin), statistics.median(without)
    return {
        "runs": runs,
        "with_plugin_s": with_plugin,
        "without_plugin_s": without,
        "median_with_s": med_with,
        "median_without_s": med_without,
        "ratio": med_with / med_without,
    }


# -- main ------------------------------------------------------------------------------------


async def bench_network(args: argparse.Namespace, base: str, workdir: Path) -> dict:
    spec = ModelSpec(model=MODEL, alias=ALIAS, api_base=base, api_key_env="BENCH_KEY")
    n, c = args.calls, args.concurrency

    # warm both paths: litellm import, client/session setup, the store's first open
    before = server_requests(base)
    await run_bare(base, "warm-bare", 8, c)
    await run_plugin(spec, "warm-plugin", 8, c, workdir / "store-warm")
    assert server_requests(base) - before == 16

    plugin_runs, bare_runs = [], []
    order = []
    for r in range(args.rounds):
        steps = ["bare", "plugin"] if r % 2 == 0 else ["plugin", "bare"]
        for step in steps:
            before = server_requests(base)
            if step == "bare":
                res = await run_bare(base, f"bare-{r}", n, c)
                bare_runs.append(res)
            else:
                res = await run_plugin(spec, f"plugin-{r}", n, c, workdir / f"store-{r}")
                res["store_dir"] = workdir / f"store-{r}"
                plugin_runs.append(res)
            served = server_requests(base) - before
            if served != n:
                raise RuntimeError(f"{step} round {r}: the server saw {served} requests, expected {n}")
            order.append(step)
            print(f"  round {r + 1} {step:6s}: {res['calls_per_s']:6.1f} calls/s, {res['cpu_ms_per_call']:.2f} ms CPU/call", flush=True)

    first = plugin_runs[0]
    warm = await warm_store(spec, first["planned"], first["store_dir"], c)
    profile = None
    if args.profile or warm["collect_per_s"] < 20_000:
        profile = await profile_warm(warm["fresh"], first["store_dir"], c, spec)

    def strip(run: dict) -> dict:
        return {k: v for k, v in run.items() if k not in ("planned", "store_dir", "fresh")}

    return {
        "order": order,
        "plugin_runs": [strip(r) for r in plugin_runs],
        "bare_runs": [strip(r) for r in bare_runs],
        "plugin_calls_per_s": statistics.median(r["calls_per_s"] for r in plugin_runs),
        "plugin_cpu_ms_per_call": statistics.median(r["cpu_ms_per_call"] for r in plugin_runs),
        "bare_calls_per_s": statistics.median(r["calls_per_s"] for r in bare_runs),
        "bare_cpu_ms_per_call": statistics.median(r["cpu_ms_per_call"] for r in bare_runs),
        "warm_store": strip(warm),
        "profile": profile,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1280)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2, help="alternating bare/plugin rounds (default 2)")
    parser.add_argument("--startup-runs", type=int, default=10, help="pytest start-ups of each kind (default 10)")
    parser.add_argument("--profile", action="store_true", help="always profile the warm-store collect()")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    ideal = args.concurrency / args.latency if args.latency > 0 else float("inf")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {args.calls} calls, concurrency {args.concurrency}, "
          f"server latency {args.latency}s (server in a separate process, sharing the CPUs)"
          + (", PYTHONDONTWRITEBYTECODE set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""), flush=True)
    proc, base = start_server(latency=args.latency)
    try:
        with tempfile.TemporaryDirectory(prefix="llmbias-bench-") as tmp:
            net = asyncio.run(bench_network(args, base, Path(tmp)))
    finally:
        stop_server(proc)
    print("  pytest start-up ...", flush=True)
    startup = pytest_startup(args.startup_runs)

    p, b, w = net["plugin_calls_per_s"], net["bare_calls_per_s"], net["warm_store"]
    results = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "calls": args.calls,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "ideal_calls_per_s": ideal,
        **{k: v for k, v in net.items() if k != "profile"},
        "plugin_ideal_ratio": p / ideal,
        "plugin_bare_ratio": p / b,
        "startup": startup,
        "total_s": time.perf_counter() - started,
    }
    n_rounds = len(net["plugin_runs"])
    how = "median of " + str(n_rounds) if n_rounds > 1 else "one run"
    print()
    if net["profile"]:
        print("warm-store collect() profile (by own time):")
        print(net["profile"])
    print(f"results ({how} each; order {' -> '.join(net['order'])}):")
    print(f"  plugin collection: {p:.1f} calls/s ({p / ideal:.2f} of ideal {ideal:.1f}), "
          f"{net['plugin_cpu_ms_per_call']:.2f} ms CPU/call")
    print(f"  bare litellm:      {b:.1f} calls/s, {net['bare_cpu_ms_per_call']:.2f} ms CPU/call; "
          f"plugin/bare = {p / b:.3f} (target >= 0.95)")
    print(f"  warm store: {w['collect_per_s']:,.0f} responses/s via collect(offline=True) (target >= 20,000); "
          f"raw get {w['raw_get_per_s']:,.0f}/s (both on a fresh store, opening included); "
          f"store open {1000 * w['store_open_s']:.1f} ms, raw get once open {w['raw_get_opened_per_s']:,.0f}/s")
    print(f"  pytest start-up: {startup['median_with_s']:.3f} s with plugin, {startup['median_without_s']:.3f} s "
          f"without; ratio {startup['ratio']:.3f} (target <= 1.05; medians of {startup['runs']})")
    print(f"  total {results['total_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"  written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
