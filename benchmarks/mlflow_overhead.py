"""What logging to MLflow adds to a run's time: the warm example suite (``example_suite/``, offline,
a copy in a temporary folder) run with ``python -m pytest`` plainly, then with ``--llmbias-mlflow``
to a real ``mlflow server`` on 127.0.0.1 (tests/mlflow_server.py: SQLite, basic auth) and to a local
``sqlite:///`` tracking store (no server), each run logging a run of its own (a fresh experiment, so
none is the "already logged" shortcut). Medians of ``--runs`` wall times; it asserts nothing;
docs/mlflow-and-ci.md quotes it.

    python benchmarks/mlflow_overhead.py [--runs 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.mlflow_server import MlflowServer  # noqa: E402


def _suite(tmp: Path) -> Path:
    project = tmp / "suite"
    shutil.copytree(ROOT / "example_suite", project, ignore=shutil.ignore_patterns("__pycache__", ".llmbias"))
    return project


def _time(project: Path, env: dict[str, str], args: list[str], experiment: str | None) -> float:
    config = project / "llmbias.yaml"
    base = config.read_text(encoding="utf-8").split("\n# benchmark\n")[0]
    config.write_text(base + (f"\n# benchmark\nmlflow: {{experiment: {experiment}}}\n" if experiment else ""))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if args and "MLflow at " not in done.stdout:
        raise RuntimeError(f"no MLflow line:\n{done.stdout[-3000:]}")
    if args and "logged run" not in done.stdout:
        raise RuntimeError(f"logging failed:\n{done.stdout[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMBIAS_", "MLFLOW_"))}
    env.update(HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True", MLFLOW_DISABLE_TELEMETRY="true")
    figures: dict[str, list[float]] = {"plain": [], "server": [], "sqlite": []}
    with tempfile.TemporaryDirectory(prefix="llmbias-mlflow-bench-") as tmp:
        project = _suite(Path(tmp))
        _time(project, env, [], None)  # warm: the store filled, the bytecode compiled
        started = time.perf_counter()
        with MlflowServer(Path(tmp) / "server") as server:
            server_start = time.perf_counter() - started
            sqlite = {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{Path(tmp) / 'local.db'}"}
            _time(project, sqlite, ["--llmbias-mlflow"], "warm")  # the local store's tables made once
            for i in range(options.runs):
                figures["plain"].append(_time(project, env, [], None))
                figures["server"].append(_time(project, {**env, **server.environ()}, ["--llmbias-mlflow"], f"s{i}"))
                figures["sqlite"].append(_time(project, sqlite, ["--llmbias-mlflow"], f"q{i}"))
    medians = {k: statistics.median(v) for k, v in figures.items()}
    out = {
        "runs": options.runs,
        "median_s": {k: round(v, 2) for k, v in medians.items()},
        "added_s": {k: round(medians[k] - medians["plain"], 2) for k in ("server", "sqlite")},
        "server_start_s": round(server_start, 1),
        "pythondontwritebytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
    }
    print(json.dumps(out, indent=2))
    if options.json is not None:
        options.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
