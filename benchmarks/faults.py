"""Fault injection: collection against a server that fails 20 % of requests, and kill -9 / resume.

    HF_HUB_OFFLINE=1 python benchmarks/faults.py [--calls 2000] [--concurrency 32] [--latency 0.2]
                                                 [--fault-rate 0.2] [--client-timeout 2] [--fault-timeout 5]
                                                 [--retries 8] [--repeats 5] [--seed S] [--json out.json]

Against the local OpenAI-compatible server (tests/openai_server.py, in its own process), which
answers after ``--latency`` seconds and fails ``--fault-rate`` of the requests, each fault drawn
uniformly from a 429, a 500 and a timeout (no answer for ``--fault-timeout`` seconds, longer than
the client's ``--client-timeout``):

1. fault run: ``collect()`` of N distinct calls on a fresh store at concurrency C, with the
   plugin's client (ModelClient, RetryPolicy(retries=R), no rate cap). Reports the share of the N
   calls with a stored response (target 100 %), requests made at the server per stored response,
   duplicates (calls answered 200 more than once by the server, or written to the store more than
   once; target 0) and the wall time;
2. kill test, ``--repeats`` times: the same collection in a child process on a fresh store,
   ``kill -9`` after a random delay (20-80 % of the fault run's wall time, from the start of
   collection); then the stored responses are counted (a new ResponseStore, ``get`` of each key),
   the server's counters reset, and the collection re-run to completion (in this process, faults
   still on). Target: the re-run's successful answers at the server are exactly the missing calls
   (same number, same prompts, each once), and afterwards all N are stored.

Exits 1 if a target is missed. The retries default to 8, not the plugin's 5: with 20 % independent
faults a call fails all 1 + 5 attempts with p = 0.2**6 = 6.4e-5, i.e. about one run in eight of
2,000 calls would leave one call uncollected by chance (a reported error, not a bug); with 8,
p = 0.2**9 = 5e-7. ``--retries 5`` measures the plugin's default.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("LITELLM_LOG", "ERROR")
os.environ["BENCH_KEY"] = "sk-bench"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from _server import admin, start_server, stop_server  # noqa: E402

from pytest_llmbias.clients.litellm_client import ModelClient  # noqa: E402
from pytest_llmbias.clients.litellm_import import import_litellm  # noqa: E402
from pytest_llmbias.clients.ratelimit import RateLimiter  # noqa: E402
from pytest_llmbias.clients.retry import RetryPolicy  # noqa: E402
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec  # noqa: E402
from pytest_llmbias.errors import StoreError  # noqa: E402
from pytest_llmbias.planning.collector import CollectionReport, PlannedCall, collect  # noqa: E402
from pytest_llmbias.store.calls import ModelCall  # noqa: E402
from pytest_llmbias.store.response_store import ResponseStore  # noqa: E402

MODEL = "openai/bench"
ALIAS = "bench"
GENERATION = GenerationSettings()


# -- the server ------------------------------------------------------------------------------


def counters(base: str, *, prompts: bool = False) -> dict:
    return admin(base, "/_admin/counters" + ("?prompts=1" if prompts else ""))


def settle(base: str, timeout: float = 30.0) -> dict:
    """Wait until the server has no request in flight (e.g. of a killed client); its counters."""
    deadline = time.monotonic() + timeout
    while True:
        now = counters(base)
        if now["in_flight"] == 0 or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def reset(base: str) -> None:
    admin(base, "/_admin/reset", post=True)


# -- the collection ----------------------------------------------------------------------------


def spec_for(base: str) -> ModelSpec:
    return ModelSpec(model=MODEL, alias=ALIAS, api_base=base, api_key_env="BENCH_KEY")


def prompt(i: int) -> str:
    return f"fault-bench question {i}: is this prompt distinct?"


def plan(spec: ModelSpec, n: int) -> list[PlannedCall]:
    return [PlannedCall(alias=ALIAS, call=ModelCall.build(spec, prompt(i), GENERATION)) for i in range(n)]


def make_client(spec: ModelSpec, args: argparse.Namespace) -> ModelClient:
    return ModelClient(
        spec, timeout=args.client_timeout, policy=RetryPolicy(retries=args.retries), limiter=RateLimiter(0)
    )


async def run_collection(
    spec: ModelSpec, planned: list[PlannedCall], store_dir: Path, args: argparse.Namespace
) -> tuple[CollectionReport, collections.Counter, int, float]:
    """collect() on a new ResponseStore at ``store_dir``: the report, writes per key, client
    attempts and wall time."""
    store = ResponseStore(store_dir, mode="use")
    puts: collections.Counter[str] = collections.Counter()
    put = store.put

    def counting_put(response, **how):  # type: ignore[no-untyped-def]
        puts[response.key] += 1
        put(response, **how)

    store.put = counting_put  # type: ignore[method-assign]
    client = make_client(spec, args)
    t0 = time.perf_counter()
    try:
        report = await collect(planned, store=store, client=lambda alias: client, concurrency=args.concurrency)
    finally:
        wall = time.perf_counter() - t0
        store.close()
        await client.aclose()
    return report, puts, client.attempts, wall


def stored(planned: list[PlannedCall], store_dir: Path) -> tuple[set[str], str | None]:
    """Keys with a readable stored response, read through a new ResponseStore; and the error, if
    the store (or an entry) cannot be read."""
    found: set[str] = set()
    store = ResponseStore(store_dir, mode="use")
    try:
        for p in planned:
            response = store.get(p.call.key)
            if response is not None:
                if p.call.messages[-1][1] not in response.text:
                    return found, f"the response stored for {p.call.key} is not the answer to its prompt"
                found.add(p.call.key)
    except StoreError as exc:
        return found, f"StoreError: {exc}"
    finally:
        store.close()
    return found, None


# -- the child (killed) ---------------------------------------------------------------------


def child_main(args: argparse.Namespace) -> int:
    spec = spec_for(args.base)
    planned = plan(spec, args.calls)
    for p in planned:
        _ = p.call.key  # computed now, as the plugin computes it during planning
    import_litellm()
    print("START", flush=True)
    report, puts, attempts, wall = asyncio.run(run_collection(spec, planned, Path(args.child), args))
    print("DONE " + json.dumps({"fetched": report.fetched, "errors": len(report.errors), "wall_s": wall}), flush=True)
    return 0


def child_args(args: argparse.Namespace, base: str, store_dir: Path) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(store_dir),
        "--base",
        base,
        "--calls",
        str(args.calls),
        "--concurrency",
        str(args.concurrency),
        "--client-timeout",
        str(args.client_timeout),
        "--retries",
        str(args.retries),
    ]


# -- the measurement --------------------------------------------------------------------------


async def fault_run(
    spec: ModelSpec, planned: list[PlannedCall], base: str, workdir: Path, args: argparse.Namespace
) -> dict:
    n = len(planned)
    settle(base)
    reset(base)
    report, puts, attempts, wall = await run_collection(spec, planned, workdir / "fault-run", args)
    server = settle(base)
    detail = counters(base, prompts=True)
    keys, unreadable = stored(planned, workdir / "fault-run")
    n_stored = len(keys)
    answered_twice = sum(1 for c in detail["ok_prompts"].values() if c > 1)
    return {
        "calls": n,
        "stored": n_stored,
        "share": n_stored / n,
        "errors": len(report.errors),
        "error_sample": list(report.errors.values())[:3],
        "server_requests": server["requests"],
        "client_attempts": attempts,
        "requests_per_stored": server["requests"] / n_stored if n_stored else float("inf"),
        "server_ok": server["ok"],
        "faults": server["faults"],
        "abandoned_200s": server["abandoned"],
        "duplicates_server": max(server["ok_duplicates"], answered_twice),
        "duplicates_store": sum(1 for c in puts.values() if c > 1),
        "wall_s": wall,
        "ideal_s": n * args.latency / args.concurrency,
        "unreadable": unreadable,
    }


async def kill_rep(
    rep: int,
    spec: ModelSpec,
    planned: list[PlannedCall],
    base: str,
    workdir: Path,
    args: argparse.Namespace,
    expected_s: float,
    rng: random.Random,
) -> dict:
    n = len(planned)
    store_dir = workdir / f"kill-{rep}"
    prompt_of = {p.call.key: p.call.messages[-1][1] for p in planned}
    settle(base)
    reset(base)
    row: dict = {"rep": rep + 1}
    with open(workdir / f"child-{rep}.err", "w") as err:
        child = subprocess.Popen(child_args(args, base, store_dir), stdout=subprocess.PIPE, stderr=err, text=True)
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line.startswith("START"):
            child.kill()
            child.wait()
            raise SystemExit(f"the child did not start: {line!r}\n{(workdir / f'child-{rep}.err').read_text()[-3000:]}")
        delay = rng.uniform(0.2, 0.8) * expected_s
        time.sleep(delay)
        row["kill_after_s"] = delay
        row["finished_before_kill"] = child.poll() is not None
        if not row["finished_before_kill"]:
            os.kill(child.pid, signal.SIGKILL)
        rc = child.wait()
        row["child_rc"] = rc
    killed = settle(base)
    row["killed_run_requests"] = killed["requests"]
    row["killed_run_ok"] = killed["ok"]
    reset(base)

    keys, unreadable = stored(planned, store_dir)
    row["unreadable_before"] = unreadable
    missing = {k for k in prompt_of if k not in keys}
    row["stored_before"] = len(keys)
    row["missing"] = len(missing)

    report, puts, attempts, wall = await run_collection(spec, planned, store_dir, args)
    server = settle(base)
    detail = counters(base, prompts=True)
    answered = detail["ok_prompts"]
    row["rerun_requests"] = server["requests"]
    row["rerun_ok"] = server["ok"]
    row["rerun_fetched"] = report.fetched
    row["rerun_from_store"] = report.from_store
    row["rerun_errors"] = len(report.errors)
    row["rerun_wall_s"] = wall
    row["rerun_abandoned_200s"] = server["abandoned"]
    expected_prompts = {prompt_of[k] for k in missing}
    row["extra_prompts"] = sorted(set(answered) - expected_prompts)[:5]
    row["unanswered_prompts"] = sorted(expected_prompts - set(answered))[:5]
    row["answered_twice"] = sum(1 for c in answered.values() if c > 1)
    after, unreadable_after = stored(planned, store_dir)
    row["stored_after"] = len(after)
    row["unreadable_after"] = unreadable_after
    row["match"] = (
        server["ok"] == len(missing)
        and set(answered) == expected_prompts
        and row["answered_twice"] == 0
        and report.fetched == len(missing)
        and report.from_store == n - len(missing)
        and not report.errors
        and len(after) == n
        and unreadable is None
        and unreadable_after is None
    )
    return row


async def bench(args: argparse.Namespace, base: str, workdir: Path, rng: random.Random) -> dict:
    spec = spec_for(base)
    planned = plan(spec, args.calls)
    for p in planned:
        _ = p.call.key  # computed now, as the plugin computes it during planning
    import_litellm()
    print(f"  fault run: {args.calls} calls ...", flush=True)
    fault = await fault_run(spec, planned, base, workdir, args)
    print(f"    {fault['wall_s']:.1f} s, {fault['stored']}/{fault['calls']} stored", flush=True)
    reps = []
    for rep in range(args.repeats):
        row = await kill_rep(rep, spec, planned, base, workdir, args, fault["wall_s"], rng)
        reps.append(row)
        print(
            f"  kill {rep + 1}/{args.repeats}: killed after {row['kill_after_s']:.1f} s, {row['stored_before']} "
            "stored, "
            f"{row['missing']} missing, re-run answered {row['rerun_ok']} in {row['rerun_wall_s']:.1f} s: "
            f"{'match' if row['match'] else 'MISMATCH'}",
            flush=True,
        )
    return {"fault_run": fault, "kill_reps": reps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2, help="server latency in seconds (default 0.2)")
    parser.add_argument("--fault-rate", type=float, default=0.2, help="share of requests that fail (default 0.2)")
    parser.add_argument("--client-timeout", type=float, default=2.0, help="client timeout in seconds (default 2)")
    parser.add_argument(
        "--fault-timeout",
        type=float,
        default=5.0,
        help="seconds a 'timeout' fault keeps the client waiting (default 5)",
    )
    parser.add_argument("--retries", type=int, default=8, help="client retries (default 8; the plugin's default is 5)")
    parser.add_argument("--repeats", type=int, default=5, help="kill -9 / re-run repetitions (default 5)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill delays and the server's faults")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: run one collection into this store
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)

    if args.fault_timeout <= args.client_timeout:
        parser.error("--fault-timeout must be longer than --client-timeout")
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    args.seed = seed
    rng = random.Random(seed)
    started = time.perf_counter()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {args.calls} calls, concurrency {args.concurrency}, "
        f"server latency {args.latency:g} s, {args.fault_rate:.0%} of requests faulted (429 / 500 / timeout, a third "
        "each; "
        f"timeout = no answer for {args.fault_timeout:g} s), client timeout {args.client_timeout:g} s, "
        f"retries {args.retries} (RetryPolicy backoff, no rate cap); {args.repeats} kill -9 repetitions; seed {seed}",
        flush=True,
    )
    options = ["--fault-rate", str(args.fault_rate), "--fault-timeout", str(args.fault_timeout)]
    if args.seed is not None:
        options += ["--fault-seed", str(args.seed)]
    proc, base = start_server(*options, latency=args.latency)
    try:
        with tempfile.TemporaryDirectory(prefix="llmbias-faults-") as tmp:
            results = asyncio.run(bench(args, base, Path(tmp), rng))
    finally:
        stop_server(proc)
    total = time.perf_counter() - started
    fault, reps = results["fault_run"], results["kill_reps"]

    failures = []
    if fault["share"] < 1.0:
        failures.append(
            f"fault run: {fault['stored']}/{fault['calls']} stored ({fault['errors']} errors: {fault['error_sample']})"
        )
    if fault["duplicates_server"] or fault["duplicates_store"]:
        failures.append(
            f"fault run: duplicates {fault['duplicates_server']} at the server, {fault['duplicates_store']} in the "
            "store"
        )
    if fault["unreadable"]:
        failures.append(f"fault run: {fault['unreadable']}")
    for row in reps:
        if not row["match"]:
            failures.append(f"kill {row['rep']}: {json.dumps(row, default=str)}")
        if row["finished_before_kill"]:
            failures.append(f"kill {row['rep']}: the child finished before the kill (not a kill test)")

    f = fault
    faults = f["faults"]
    print()
    print("fault run (fresh store):")
    print(f"  {'calls':<38}{f['calls']:>10,}")
    print(f"  {'stored (share collected, target 100 %)':<38}{f['stored']:>10,}  {f['share']:.2%}")
    print(f"  {'errors (calls given up)':<38}{f['errors']:>10,}")
    print(f"  {'requests at the server':<38}{f['server_requests']:>10,}  (client attempts {f['client_attempts']:,})")
    print(
        f"  {'  faulted: 429 / 500 / timeout':<38}{sum(faults.values()):>10,}  "
        f"({faults['429']:,} / {faults['500']:,} / {faults['timeout']:,}; "
        f"{sum(faults.values()) / max(1, f['server_requests']):.1%} of requests)"
    )
    print(f"  {'  200s sent / abandoned (client gone)':<38}{f['server_ok']:>10,}  / {f['abandoned_200s']:,}")
    print(f"  {'requests per stored response':<38}{f['requests_per_stored']:>10.3f}")
    print(f"  {'duplicates (target 0): server / store':<38}{f['duplicates_server']:>10,}  / {f['duplicates_store']:,}")
    print(f"  {'wall time':<38}{f['wall_s']:>9.1f}s  (no-fault ideal {f['ideal_s']:.1f} s)")
    print()
    print("kill -9 at a random point, then a re-run (faults on); counts at the server:")
    header = (
        f"  {'rep':>3} {'killed at':>9} {'200s before':>11} {'stored':>7} {'missing':>7} {'re-run 200s':>11} "
        f"{'re-run reqs':>11} {'req/missing':>11} {'stored after':>12} {'match':>5}"
    )
    print(header)
    for row in reps:
        ratio = row["rerun_requests"] / row["missing"] if row["missing"] else float("nan")
        print(
            f"  {row['rep']:>3} {row['kill_after_s']:>8.1f}s {row['killed_run_ok']:>11,} {row['stored_before']:>7,} "
            f"{row['missing']:>7,} "
            f"{row['rerun_ok']:>11,} {row['rerun_requests']:>11,} {ratio:>11.3f} {row['stored_after']:>12,} "
            f"{'yes' if row['match'] else 'NO':>5}"
        )
    print(
        f"  (killed at: seconds after the child started collecting (the fault run took {f['wall_s']:.1f} s); "
        "200s before: answers the server sent the killed child, a few more than it stored when the kill "
        "fell between an answer's arrival and its write)"
    )
    print()
    print(f"total {total:.0f} s; " + ("all targets met" if not failures else f"{len(failures)} target(s) missed:"))
    for line in failures:
        print("  " + line)
    if args.json:
        out = {
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "seed": seed,
            "settings": {
                k: getattr(args, k)
                for k in (
                    "calls",
                    "concurrency",
                    "latency",
                    "fault_rate",
                    "client_timeout",
                    "fault_timeout",
                    "retries",
                    "repeats",
                )
            },
            **results,
            "failures": failures,
            "total_s": total,
        }
        args.json.write_text(json.dumps(out, indent=2, default=str) + "\n")
        print(f"written to {args.json}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
