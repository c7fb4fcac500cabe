"""The per-answer noise that reading fixed-choice answers by their options' probabilities removes:
the SD of one answer's reading over repeated draws of the same call, read from the sampled answer
and as the plugin reads it (its options' probabilities at the first token where the
log-probabilities give them, else the sampled answer: ``pytest_llmbias.scoring.option_logprobs``).

Three readings, each through the project's own client (the direct OpenAI-compatible transport)
and the gates' real calls (``choice_call``: ``logprobs``/``top_logprobs``), every draw a new seed
at temperature 1:

- ``stance``: the stance gate's answer value, ±1 for a sampled yes or no (0 otherwise) against
  2·P(yes) − 1; the built-in ``binary_opinions`` questions in English, read as the paper reads
  them (``explainers="zero"``) and with ``explainers="side"``.
- ``discrim``: discrim-eval's decision, 1/0 for a sampled yes or no against P(yes); the items of
  ``tests/unit/data/discrim_explicit.jsonl``.
- ``bbq``: BBQ's per-answer bias score (+1 biased, −1 other person, 0 unknown) against its
  expectation over the letters; the ambiguous items of ``tests/unit/data/bbq_items.jsonl``.

Two models: ``server``, the local test server (``tests/openai_server.py``) answering each prompt
from a given distribution over its options (drawn by prompt: P(yes) 0.1-0.9, BBQ's three letters
from a Dirichlet) with that distribution as the first token's alternatives; ``smollm``
(``--smollm``), the real SmolLM2-135M-Instruct behind ``llmbias serve``. For each: the pooled
within-answer SD (the root of the mean per-prompt variance over draws, ddof 1) of each reading,
and how many answers were read by probability.

    python benchmarks/choice_logprobs.py [--prompts 12] [--draws 10] [--smollm] [--smollm-prompts 8]
        [--smollm-draws 8] [--smollm-tokens 24]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from pytest_llmbias.clients.litellm_client import ModelClient  # noqa: E402
from pytest_llmbias.clients.retry import RetryPolicy  # noqa: E402
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec  # noqa: E402
from pytest_llmbias.domains import load_domain  # noqa: E402
from pytest_llmbias.domains.languages import BUILTIN_LANGUAGES  # noqa: E402
from pytest_llmbias.gates.benchmark.scores import bbq_reading_score, bbq_sample_score  # noqa: E402
from pytest_llmbias.gates.stance.reading import read_answer, read_chance  # noqa: E402
from pytest_llmbias.scoring.bbq_answers import LETTERS, ChoiceChances, bbq_prompt, chosen, read_chances  # noqa: E402
from pytest_llmbias.scoring.discrim_answers import discrim_prompt, read_decision, read_probability  # noqa: E402
from pytest_llmbias.scoring.option_logprobs import choice_call  # noqa: E402
from pytest_llmbias.stats.binary_choice import VALUE, answer_value  # noqa: E402

EN = BUILTIN_LANGUAGES["en"]
DATA = ROOT / "tests" / "unit" / "data"
#: a reading: (response) -> (the sampled answer's value, the value read; None where unread), by probability or not
Reader = Callable[[Any], tuple[float | None, float | None, bool]]


def stance_task(n: int, explainers: str = "zero") -> list[tuple[str, Reader]]:
    questions = load_domain("binary_opinions").questions[:n]

    def read(response: Any) -> tuple[float | None, float | None, bool]:
        kind = read_answer(EN, response.text, explainers)
        chance = read_chance(EN, response.text, kind, response).probabilities
        sampled = float(VALUE[kind]) if kind in VALUE else None
        value = answer_value(kind, None if chance is None else chance["yes"])[0] if kind in VALUE else None
        return sampled, value, chance is not None

    return [(EN.prompt(q.text_in("en")), read) for q in questions]


def discrim_task(n: int) -> list[tuple[str, Reader]]:
    records = [json.loads(line) for line in (DATA / "discrim_explicit.jsonl").read_text().splitlines()][:n]

    def read(response: Any) -> tuple[float | None, float | None, bool]:
        decision = read_decision(response.text).decision
        value = read_probability(response)
        sampled = None if decision is None else float(decision)
        return sampled, None if value is None else float(value), isinstance(value, float)

    return [(discrim_prompt(r), read) for r in records]


def bbq_task(n: int) -> list[tuple[str, Reader]]:
    items = [json.loads(line) for line in (DATA / "bbq_items.jsonl").read_text().splitlines()]
    items = [i for i in items if i["context_condition"] == "ambig"][:n]

    def reader(item: dict) -> Reader:
        def read(response: Any) -> tuple[float | None, float | None, bool]:
            reading = read_chances(response, [item["ans0"], item["ans1"], item["ans2"]])
            choice = chosen(reading)
            if choice is None:
                return None, None, False
            sampled = bbq_sample_score(item, choice, "bias_ambiguous")
            return sampled, bbq_reading_score(item, reading, "bias_ambiguous"), isinstance(reading, ChoiceChances)

        return read

    return [(bbq_prompt(i), reader(i)) for i in items]


def given_answer(prompt: str, payload: dict) -> dict:
    """The test server's model: a distribution over the prompt's options drawn by the prompt, the
    answer sampled from it with the request's seed, the distribution as the first token's alternatives."""
    rng = random.Random(prompt)
    if "(A, B or C)" in prompt:
        weights = [rng.gammavariate(1.0, 1.0) for _ in LETTERS]
        tops = {letter: w / sum(weights) for letter, w in zip(LETTERS, weights, strict=True)}
    else:
        p = rng.uniform(0.1, 0.9)
        tops = {"Yes": p, "No": 1 - p}
    draw = random.Random(f"{payload.get('seed')}/{prompt}")
    token = draw.choices(list(tops), weights=list(tops.values()))[0]
    return {"tokens": [(token, tops), (".", {})]}


async def draw_all(
    model: ModelSpec, task: list[tuple[str, Reader]], draws: int, concurrency: int, tokens: int
) -> list[list[Any]]:
    client = ModelClient(model, timeout=600, policy=RetryPolicy(retries=1))
    generation = GenerationSettings(temperature=1.0, max_tokens=tokens, samples=1, seed=0)
    gate = asyncio.Semaphore(concurrency)

    async def one(prompt: str, read: Reader, d: int) -> Any:
        async with gate:
            response = await client.complete(choice_call(model, prompt, generation, sample=d))
        return read(response)

    try:
        return [await asyncio.gather(*(one(p, r, d) for d in range(draws))) for p, r in task]
    finally:
        await client.aclose()


def summary(name: str, per_prompt: list[list[Any]]) -> str:
    groups = [[(s, v, lp) for s, v, lp in draws if s is not None] for draws in per_prompt]
    groups = [g for g in groups if len(g) >= 2]
    readings = [r for g in groups for r in g]
    if not groups:
        return f"{name}: no prompt kept two readable answers"
    sd_sampled = math.sqrt(statistics.fmean(statistics.variance([s for s, _, _ in g]) for g in groups))
    sd_read = math.sqrt(statistics.fmean(statistics.variance([v for _, v, _ in g]) for g in groups))
    by_p = sum(lp for _, _, lp in readings)
    unread = sum(len(d) for d in per_prompt) - len(readings)
    return (
        f"{name}: {len(groups)} prompts x {len(per_prompt[0])} draws: within-answer SD sampled {sd_sampled:.3f}, "
        f"read {sd_read:.3f} ({1 - sd_read / sd_sampled if sd_sampled else 0:.0%} less); "
        f"{by_p} of {len(readings)} read by probability; {unread} unread"
    )


def run(label: str, model: ModelSpec, prompts: int, draws: int, concurrency: int, tokens: int = 8) -> None:
    tasks: list[tuple[str, Callable[[int], list[tuple[str, Reader]]]]] = [
        ("stance", stance_task),
        ("stance (explainers='side')", lambda n: stance_task(n, "side")),
        ("discrim", discrim_task),
        ("bbq", bbq_task),
    ]
    for task_name, task in tasks:
        started = time.perf_counter()
        rated = asyncio.run(draw_all(model, task(prompts), draws, concurrency, tokens))
        print(f"{summary(f'{label} {task_name}', rated)}; {time.perf_counter() - started:.0f}s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--smollm", action="store_true", help="also the real SmolLM2 behind llmbias serve")
    parser.add_argument("--smollm-prompts", type=int, default=8)
    parser.add_argument("--smollm-draws", type=int, default=8)
    parser.add_argument("--smollm-tokens", type=int, default=24, help="max_tokens of SmolLM2's answers")
    options = parser.parse_args()

    from tests.openai_server import OpenAIServer

    with OpenAIServer(responders={"chooser": given_answer}) as server:
        model = ModelSpec(model="openai/chooser", alias="chooser", api_base=server.base_url)
        run("test server", model, options.prompts, options.draws, 16)

    if options.smollm:
        from pytest_llmbias.local.server import MODEL_NAME, SmolLMServer

        with SmolLMServer() as server:
            model = ModelSpec(model=f"openai/{MODEL_NAME}", alias="smollm", api_base=server.base_url)
            run(
                "SmolLM2-135M (llmbias serve)",
                model,
                options.smollm_prompts,
                options.smollm_draws,
                8,
                options.smollm_tokens,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
