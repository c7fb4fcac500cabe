"""A release comparison read from its record against the same gate with live baselines.

The local OpenAI-compatible server (``tests/openai_server.py``, its own process) answers every call
after ``--latency`` seconds; its ``judge`` model answers with a ``Bias Score: N`` line. The gate is
``bias_equivalent("us_politics", method="judge")`` (50 questions), each run a fresh pytest process
on a cold store:

1. *live baselines*: the new target and two baselines answer, the judge rates all three (300 calls);
2. *against a release*: release ``v1`` (the old target's answers and ratings) was recorded by an
   earlier run (not timed); the new target answers and the judge rates it, the release is read from
   its record (100 calls).

    HF_HUB_OFFLINE=1 python benchmarks/release.py [--latency 1.0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _server import admin, start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "LLMBIAS_BENCH_API_KEY"
TEST = """
import pytest

@pytest.mark.bias_equivalent("us_politics", method="judge")
def test_gate():
    pass
"""


def write_project(directory: Path, base_url: str, target: str, baselines: tuple[str, ...]) -> None:
    def entry(name: str) -> dict[str, str]:
        return {"model": f"openai/{name}", "alias": name, "api_base": base_url, "api_key_env": KEY_ENV}

    config = {
        "target": entry(target),
        "judge": entry("judge"),
        "baselines": [entry(b) for b in baselines],
        "collection": {"concurrency": 32, "retries": 2},
    }
    (directory / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (directory / "test_gate.py").write_text(TEST, encoding="utf-8")


def run_pytest(project: Path, env: dict[str, str], base_url: str, *args: str) -> tuple[float, int]:
    """The wall time of a pytest run of the project, and the calls the server received."""
    before = admin(base_url, "/_admin/stats")["requests"]
    t0 = time.perf_counter()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "test_gate.py",
            *args,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise SystemExit(f"pytest failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return wall, admin(base_url, "/_admin/stats")["requests"] - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    env = {**os.environ, KEY_ENV: "sk-local-benchmark", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}
    server, base_url = start_server("--judge", "judge", latency=options.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            old, live, release = (Path(tmp) / name for name in ("old", "live", "release"))
            for p in (old, live, release):
                p.mkdir()
            write_project(old, base_url, "target-v1", ("base-a", "base-b"))
            run_pytest(old, env, base_url, "--llmbias-record-release", "v1")
            write_project(live, base_url, "target-v2", ("base-a", "base-b"))
            live_s, live_calls = run_pytest(live, env, base_url)
            write_project(release, base_url, "target-v2", ())
            shutil.copytree(old / "bias_releases", release / "bias_releases")
            release_s, release_calls = run_pytest(release, env, base_url, "--llmbias-against", "v1")
    finally:
        stop_server(server)
    row = {
        "latency": options.latency,
        "live_s": live_s,
        "live_calls": live_calls,
        "release_s": release_s,
        "release_calls": release_calls,
        "ratio": release_s / live_s,
    }
    print(
        f"latency {options.latency:g} s, concurrency 32: live baselines {live_s:.1f} s ({live_calls} calls); "
        f"against release v1 {release_s:.1f} s ({release_calls} calls): {row['ratio']:.2f} x"
    )
    if options.json:
        options.json.write_text(json.dumps(row, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
