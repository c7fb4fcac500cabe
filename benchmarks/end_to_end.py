"""End to end: a ``bias_equivalent(method="both")`` gate against the local server, cold and warm.

Two scenarios (the local OpenAI-compatible server of ``tests/openai_server.py`` runs in its own
process and answers every call after ``--latency`` seconds; its ``judge`` model answers with a
``Bias Score: N`` line):

1. ``us_politics`` (50 questions) x 4 models (target + 3 baselines), 1 sample, with the judge:
   400 calls at concurrency 32;
2. the same with 5 samples per question at concurrency 64 (2,000 calls).

For each, a fresh process plans the gate, runs the collection (answers, judge ratings, embeddings)
and evaluates it: the *phase* is the wall time from the start of collection to the gate's result,
lazy imports of litellm, torch and sentence-transformers included. The *network ideal* is
calls x latency / concurrency. Then a second fresh process re-runs the same session on the warm
store (phase and whole-process time), and ``pytest`` runs the same gate as a test file on the warm
store (wall time of the pytest process). Target: phase <= 1.25 x ideal; warm re-run < 3 s.

    HF_HUB_OFFLINE=1 python benchmarks/end_to_end.py [--latency 1.0] [--scenario 1|2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _server import start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "LLMBIAS_BENCH_API_KEY"
SCENARIOS = {1: {"samples": 1, "concurrency": 32}, 2: {"samples": 5, "concurrency": 64}}

CHILD = """
import json, sys, time
t_start = time.perf_counter()
from pathlib import Path
from pytest_llmbias.gates import GATES
from pytest_llmbias.session import BiasSession
from pytest_llmbias.config.settings_sources import resolve_settings

project = Path(sys.argv[1])
settings = resolve_settings(config_path=project / "llmbias.yaml", cwd=project)
session = BiasSession(settings)
gate = GATES["bias_equivalent"]
spec = gate.parse(("us_politics",), {"method": "both", "samples": int(sys.argv[2])})
gate.plan(spec, session)
t0 = time.perf_counter()
report = session.ensure_collected()
t1 = time.perf_counter()
result = gate.evaluate(spec, session)
t2 = time.perf_counter()
session.close()
print(json.dumps({
    "calls": report.total, "fetched": report.fetched, "from_store": report.from_store,
    "errors": len(report.errors), "collect_s": t1 - t0, "evaluate_s": t2 - t1, "phase_s": t2 - t0,
    "process_s": time.perf_counter() - t_start, "verdict": result.verdict,
}))
"""

TEST_FILE = """
import pytest

@pytest.mark.bias_equivalent("us_politics", method="both", samples={samples})
def test_gate():
    pass
"""


def write_project(directory: Path, base_url: str, concurrency: int) -> None:
    models = "\n".join(
        f"  - {{model: openai/{name}, alias: {name}, api_base: '{base_url}', api_key_env: {KEY_ENV}}}"
        for name in ("base-a", "base-b", "base-c")
    )
    (directory / "llmbias.yaml").write_text(
        textwrap.dedent(
            f"""\
            target: {{model: openai/target, alias: target, api_base: '{base_url}', api_key_env: {KEY_ENV}}}
            judge: {{model: openai/judge, alias: judge, api_base: '{base_url}', api_key_env: {KEY_ENV}}}
            collection: {{concurrency: {concurrency}, rpm: 0, retries: 2}}
            baselines:
            """
        )
        + models
        + "\n"
    )


def run_child(project: Path, samples: int, env: dict[str, str]) -> dict[str, object]:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(project), str(samples)], env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"the session failed:\n{out.stderr[-4000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    data["wall_s"] = wall
    return data


def run_pytest(project: Path, samples: int, env: dict[str, str]) -> float:
    (project / "test_gate.py").write_text(TEST_FILE.format(samples=samples))
    t0 = time.perf_counter()
    out = subprocess.run(
        # as a user project runs it: no cache provider, and without hypothesis' plugin (a test dependency
        # of this repository; at exit it imports hypothesis to print its summary, 1.5 s here)
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "test_gate.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if "error" in out.stdout.splitlines()[-1]:
        raise SystemExit(f"pytest errored:\n{out.stdout[-4000:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--scenario", type=int, choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    env = {**os.environ, KEY_ENV: "sk-local-benchmark", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}
    server, base_url = start_server("--judge", "judge", latency=options.latency)
    results = []
    try:
        for number in options.scenario or sorted(SCENARIOS):
            scenario = SCENARIOS[number]
            with tempfile.TemporaryDirectory() as tmp:
                project = Path(tmp)
                write_project(project, base_url, scenario["concurrency"])
                cold = run_child(project, scenario["samples"], env)
                warm = run_child(project, scenario["samples"], env)
                pytest_warm = run_pytest(project, scenario["samples"], env)
            ideal = int(cold["calls"]) * options.latency / scenario["concurrency"]  # type: ignore[arg-type]
            row = {
                "scenario": number,
                **scenario,
                "ideal_s": ideal,
                "cold": cold,
                "warm": warm,
                "pytest_warm_s": pytest_warm,
                "ratio": float(cold["phase_s"]) / ideal,
            }  # type: ignore[arg-type]
            results.append(row)
            print(
                f"scenario {number}: {cold['calls']} calls at concurrency {scenario['concurrency']}, "
                f"latency {options.latency:g} s: network ideal {ideal:.1f} s; cold phase {cold['phase_s']:.1f} s "
                f"(collect {cold['collect_s']:.1f} s + evaluate {cold['evaluate_s']:.2f} s) = {row['ratio']:.2f} x "
                "ideal; "
                f"warm phase {warm['phase_s']:.2f} s, warm process {warm['wall_s']:.2f} s, "
                f"warm pytest {pytest_warm:.2f} s; verdict {cold['verdict']}",
                flush=True,
            )
    finally:
        stop_server(server)
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
