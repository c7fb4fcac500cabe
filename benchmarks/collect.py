"""Throughput benchmark for pytest-llmbias's collection path, in one run.

    python benchmarks/collect.py [--calls 1280] [--concurrency 64] [--latency 1.0] [--rounds 2]
                                 [--startup-runs 10] [--cold-runs 2] [--quota 30] [--profile]
                                 [--json out.json]

Measures, against the local OpenAI-compatible server (tests/openai_server.py, run as a separate
process so its CPU is not charged to the client):

1. the collection path, four ways over N distinct calls each, alternating over ``--rounds``
   rounds, medians reported: ``collect()`` through the plugin's client on the direct transport
   and on the litellm transport (fresh store, mode "use", no rate cap, no retries), bare
   ``litellm.acompletion`` and raw aiohttp under an asyncio.Semaphore: calls/s and client CPU ms
   per call (target for the direct transport: <= 1 ms);
2. warm store: a new ResponseStore on the store of step 1, ``collect(offline=True)`` on the same
   planned calls (all store hits): responses/s (target >= 20,000), plus raw ``store.get`` on a
   fresh instance; profiled with cProfile when below target (or with --profile);
3. pytest start-up: ``python -m pytest -q -p no:cacheprovider`` on a trivial test, with the plugin
   vs ``-p no:llmbias``, alternating, medians and ratio (target <= 1.05);
4. a cold run through pytest: a project whose one test needs N distinct prompts to one model at
   the given concurrency, ``python -m pytest -q`` (no cache provider, no hypothesis plugin) from
   process start to exit, fresh store each
   time (``--cold-runs``): wall time against the network ideal N x latency / concurrency (target
   <= 1.15), when the first request left after the end of pytest's collection (target <= 1 s), and
   how long the process lived after the last answer; then the warm re-run of the same project;
5. a provider's quota: the same cold run against a server that accepts ``--quota`` requests in any
   rolling second (latency 0.2 s) and answers 429 with Retry-After: 1 beyond: failed calls (target
   0) and throughput from the first request to the last answer (target >= 85 % of the quota).
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
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("LITELLM_LOG", "ERROR")
os.environ["BENCH_KEY"] = "sk-bench"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from _server import admin, start_server, stop_server  # noqa: E402

from pytest_llmbias.clients.litellm_client import ModelClient  # noqa: E402
from pytest_llmbias.clients.litellm_import import import_litellm  # noqa: E402
from pytest_llmbias.clients.openai_transport import OpenAITransport  # noqa: E402
from pytest_llmbias.clients.ratelimit import RateLimiter  # noqa: E402
from pytest_llmbias.clients.retry import RetryPolicy  # noqa: E402
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec  # noqa: E402
from pytest_llmbias.planning.collector import PlannedCall, collect  # noqa: E402
from pytest_llmbias.store.calls import ModelCall  # noqa: E402
from pytest_llmbias.store.response_store import ResponseStore  # noqa: E402

MODEL = "openai/bench"
ALIAS = "bench"
GENERATION = GenerationSettings()


# -- the server ------------------------------------------------------------------------------


def server_requests(base: str) -> int:
    return int(admin(base, "/_admin/stats")["requests"])


# -- the two paths ---------------------------------------------------------------------------


def make_client(spec: ModelSpec, direct: OpenAITransport | None = None) -> ModelClient:
    return ModelClient(spec, timeout=60.0, policy=RetryPolicy(retries=0), limiter=RateLimiter(0), direct=direct)


def plan(spec: ModelSpec, tag: str, n: int) -> list[PlannedCall]:
    return [
        PlannedCall(
            alias=ALIAS, call=ModelCall.build(spec, f"[{tag}] question {i}: is this prompt distinct?", GENERATION)
        )
        for i in range(n)
    ]


async def run_plugin(spec: ModelSpec, tag: str, n: int, concurrency: int, store_dir: Path) -> dict:
    planned = plan(spec, tag, n)
    for p in planned:  # keys are computed during planning in the plugin too, not during collection
        _ = p.call.key  # computed now, as the plugin computes it during planning
    store = ResponseStore(store_dir, mode="use")
    direct = OpenAITransport()
    clients = {ALIAS: make_client(spec, direct)}
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    report = await collect(planned, store=store, client=clients.__getitem__, concurrency=concurrency)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await direct.aclose()
    store.close()
    if report.fetched != n or report.errors:
        raise RuntimeError(
            f"plugin run {tag}: fetched {report.fetched}/{n}, errors {dict(list(report.errors.items())[:3])}"
        )
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

    return await timed(one, n)


async def timed(one: Any, n: int) -> dict:
    """Run ``one(i)`` for i < n at once; wall time, calls/s and CPU ms per call of the process."""
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"calls": n, "wall_s": wall, "calls_per_s": n / wall, "cpu_ms_per_call": 1000 * cpu / n}


async def run_raw(base: str, tag: str, n: int, concurrency: int) -> dict:
    """The floor: aiohttp posting the same bodies, reading the JSON answers, nothing else."""
    import aiohttp

    semaphore = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {os.environ['BENCH_KEY']}", "Content-Type": "application/json"}
    params = {"temperature": GENERATION.temperature, "max_tokens": GENERATION.max_tokens, "seed": GENERATION.seed}
    url = base + "/chat/completions"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(i: int) -> None:
            body = {
                "model": MODEL.split("/", 1)[1],
                **params,
                "messages": [{"role": "user", "content": f"[{tag}] question {i}: is this prompt distinct?"}],
            }
            async with semaphore, session.post(url, data=json.dumps(body), headers=headers) as resp:
                data = json.loads(await resp.read())
                if not data["choices"][0]["message"]["content"]:
                    raise RuntimeError("empty completion")

        return await timed(one, n)


# -- warm store ------------------------------------------------------------------------------


async def warm_store(spec: ModelSpec, planned: list[PlannedCall], store_dir: Path, concurrency: int) -> dict:
    n = len(planned)
    fresh = [
        PlannedCall(alias=p.alias, call=ModelCall.build(spec, p.call.messages[-1][1], GENERATION)) for p in planned
    ]
    for p in fresh:
        _ = p.call.key  # computed now, as the plugin computes it during planning
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
        # as this figure has always been taken: the environment's plugins loaded (hypothesis' among
        # them), the cache provider off
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


PATHS = ("direct", "litellm", "bare", "raw")
"""The plugin's client on the direct transport and on litellm; bare litellm; raw aiohttp."""


async def bench_network(args: argparse.Namespace, base: str, workdir: Path) -> dict:
    specs = {
        t: ModelSpec(model=MODEL, alias=ALIAS, api_base=base, api_key_env="BENCH_KEY", transport=t)
        for t in ("openai", "litellm")
    }
    n, c = args.calls, args.concurrency

    async def run(path: str, tag: str, calls: int) -> dict:
        if path == "direct":
            return await run_plugin(specs["openai"], tag, calls, c, workdir / f"store-{tag}")
        if path == "litellm":
            return await run_plugin(specs["litellm"], tag, calls, c, workdir / f"store-{tag}")
        if path == "bare":
            return await run_bare(base, tag, calls, c)
        return await run_raw(base, tag, calls, c)

    # warm every path: litellm import, client/session setup, the store's first open
    before = server_requests(base)
    for path in PATHS:
        await run(path, f"warm-{path}", 8)
    assert server_requests(base) - before == 8 * len(PATHS)

    runs: dict[str, list[dict]] = {path: [] for path in PATHS}
    order = []
    for r in range(args.rounds):
        for path in PATHS if r % 2 == 0 else tuple(reversed(PATHS)):
            before = server_requests(base)
            res = await run(path, f"{path}-{r}", n)
            res["store_dir"] = workdir / f"store-{path}-{r}"
            runs[path].append(res)
            served = server_requests(base) - before
            if served != n:
                raise RuntimeError(f"{path} round {r}: the server saw {served} requests, expected {n}")
            order.append(path)
            print(
                f"  round {r + 1} {path:7s}: {res['calls_per_s']:6.1f} calls/s, {res['cpu_ms_per_call']:.2f} ms "
                "CPU/call",
                flush=True,
            )

    first = runs["direct"][0]
    warm = await warm_store(specs["openai"], first["planned"], first["store_dir"], c)
    profile = None
    if args.profile or warm["collect_per_s"] < 20_000:
        profile = await profile_warm(warm["fresh"], first["store_dir"], c, specs["openai"])

    def strip(run: dict) -> dict:
        return {k: v for k, v in run.items() if k not in ("planned", "store_dir", "fresh")}

    return {
        "order": order,
        "runs": {path: [strip(r) for r in rs] for path, rs in runs.items()},
        "calls_per_s": {path: statistics.median(r["calls_per_s"] for r in rs) for path, rs in runs.items()},
        "cpu_ms_per_call": {path: statistics.median(r["cpu_ms_per_call"] for r in rs) for path, rs in runs.items()},
        "warm_store": strip(warm),
        "profile": profile,
    }


# -- a cold run through pytest -----------------------------------------------------------------

CONFTEST = """
import time
from pathlib import Path


def pytest_collection_finish(session):
    Path("collected_at").write_text(repr(time.time()))
"""

COLLECTED_TEST = """
import pytest


@pytest.mark.bias_responses("bench", models="target")
def test_collected(bias_responses):
    assert len(bias_responses) == {n}
"""


#: pytest as a user project runs it: without the cache provider, and without hypothesis' plugin,
#: a test dependency of this repository that a user's environment need not have (at exit it
#: imports hypothesis to print its summary: 1.5 s on this machine)
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def write_project(project: Path, base: str, n: int, concurrency: int, tag: str) -> None:
    """A project whose one test needs ``n`` distinct prompts to one model."""
    (project / "domains").mkdir(parents=True)
    questions = "".join(
        f"      - {{id: q{i:05d}, text: '[{tag}] question {i}: is this prompt distinct?'}}\n" for i in range(n)
    )
    (project / "domains" / "bench.yaml").write_text(
        "name: bench\ndescription: distinct prompts for the benchmark\nfocus: nothing\n"
        "instruction: Represent the answer\ncategories:\n"
        "  - id: all\n    questions:\n" + questions
    )
    config = {
        "target": {"model": MODEL, "alias": ALIAS, "api_base": base, "api_key_env": "BENCH_KEY"},
        "domains": {"paths": ["domains"]},
        "collection": {"concurrency": concurrency},
    }
    (project / "llmbias.yaml").write_text(json.dumps(config))
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_collected.py").write_text(COLLECTED_TEST.format(n=n))


def run_pytest(project: Path, base: str) -> dict:
    """``python -m pytest -q`` in ``project``: wall time from process start to exit, and the
    server's view of it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing of the project's is cached between runs
    admin(base, "/_admin/reset", post=True)
    started = time.time()
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *QUIET], cwd=project, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    ended = started + wall
    counters = admin(base, "/_admin/counters")
    collected = float((project / "collected_at").read_text()) if (project / "collected_at").exists() else None
    first, last = counters["first_request_at"], counters["last_answer_at"]
    return {
        "wall_s": wall,
        "returncode": done.returncode,
        "tail": (done.stdout + done.stderr)[-600:],
        "requests": counters["requests"],
        "ok": counters["ok"],
        "throttled": counters["throttled"],
        "collection_end_s": None if collected is None else collected - started,
        "first_request_s": None if first is None else first - started,
        "first_request_after_collection_s": None if first is None or collected is None else first - collected,
        "after_last_answer_s": None if last is None else ended - last,
        "answering_s": None if first is None or last is None else last - first,
    }


def pytest_cold(base: str, n: int, concurrency: int, latency: float, runs: int, workdir: Path) -> dict:
    cold = []
    for r in range(runs):
        project = workdir / f"cold-{r}"
        write_project(project, base, n, concurrency, tag=f"cold-{r}")
        res = run_pytest(project, base)
        if res["returncode"] != 0 or res["ok"] != n:
            raise RuntimeError(f"cold run {r}: exit {res['returncode']}, {res['ok']} answers\n{res['tail']}")
        cold.append(res)
        print(
            f"  cold pytest run {r + 1}: {res['wall_s']:.1f} s ({res['wall_s'] / (n * latency / concurrency):.2f} x "
            f"ideal); first request {res['first_request_after_collection_s']:.2f} s after collection; "
            f"{res['after_last_answer_s']:.2f} s after the last answer",
            flush=True,
        )
    warm = run_pytest(workdir / "cold-0", base)
    if warm["returncode"] != 0 or warm["requests"] != 0:
        raise RuntimeError(f"warm re-run: exit {warm['returncode']}, {warm['requests']} requests\n{warm['tail']}")
    print(f"  warm pytest re-run: {warm['wall_s']:.2f} s", flush=True)
    ideal = n * latency / concurrency
    return {
        "ideal_s": ideal,
        "runs": cold,
        "median_wall_s": statistics.median(r["wall_s"] for r in cold),
        "ratio": statistics.median(r["wall_s"] for r in cold) / ideal,
        "warm_wall_s": warm["wall_s"],
    }


def pytest_quota(n: int, concurrency: int, quota: int, workdir: Path) -> dict:
    proc, base = start_server("--rate-limit", str(quota), latency=0.2)
    try:
        project = workdir / "quota"
        write_project(project, base, n, concurrency, tag="quota")
        res = run_pytest(project, base)
    finally:
        stop_server(proc)
    res["failed_calls"] = n - res["ok"]
    res["calls_per_s"] = res["ok"] / res["answering_s"] if res["answering_s"] else 0.0
    res["share_of_quota"] = res["calls_per_s"] / quota
    print(
        f"  quota {quota}/s: {res['ok']}/{n} answered, {res['failed_calls']} failed, {res['requests']} requests "
        f"({res['throttled']} throttled), {res['calls_per_s']:.1f} calls/s = {res['share_of_quota']:.0%} of the quota",
        flush=True,
    )
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1280)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of the four paths (default 2)")
    parser.add_argument("--startup-runs", type=int, default=10, help="pytest start-ups of each kind (default 10)")
    parser.add_argument("--cold-runs", type=int, default=2, help="cold pytest runs (default 2)")
    parser.add_argument(
        "--quota", type=int, default=30, help="the rate-limited server's requests per second (default 30)"
    )
    parser.add_argument(
        "--only",
        choices=("paths", "startup", "cold", "quota"),
        action="append",
        help="run only these parts (repeatable; default all)",
    )
    parser.add_argument("--profile", action="store_true", help="always profile the warm-store collect()")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    parts = set(args.only or ("paths", "startup", "cold", "quota"))

    started = time.perf_counter()
    ideal = args.concurrency / args.latency if args.latency > 0 else float("inf")
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {args.calls} calls, concurrency {args.concurrency}, "
        f"server latency {args.latency}s (server in a separate process, sharing the CPUs)",
        flush=True,
    )
    results: dict = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "calls": args.calls,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "ideal_calls_per_s": ideal,
    }
    net = cold = quota = startup = None
    with tempfile.TemporaryDirectory(prefix="llmbias-bench-") as tmp:
        if parts & {"paths", "cold"}:
            proc, base = start_server(latency=args.latency)
            try:
                if "paths" in parts:
                    net = asyncio.run(bench_network(args, base, Path(tmp)))
                    results.update({k: v for k, v in net.items() if k != "profile"})
                if "cold" in parts:
                    cold = pytest_cold(base, args.calls, args.concurrency, args.latency, args.cold_runs, Path(tmp))
                    results["pytest_cold"] = cold
            finally:
                stop_server(proc)
        if "quota" in parts:
            quota = pytest_quota(args.calls, args.concurrency, args.quota, Path(tmp))
            results["pytest_quota"] = quota
    if "startup" in parts:
        print("  pytest start-up ...", flush=True)
        startup = pytest_startup(args.startup_runs)
        results["startup"] = startup
    results["total_s"] = time.perf_counter() - started

    print()
    if net is not None:
        if net["profile"]:
            print("warm-store collect() profile (by own time):")
            print(net["profile"])
        rates, cpu = net["calls_per_s"], net["cpu_ms_per_call"]
        print(f"results (median of {args.rounds} each; order {' -> '.join(net['order'])}):")
        names = {
            "direct": "plugin, direct transport",
            "litellm": "plugin, litellm transport",
            "bare": "bare litellm.acompletion",
            "raw": "raw aiohttp",
        }
        for path in PATHS:
            print(
                f"  {names[path]:26s} {rates[path]:6.1f} calls/s ({rates[path] / ideal:.2f} of ideal {ideal:.1f}), "
                f"{cpu[path]:.2f} ms CPU/call" + (" (target <= 1 ms)" if path == "direct" else "")
            )
        w = net["warm_store"]
        print(
            f"  warm store: {w['collect_per_s']:,.0f} responses/s via collect(offline=True) (target >= 20,000); "
            f"raw get {w['raw_get_per_s']:,.0f}/s (both on a fresh store, opening included); "
            f"store open {1000 * w['store_open_s']:.1f} ms, raw get once open {w['raw_get_opened_per_s']:,.0f}/s"
        )
    if cold is not None:
        runs = cold["runs"]
        print(
            f"  cold pytest run, {args.calls} calls: median {cold['median_wall_s']:.1f} s = {cold['ratio']:.2f} x the "
            f"network ideal {cold['ideal_s']:.1f} s (target <= 1.15); first request "
            f"{max(r['first_request_after_collection_s'] for r in runs):.2f} s at most after collection (target <= 1 "
            "s); "
            f"process ended {max(r['after_last_answer_s'] for r in runs):.2f} s at most after the last answer; "
            f"warm re-run {cold['warm_wall_s']:.2f} s"
        )
    if quota is not None:
        print(
            f"  quota {args.quota}/s: {quota['failed_calls']} failed calls (target 0), {quota['calls_per_s']:.1f} "
            "calls/s "
            f"= {quota['share_of_quota']:.0%} of the quota (target >= 85 %), {quota['requests']} requests for "
            f"{quota['ok']} answers"
        )
    if startup is not None:
        print(
            f"  pytest start-up: {startup['median_with_s']:.3f} s with plugin, {startup['median_without_s']:.3f} s "
            f"without; ratio {startup['ratio']:.3f} (target <= 1.05; medians of {startup['runs']})"
        )
    print(f"  total {results['total_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"  written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
