"""Batch mode against the local server's Batch API, and what a nightly suite costs at batch prices.

    python benchmarks/batch_mode.py [--prompts 10240] [--step 0.05] [--json out.json]

1. One ``bias_responses`` test of ``--prompts`` distinct prompts to one model, run as a user runs it
   (``python -m pytest -q`` in its own process, fresh store), ordinary mode and ``--llmbias-batch``
   against ``tests/openai_server.py`` in a process of its own (a batch moves one state, or a tenth of
   its lines, every ``--step`` seconds): wall time, the pytest process's CPU (user + system) and peak
   memory, and the server's view (chat requests, files, batches, lines run, polls); then the warm
   re-run in batch mode (it must submit nothing).
2. The example suite's calls at standard and at batch prices: every call of its snapshot priced as
   if made to a model litellm's offline price map knows with batch prices (``--price-model``), the
   prompt and answer tokens estimated at four characters a token.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["BENCH_KEY"] = "sk-bench"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from _server import admin, start_server, stop_server  # noqa: E402

QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
TEST = """
import pytest


@pytest.mark.bias_responses("bench", models="target")
def test_collected(bias_responses):
    assert len(bias_responses) == {n}
"""


def write_project(project: Path, base: str, n: int, batch: bool) -> None:
    (project / "domains").mkdir(parents=True, exist_ok=True)
    questions = "".join(f"      - {{id: q{i:05d}, text: 'question {i}: is this prompt distinct?'}}\n" for i in range(n))
    (project / "domains" / "bench.yaml").write_text(
        "name: bench\ndescription: distinct prompts\nfocus: nothing\ninstruction: Represent the answer\n"
        "categories:\n  - id: all\n    questions:\n" + questions
    )
    config = {
        "target": {"model": "openai/bench-model", "alias": "target", "api_base": base, "api_key_env": "BENCH_KEY"},
        "domains": {"paths": ["domains"]},
        "collection": {"concurrency": 64, "fingerprint": False, "batch": batch},
    }
    (project / "llmbias.yaml").write_text(json.dumps(config))
    (project / "test_collected.py").write_text(TEST.format(n=n))


def run_pytest(project: Path) -> dict[str, Any]:
    """``python -m pytest -q`` in ``project``: wall time, the process's CPU and peak memory."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", *QUIET], cwd=project, env=env, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "returncode": done.returncode,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        # ru_maxrss of the children is the largest of them so far (KiB on Linux)
        "max_rss_mb": round(after.ru_maxrss / 1024, 1),
        "tail": (done.stdout + done.stderr).decode(errors="replace")[-400:],
    }


def bench_prompts(n: int, step: float, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    proc, base = start_server("--batch-step", str(step), latency=0.0)
    try:
        for mode in ("ordinary", "batch"):
            project = workdir / mode
            write_project(project, base, n, batch=mode == "batch")
            admin(base, "/_admin/reset", post=True)
            admin(base, "/_admin/batches/reset", post=True)
            run = run_pytest(project)
            run["answered"] = admin(base, "/_admin/counters")["requests"]  # chat requests and batch lines
            counts = admin(base, "/_admin/batches")
            run["batch"] = {k: counts[k] for k in ("files_uploaded", "batches_created", "lines_executed", "polls")}
            out[mode] = run
        warm = run_pytest(workdir / "batch")
        counts = admin(base, "/_admin/batches")
        warm["batches_created_in_all"] = counts["batches_created"]
        out["batch_warm"] = warm
    finally:
        stop_server(proc)
    for mode in ("ordinary", "batch"):
        out[mode]["cpu_ms_per_call"] = round(1000 * out[mode]["cpu_s"] / n, 3)
    return out


def example_suite_cost(price_model: str) -> dict[str, Any]:
    """The example suite's snapshot calls priced at standard and at batch prices."""
    import litellm

    prices = litellm.model_cost[price_model]
    prompt_chars = answer_chars = calls = 0
    with open(ROOT / "example_suite" / "snapshots" / "demo.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            calls += 1
            messages = record.get("messages") or record.get("call", {}).get("messages") or []
            prompt_chars += sum(len(str(m[1] if isinstance(m, list) else m.get("content", ""))) for m in messages)
            answer_chars += len(str(record.get("text") or ""))
    prompt_tokens, answer_tokens = prompt_chars / 4, answer_chars / 4
    standard = prompt_tokens * prices["input_cost_per_token"] + answer_tokens * prices["output_cost_per_token"]
    batch = (
        prompt_tokens * prices["input_cost_per_token_batches"] + answer_tokens * prices["output_cost_per_token_batches"]
    )
    return {
        "price_model": price_model,
        "calls": calls,
        "prompt_tokens": round(prompt_tokens),
        "answer_tokens": round(answer_tokens),
        "standard_usd": round(standard, 4),
        "batch_usd": round(batch, 4),
        "batch_share": round(batch / standard, 3) if standard else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=10_240)
    parser.add_argument("--step", type=float, default=0.05)
    parser.add_argument("--price-model", action="append", default=None, help="repeat (default: gpt-4o-mini, gpt-4o)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures: dict[str, Any] = {"prompts": bench_prompts(args.prompts, args.step, Path(tmp))}
    figures["example_suite"] = [example_suite_cost(m) for m in args.price_model or ("gpt-4o-mini", "gpt-4o")]
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
