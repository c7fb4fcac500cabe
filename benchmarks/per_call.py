"""What one call costs: CPU a call cold and warm, the warm example suite, and the cold run's ratio to
the network ideal.

    python benchmarks/per_call.py [--small 1280] [--large 10240] [--concurrency 128] [--latency 0.02]
                                  [--rounds 2] [--suite-runs 3] [--skip-ratios] [--instructions] [--json out.json]

Against the local OpenAI-compatible server (``tests/openai_server.py``, its own process, so its CPU
is not charged to the client; on a small machine it still shares the cores):

1. *CPU a call, cold and warm*, twice: the core session, and the whole pytest process a user runs.
   The core: a child process plans ``N`` distinct prompts to one model on the
   direct transport (a ``bias_responses`` request through :class:`BiasSession`), collects them
   into a fresh store at ``--concurrency`` (server latency ``--latency``) and reads them back: its
   CPU time (process-wide, the session's loop thread included) from plan to the last answer read.
   Then a second process does the same on the same store, every call stored. Each figure is
   the slope between ``--small`` and ``--large`` prompts, so start-up, imports and the fingerprint
   probes cancel; the median over ``--rounds`` rounds.
   With ``--instructions`` (valgrind installed), both figures also as instructions a call,
   counted by callgrind over the same clocked part at the same two sizes (the cold one on a fresh
   store, the warm one on the same store filled): CPU time on a shared machine moved by a third
   within an hour, a count of instructions does not, so a change is told from the machine's load
   by it. So is the warm example suite's (below): the whole pytest process's instructions, once.
   The whole process: ``python -m pytest`` (a user's plugins only) on a project whose one
   ``bias_responses`` test asks the same ``N`` prompts, cold then warm: the process's CPU (user +
   system) from start to exit, the same slope, so start-up and imports cancel. With
   ``--instructions``, its warm call also as instructions, counted by callgrind over the whole
   warm process at the two sizes (the store filled by a cold run first, outside callgrind).
2. *The warm example suite*: ``python -m pytest`` in ``example_suite/`` (offline, from its
   snapshot), as a user's install runs it (this environment's development plugins, hypothesis's
   and pytest-xdist's, turned off) and as it runs here with them: the session's time as pytest
   reports it, and the wall and CPU time (user + system) of the process, medians of
   ``--suite-runs`` after one run to warm the file cache.
3. *Cold ratio*: the same cold collection with 1,280 prompts at concurrency 64 and latency 1 s, and
   with 10,240 prompts at concurrency 128 and latency 0.5 s: wall time from plan to the last
   answer read, against the network ideal ``N x latency / concurrency``; each as a run is by
   default (a new model's three fingerprint probes asked first, alone: one round trip) and
   without the probes.

No target is asserted: the figures are printed (and written with ``--json``); docs/performance.md
quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _server import start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "LLMBIAS_BENCH_API_KEY"

CHILD = """
import json, sys, time
from pathlib import Path
from pytest_llmbias.planning.request import ResponseRequest
from pytest_llmbias.session import BiasSession
from pytest_llmbias.config.settings_sources import resolve_settings

project = Path(sys.argv[1])
request = ResponseRequest("bench", models="target")
settings = resolve_settings(config_path=project / "llmbias.yaml", cwd=project)
session = BiasSession(settings)
session.domain("bench")  # the domain file is read before the clock starts
counted = sys.argv[2:] == ["--instructions"]  # under callgrind: count the clocked part's instructions only
if counted:
    import os, subprocess
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=True)
cpu0, t0 = time.process_time(), time.perf_counter()
session.plan(request)
report = session.ensure_collected()
answers = session.responses(request)
if counted:
    subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True, check=True)
out = {"cpu_s": time.process_time() - cpu0, "wall_s": time.perf_counter() - t0,
       "fetched": report.fetched, "from_store": report.from_store, "answers": len(answers.responses)}
session.close()
print(json.dumps(out))
"""


def write_project(project: Path, base: str, n: int, concurrency: int, tag: str, *, probes: bool = True) -> None:
    """A project of one model on the direct transport and one domain of ``n`` distinct prompts
    (``probes=False``: without the fingerprint probes, ``collection.fingerprint: false``)."""
    (project / "domains").mkdir(parents=True)
    questions = "".join(
        f"      - {{id: q{i:05d}, text: '[{tag}] question {i}: is this prompt distinct?'}}\n" for i in range(n)
    )
    (project / "domains" / "bench.yaml").write_text(
        "name: bench\ndescription: distinct prompts for the benchmark\nfocus: nothing\n"
        "instruction: Represent the answer\ncategories:\n  - id: all\n    questions:\n" + questions
    )
    config = {
        "target": {"model": "openai/bench", "alias": "bench", "api_base": base, "api_key_env": KEY_ENV},
        "domains": {"paths": ["domains"]},
        "collection": {"concurrency": concurrency, "rpm": 0, "fingerprint": probes},
        "store": {"dir": str(project / "store")},
    }
    (project / "llmbias.yaml").write_text(json.dumps(config))


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env.update({KEY_ENV: "sk-local-benchmark", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")})
    return env


def run_child(
    base: str, n: int, concurrency: int, workdir: Path, tag: str, *, cold_only: bool = False, probes: bool = True
) -> dict:
    """Two child processes on one project of ``n`` prompts: the cold collection, then (unless
    ``cold_only``) the warm one, each a fresh process as a re-run is; their figures."""
    project = workdir / tag
    write_project(project, base, n, concurrency, tag, probes=probes)
    data = {}
    for phase in ("cold",) if cold_only else ("cold", "warm"):
        command = [sys.executable, "-c", CHILD, str(project)]
        done = subprocess.run(command, env=child_env(), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the benchmark's session failed:\n{done.stderr[-4000:]}")
        data[phase] = json.loads(done.stdout.strip().splitlines()[-1])
    if data["cold"]["fetched"] != n or data["cold"]["answers"] != n:
        raise SystemExit(f"cold run of {n}: {data['cold']}")
    if not cold_only and (data["warm"]["from_store"] != n or data["warm"]["fetched"]):
        raise SystemExit(f"warm run of {n}: {data['warm']}")
    return data


def slopes(run: Any, small: int, large: int, rounds: int, what: str) -> dict:
    """CPU a call, cold and warm, as slopes between ``small`` and ``large`` prompts: ``run(n, tag)``
    gives each phase's ``cpu_s`` for ``n`` prompts; the median over ``rounds`` rounds, the sizes'
    order alternating."""
    got_slopes: dict[str, list[float]] = {"cold": [], "warm": []}
    for r in range(rounds):
        sizes = (small, large) if r % 2 == 0 else (large, small)
        got = {n: run(n, f"{what}-{r}-{n}") for n in sizes}
        for phase in got_slopes:
            got_slopes[phase].append((got[large][phase]["cpu_s"] - got[small][phase]["cpu_s"]) / (large - small))
        print(
            f"  round {r + 1}, {what}: cold {1e6 * got_slopes['cold'][-1]:.0f} us CPU a call, "
            f"warm {1e6 * got_slopes['warm'][-1]:.1f} us CPU a call "
            f"(cold {got[small]['cold']['cpu_s']:.2f}/{got[large]['cold']['cpu_s']:.2f} s, "
            f"warm {got[small]['warm']['cpu_s']:.2f}/{got[large]['warm']['cpu_s']:.2f} s CPU at {small}/{large})",
            flush=True,
        )
    return {
        "cold_us": 1e6 * statistics.median(got_slopes["cold"]),
        "warm_us": 1e6 * statistics.median(got_slopes["warm"]),
        "cold_rounds_us": [1e6 * s for s in got_slopes["cold"]],
        "warm_rounds_us": [1e6 * s for s in got_slopes["warm"]],
    }


def per_call(base: str, small: int, large: int, concurrency: int, rounds: int, workdir: Path) -> dict:
    """CPU a call of the core session, cold and warm (see :func:`slopes`)."""
    return slopes(lambda n, tag: run_child(base, n, concurrency, workdir, tag), small, large, rounds, "session")


WHOLE_TEST = """
import pytest


@pytest.mark.bias_responses("bench", models="target")
def test_answers(bias_responses):
    assert len(bias_responses.responses) == {n}
"""

#: pytest as a user's project runs it: none of this repository's development plugins
USER_PYTEST = ("-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:xdist", "-p", "no:randomly")


def run_pytest_process(
    base: str, n: int, concurrency: int, workdir: Path, tag: str, phases: tuple[str, ...] = ("cold", "warm")
) -> dict:
    """``python -m pytest`` on a project whose one ``bias_responses`` test asks ``n`` distinct
    prompts, cold (a fresh store) then warm (``phases``: the cold run alone): each process's CPU
    (user + system), start to exit."""
    project = workdir / tag
    write_project(project, base, n, concurrency, tag, probes=False)
    (project / "test_answers.py").write_text(WHOLE_TEST.format(n=n))
    data = {}
    for phase in phases:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *USER_PYTEST], cwd=project, env=child_env(), capture_output=True, text=True
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"the pytest process failed:\n{(done.stdout + done.stderr)[-4000:]}")
        data[phase] = {"cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}
    return data


def whole_process(base: str, small: int, large: int, concurrency: int, rounds: int, workdir: Path) -> dict:
    """CPU a call of the whole pytest process, cold and warm (see :func:`slopes`; start-up and
    imports cancel): what a user's ``pytest`` pays a call, beside the core session's figure."""
    return slopes(
        lambda n, tag: run_pytest_process(base, n, concurrency, workdir, tag), small, large, rounds, "pytest process"
    )


def call_instructions(base: str, small: int, large: int, concurrency: int, workdir: Path) -> dict | None:
    """Instructions a call, cold and warm, as callgrind counts them (the same slopes, on the same
    projects, as the CPU figures: the probes' calls cancel, the stamping of each answer with its
    model's fingerprint does not): a count that the machine's load does not move, where CPU time
    moved by a third within an hour. None where valgrind is not installed."""
    import shutil

    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return None
    counts: dict[str, dict[int, int]] = {"cold": {}, "warm": {}}
    for n in (small, large):
        tag = f"instructions-{n}"
        write_project(workdir / tag, base, n, concurrency, tag)
        for phase in ("cold", "warm"):  # a fresh store, then the same store with every call in it
            command = [
                "valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
                sys.executable, "-c", CHILD, str(workdir / tag), "--instructions",
            ]  # fmt: skip
            done = subprocess.run(command, env=child_env(), capture_output=True, text=True, check=False)
            found = re.search(r"Collected : (\d+)", done.stderr)
            if done.returncode != 0 or found is None:
                raise SystemExit(f"the benchmark's session under callgrind failed:\n{done.stderr[-4000:]}")
            out = json.loads(done.stdout.strip().splitlines()[-1])
            if out["answers"] != n or out["fetched"] != (n if phase == "cold" else 0):
                raise SystemExit(f"{phase} run of {n} under callgrind: {out}")
            counts[phase][n] = int(found.group(1))
    slopes = {phase: (c[large] - c[small]) / (large - small) for phase, c in counts.items()}
    for phase, slope in slopes.items():
        c = counts[phase]
        print(f"  {phase}: {slope:,.0f} instructions a call ({c[small]:,} at {small}, {c[large]:,} at {large})")
    return {"cold_instructions": slopes["cold"], "warm_instructions": slopes["warm"], "counts": counts}


def process_instructions(base: str, small: int, large: int, concurrency: int, workdir: Path) -> float | None:
    """Instructions a warm call of the whole pytest process (see :func:`run_pytest_process`), as
    callgrind counts the whole warm process at ``small`` and ``large`` prompts: the slope, so that
    start-up and imports cancel; the garbage collections and the exit are counted. Each the
    first run after a cold one, as the CPU figure's warm run is. None where valgrind is not
    installed."""
    import shutil

    if shutil.which("valgrind") is None:
        return None
    counts: dict[int, int] = {}
    for n in (small, large):
        tag = f"process-instructions-{n}"
        run_pytest_process(base, n, concurrency, workdir, tag, ("cold",))  # the store filled by a first run
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m", "pytest"]
        done = subprocess.run(
            [*command, *USER_PYTEST], cwd=workdir / tag, env=child_env(), capture_output=True, text=True
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"the warm pytest process under callgrind failed:\n{(done.stdout + done.stderr)[-4000:]}")
        counts[n] = int(found.group(1))
    slope = (counts[large] - counts[small]) / (large - small)
    print(f"  the whole pytest process: {slope:,.0f} instructions a warm call ({counts[small]:,} at {small}, "
          f"{counts[large]:,} at {large})", flush=True)  # fmt: skip
    return slope


#: pytest plugins of this project's development environment that a user's install of the example
#: suite (the README's first command: the ``embeddings`` and ``html`` extras) does not have
DEV_PLUGINS = ("hypothesispytest", "xdist.plugin", "xdist.looponfail")


def example_suite(runs: int) -> dict:
    """``python -m pytest -q`` in the example suite, as a user runs it (the development
    environment's own pytest plugins turned off: see :data:`DEV_PLUGINS`), and as it runs here with
    them: the session's time as pytest reports it, and the process's wall and CPU seconds
    (user + system), medians of ``runs`` after one run to warm the file cache."""
    env = child_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user runs it: bytecode cached after the first run

    def once(args: list[str]) -> tuple[float, float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", *args],
            cwd=ROOT / "example_suite",
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        reported = re.search(r" in ([0-9.]+)s", done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
        if done.returncode != 0 or reported is None:
            raise SystemExit(f"the example suite failed:\n{done.stdout[-3000:]}")
        return float(reported.group(1)), wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    out = {}
    for name, args in (("user", [a for p in DEV_PLUGINS for a in ("-p", f"no:{p}")]), ("dev", [])):
        once(args)
        pytest_s, walls, cpus = zip(*(once(args) for _ in range(runs)), strict=True)
        print(
            f"  example suite ({name}): {' '.join(f'{p:.2f}' for p in pytest_s)} s in pytest, "
            f"{' '.join(f'{w:.2f}' for w in walls)} s wall, {' '.join(f'{c:.2f}' for c in cpus)} s CPU",
            flush=True,
        )
        out[name] = {
            "pytest_s": statistics.median(pytest_s),
            "wall_s": statistics.median(walls),
            "cpu_s": statistics.median(cpus),
            "runs": {"pytest_s": pytest_s, "wall_s": walls, "cpu_s": cpus},
        }
    return out


def suite_instructions() -> int | None:
    """The warm example suite's instructions (the whole pytest process, as a user's install runs
    it) as callgrind counts them, after a run that leaves its stores warm; the same hash seed each
    time. None where valgrind is not installed."""
    import shutil

    if shutil.which("valgrind") is None:
        return None
    env = {**child_env(), "PYTHONHASHSEED": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    args = [sys.executable, "-m", "pytest", "-q", *(a for p in DEV_PLUGINS for a in ("-p", f"no:{p}"))]
    subprocess.run(args, cwd=ROOT / "example_suite", env=env, capture_output=True, check=False)
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *args]
    done = subprocess.run(command, cwd=ROOT / "example_suite", env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the example suite under callgrind failed:\n{done.stderr[-4000:]}")
    count = int(found.group(1))
    print(f"  example suite: {count:,} instructions (callgrind, the whole process)", flush=True)
    return count


RATIOS = ((1280, 64, 1.0), (10240, 128, 0.5))
"""(prompts, concurrency, latency in seconds) of the cold ratio runs."""


def cold_ratios(workdir: Path) -> list[dict]:
    """Each of :data:`RATIOS` as a run is by default (the fingerprint probes asked first, alone:
    three calls, one round trip, for a model not yet fingerprinted), and without the probes, which
    tells the plugin's own share from theirs."""
    out = []
    for n, concurrency, latency in RATIOS:
        for probes in (True, False):
            proc, base = start_server(latency=latency)
            try:
                tag = f"ratio-{n}-{'probes' if probes else 'bare'}"
                data = run_child(base, n, concurrency, workdir, tag, cold_only=True, probes=probes)
            finally:
                stop_server(proc)
            ideal = n * latency / concurrency
            row = {"calls": n, "concurrency": concurrency, "latency_s": latency, "ideal_s": ideal, "probes": probes}
            row.update(wall_s=data["cold"]["wall_s"], ratio=data["cold"]["wall_s"] / ideal)
            print(
                f"  cold {n} prompts, concurrency {concurrency}, latency {latency:g} s, "
                f"{'with' if probes else 'without'} the probes: {row['wall_s']:.1f} s = "
                f"{row['ratio']:.3f} x the ideal {ideal:.1f} s",
                flush=True,
            )
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1280)
    parser.add_argument("--large", type=int, default=10240)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency", type=float, default=0.02, help="server latency for the CPU figures (s)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--suite-runs", type=int, default=3)
    parser.add_argument("--skip-ratios", action="store_true", help="leave out the cold ratio runs (about 130 s)")
    parser.add_argument("--skip-suite", action="store_true", help="leave out the example suite")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the instructions of a cold and a warm call, of a warm call of the whole pytest process "
        "and of the warm example suite (about 8 min)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs", flush=True)
    results: dict = {"cpus": os.cpu_count(), "small": args.small, "large": args.large}
    with tempfile.TemporaryDirectory(prefix="llmbias-per-call-") as tmp:
        proc, base = start_server(latency=args.latency)
        try:
            results["per_call"] = per_call(base, args.small, args.large, args.concurrency, args.rounds, Path(tmp))
            results["whole_process"] = whole_process(
                base, args.small, args.large, args.concurrency, args.rounds, Path(tmp)
            )
            if args.instructions:
                results["instructions"] = call_instructions(base, args.small, args.large, args.concurrency, Path(tmp))
                results["process_instructions"] = process_instructions(
                    base, args.small, args.large, args.concurrency, Path(tmp)
                )
        finally:
            stop_server(proc)
        if not args.skip_suite:
            results["example_suite"] = example_suite(args.suite_runs)
            if args.instructions:
                results["suite_instructions"] = suite_instructions()
        if not args.skip_ratios:
            results["cold_ratios"] = cold_ratios(Path(tmp))
    results["total_s"] = time.perf_counter() - started
    pc = results["per_call"]
    print()
    print(
        f"CPU a call, cold (direct transport, latency {args.latency:g} s, concurrency {args.concurrency}; slope "
        f"{args.small}->{args.large}): {pc['cold_us']:.0f} us (target <= 300 us)"
    )
    print(f"CPU a call, warm (every call stored; same slope): {pc['warm_us']:.1f} us (target <= 40 us)")
    wp = results["whole_process"]
    print(
        f"the whole pytest process (one bias_responses test, same slope): cold {wp['cold_us']:.0f} us "
        f"(target <= 300 us), warm {wp['warm_us']:.1f} us (target <= 40 us) a call"
    )
    if results.get("instructions"):
        for phase in ("cold", "warm"):
            count = results["instructions"][f"{phase}_instructions"]
            print(f"instructions a {phase} call (callgrind; same slope): {count:,.0f}")
    if "example_suite" in results:
        for name, what in (("user", "as a user's install runs it"), ("dev", "with the development plugins")):
            s = results["example_suite"][name]
            print(
                f"warm example suite, {what}: {s['pytest_s']:.2f} s in pytest (target <= 2 s), "
                f"{s['wall_s']:.2f} s wall, {s['cpu_s']:.2f} s CPU as a process"
            )
    if results.get("process_instructions"):
        print(f"instructions a warm call, the whole pytest process (callgrind): {results['process_instructions']:,.0f}")
    if results.get("suite_instructions"):
        print(f"instructions of the warm example suite (callgrind): {results['suite_instructions']:,}")
    for row in results.get("cold_ratios", []):
        print(
            f"cold ratio, {row['calls']} prompts, concurrency {row['concurrency']}, latency {row['latency_s']:g} s, "
            f"{'with' if row['probes'] else 'without'} the fingerprint probes: "
            f"{row['ratio']:.3f} x the network ideal (target <= 1.05)"
        )
    print(f"total {results['total_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
