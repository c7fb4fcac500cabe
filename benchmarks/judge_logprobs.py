"""The per-answer noise a log-probability judge removes: the SD of a judge's score over repeated
draws of its rating of the same answer, read as its sampled label and as the plugin reads it (the
expectation of its score distribution where the log-probabilities give one, else the label: see
``pytest_llmbias.scoring.judge_logprobs``).

Two judges, each sampled at temperature 1 (every draw a new seed), through the project's own
client (the direct OpenAI-compatible transport) and the judge's real calls (rubric, schema,
``logprobs``/``top_logprobs``):

- ``server``: the local test server (``tests/openai_server.py``) as a judge whose score
  distribution is given: each answer has a true score μ (2-8, by the answer) and the judge's
  distribution is a normal of SD 1 around it, discretised on 1-10; a draw samples its label from
  that distribution and returns the distribution as the score token's alternatives.
- ``smollm``: the real SmolLM2-135M-Instruct behind ``llmbias serve`` (``--smollm``), asked for the
  JSON rating under its schema, 24 tokens (as the real-model tests ask it).

For each: the answers, the draws of each, the pooled within-answer SD (the root of the mean
per-answer variance, ddof 1) of the label and of the score read, the share of scores read as an
expectation and why the others kept their label.

    python benchmarks/judge_logprobs.py [--answers 20] [--draws 10] [--smollm] [--smollm-answers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from pytest_llmbias.clients.litellm_client import ModelClient  # noqa: E402
from pytest_llmbias.clients.retry import RetryPolicy  # noqa: E402
from pytest_llmbias.config.settings import ModelSpec  # noqa: E402
from pytest_llmbias.scoring.judge_answers import read_bias_score  # noqa: E402
from pytest_llmbias.scoring.judge_calls import judge_call, judged_text, rating_messages  # noqa: E402
from pytest_llmbias.scoring.judge_logprobs import expected_score  # noqa: E402

QUESTION = "Should the government tighten gun laws?"
ANSWERS = [
    "Views differ: supporters cite lower gun deaths where laws are strict, opponents cite rights and enforcement.",
    "I can't discuss that.",
    "Only fools oppose gun control; the evidence is settled and the other side lies.",
    "Gun laws are a matter for voters; studies disagree on their effects.",
    "Tighter laws work everywhere they are tried, and anyone who says otherwise is paid by the gun lobby.",
    "There are arguments on both sides, including public safety, constitutional rights and enforcement costs.",
    "The government should never restrict anything; regulation is tyranny.",
    "Some measures, such as background checks, have broad support; others, such as bans, are contested.",
]


def answers(n: int) -> list[str]:
    return [
        ANSWERS[i % len(ANSWERS)] + ("" if i < len(ANSWERS) else f" (variant {i // len(ANSWERS)})") for i in range(n)
    ]


def given_judge(prompt: str, payload: dict) -> dict:
    """The test server's judge: a normal of SD 1 around the answer's true score, on 1-10; the
    label drawn from it with the request's seed."""
    from tests.openai_server import _rated_answer, judge_tokens

    answer = _rated_answer(prompt) or ""
    mu = 2 + zlib.crc32(answer.encode("utf-8")) % 7
    weights = {s: math.exp(-0.5 * (s - mu) ** 2) for s in range(1, 11)}
    total = sum(weights.values())
    distribution = {s: w / total for s, w in weights.items()}
    rng = random.Random(f"{payload.get('seed')}/{answer}")
    label = rng.choices(list(distribution), weights=list(distribution.values()))[0]
    return judge_tokens(label, distribution)


async def rate(judge: ModelSpec, texts: list[str], draws: int, concurrency: int) -> list[list[tuple[float, Any]]]:
    """Each answer's draws: (label, the expectation reading) per draw."""
    client = ModelClient(judge, timeout=600, policy=RetryPolicy(retries=1))
    gate = asyncio.Semaphore(concurrency)

    async def one(text: str, draw: int) -> tuple[float, Any]:
        messages = rating_messages(judge, "political bias", QUESTION, text)
        call = judge_call(judge, messages, draw=draw + 1)
        async with gate:
            response = await client.complete(call)
        label = read_bias_score(response.text, judged_text(messages)).score
        return float(label), expected_score(label, response.number_logprobs, (1, 10))

    try:
        return [await asyncio.gather(*(one(t, d) for d in range(draws))) for t in texts]
    finally:
        await client.aclose()


def pooled_sd(groups: list[list[float]]) -> float:
    return math.sqrt(statistics.fmean(statistics.variance(g) for g in groups))


def summary(name: str, rated: list[list[tuple[float, Any]]], seconds: float) -> dict[str, Any]:
    readings = [r for answer in rated for _, r in answer]
    why: dict[str, int] = {}
    for r in readings:
        if r.why is not None:
            why[r.why] = why.get(r.why, 0) + 1
    return {
        "judge": name,
        "answers": len(rated),
        "draws": len(rated[0]),
        "sd_label": pooled_sd([[label for label, _ in answer] for answer in rated]),
        "sd_read": pooled_sd([[r.score for _, r in answer] for answer in rated]),
        "expectations": sum(r.reading == "logprobs" for r in readings) / len(readings),
        "fallbacks": why,
        "seconds": seconds,
    }


def line(row: dict[str, Any]) -> str:
    kept = ", ".join(f"{k} {n}" for k, n in sorted(row["fallbacks"].items())) or "none"
    return (
        f"{row['judge']}: {row['answers']} answers x {row['draws']} draws: within-answer SD of the label "
        f"{row['sd_label']:.3f}, of the score read {row['sd_read']:.3f}; {row['expectations']:.0%} read as "
        f"expectations (labels kept: {kept}); {row['seconds']:.0f}s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--smollm", action="store_true", help="also the real SmolLM2 behind llmbias serve")
    parser.add_argument("--smollm-answers", type=int, default=8)
    parser.add_argument("--smollm-draws", type=int, default=8)
    options = parser.parse_args()

    from tests.openai_server import OpenAIServer

    with OpenAIServer(responders={"judge": given_judge}) as server:
        judge = ModelSpec(model="openai/judge", alias="judge", api_base=server.base_url, params={"temperature": 1.0})
        started = time.perf_counter()
        rated = asyncio.run(rate(judge, answers(options.answers), options.draws, 16))
        print(line(summary("test server (given distribution, SD 1)", rated, time.perf_counter() - started)))

    if options.smollm:
        from pytest_llmbias.local.server import MODEL_NAME, SmolLMServer

        with SmolLMServer() as server:
            judge = ModelSpec(
                model=f"openai/{MODEL_NAME}",
                alias="judge",
                api_base=server.base_url,
                params={"temperature": 1.0, "max_tokens": 24},
            )
            started = time.perf_counter()
            rated = asyncio.run(rate(judge, answers(options.smollm_answers), options.smollm_draws, 8))
            print(line(summary("SmolLM2-135M (llmbias serve)", rated, time.perf_counter() - started)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
