"""A slow server, asked more at once than it answers within the timeout: collection with the
endpoint's adaptive limit against the same collection at a fixed concurrency.

    HF_HUB_OFFLINE=1 python benchmarks/slow_server.py [--calls 60] [--concurrency 32] [--work 0.25]
                                                      [--capacity 1] [--timeout 3] [--retries 5]

The local server (tests/openai_server.py, in this process) answers ``--capacity`` requests at a
time, each in ``--work`` seconds, and decodes a request to its end even when its client has gone (a
CPU model server that does not watch its sockets). ``collect()`` of N distinct calls on a fresh
store, through the plugin's client (direct transport), twice: with the adaptive limit (as a run
has it) and without it (a fixed ``--concurrency``, the rest unchanged: each timed-out call's retry
still waits one more timeout). Reports per run: calls answered and failed, requests at the server,
answers it decoded (abandoned ones too), wall time, and the adaptive limit at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from pytest_llmbias.clients.faults import FaultLog, count_line  # noqa: E402
from pytest_llmbias.clients.litellm_client import ModelClient  # noqa: E402
from pytest_llmbias.clients.ratelimit import AdaptiveLimit  # noqa: E402
from pytest_llmbias.clients.retry import RetryPolicy  # noqa: E402
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec  # noqa: E402
from pytest_llmbias.planning.collector import PlannedCall, collect  # noqa: E402
from pytest_llmbias.store.calls import ModelCall  # noqa: E402
from pytest_llmbias.store.response_store import ResponseStore  # noqa: E402
from tests.openai_server import OpenAIServer  # noqa: E402


async def one_run(server: OpenAIServer, args: argparse.Namespace, *, adaptive: bool) -> dict:
    spec = ModelSpec(model="openai/slow", alias="slow", api_base=server.base_url, transport="openai")
    planned = [
        PlannedCall(alias="slow", call=ModelCall.build(spec, f"slow question {i}?", GenerationSettings()))
        for i in range(args.calls)
    ]
    limit = AdaptiveLimit(args.concurrency) if adaptive else None
    faults = FaultLog()
    client = ModelClient(
        spec, timeout=args.timeout, policy=RetryPolicy(retries=args.retries), adaptive=limit, faults=faults
    )
    with tempfile.TemporaryDirectory() as folder:
        store = ResponseStore(Path(folder), mode="use")
        started = time.perf_counter()
        try:
            report = await collect(planned, store=store, client=lambda _: client, concurrency=args.concurrency)
        finally:
            wall = time.perf_counter() - started
            store.close()
            await client.aclose()
    while server.counters()["in_flight"]:  # the abandoned requests still decoding
        await asyncio.sleep(0.05)
    counts = server.counters()
    server.reset_counters()
    return {
        "adaptive": adaptive,
        "answered": report.fetched,
        "failed": len(report.errors),
        "requests": counts["requests"],
        "decoded": counts["decoded"],
        "wall_s": round(wall, 1),
        "limit": limit.limit if limit is not None else args.concurrency,
        "attempt faults": count_line(faults.attempts) or "none",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--work", type=float, default=0.25)
    parser.add_argument("--capacity", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--retries", type=int, default=5)
    args = parser.parse_args()
    ideal = args.calls * args.work / args.capacity
    print(
        f"{args.calls} calls at concurrency {args.concurrency}, timeout {args.timeout:g} s, {args.retries} retries; "
        f"server: {args.capacity} at a time, {args.work:g} s each (ideal {ideal:.1f} s)"
    )
    with OpenAIServer(work=args.work, capacity=args.capacity) as server:
        for adaptive in (True, False):
            print(asyncio.run(one_run(server, args, adaptive=adaptive)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
