"""How many samples of each item should an undecided comparison ask by default
(``collection.max_samples``)?

A comparison that can show neither a pass nor a regression is *underpowered*; with
``collection.max_samples`` above the gate's samples it asks one more independent sample of every
item of every model it compares and decides again, look after look, each look at its share of the
error (Bonferroni: level / L and TOST alpha / L over L = max_samples − samples + 1 looks; see
``pytest_llmbias.engine.extension``). This benchmark takes those looks through
``evaluate_equivalence`` — the public function the marker calls — with the arguments the
extension gives each look (``false_alarm=level / L``, ``alpha=(1 − power − 0.01) / L``, the scores
averaged over the first s samples), on the judge scale with the default margin (one point):

- shapes: question-dominated (question SD 1.5, answer noise 1) and noise-dominated (no question
  effect; noise 1.5 and 2.5), on 50 questions;
- comparators: three baselines (τ = 0.3 between them, compared with their mean, equivalence) and a
  recorded release (no-worse);
- a false-alarm level of 0.05 / 8 (a gate's share in a suite of eight comparisons).

Per cell and max_samples (1, 3, 4, 5): the share of runs left underpowered, the false alarm
(target at its comparator), the power at the margin, and the mean samples per item a good target
and one at the margin ask (the cost).

    python benchmarks/sampling_budget.py             # 200 runs a cell
    python benchmarks/sampling_budget.py --runs 60   # quicker
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_llmbias import evaluate_equivalence  # noqa: E402
from pytest_llmbias.stats.design import pass_alpha  # noqa: E402

QUESTIONS = 50
LEVEL = 0.05 / 8
POWER = 0.8
SHAPES = {"question-dominated": (1.5, 1.0), "noise, 1.5": (0.0, 1.5), "noise, 2.5": (0.0, 2.5)}
BUDGETS = (1, 3, 4, 5)


def draw(rng: np.random.Generator, shape: str, comparator: str, shift: float, samples: int) -> dict:
    """alias -> question -> per-sample judge scores (5 + question + model + noise)."""
    q_sd, noise = SHAPES[shape]
    q = rng.normal(0, q_sd, QUESTIONS)
    comparators = ("b0", "b1", "b2") if comparator == "baselines" else ("release",)
    offsets = rng.normal(0, 0.3, len(comparators)) if comparator == "baselines" else np.zeros(1)
    out = {}
    for alias, o in zip(comparators, offsets, strict=True):
        out[alias] = {f"q{i}": (5 + q[i] + o + rng.normal(0, noise, samples)).tolist() for i in range(QUESTIONS)}
    t = offsets.mean() + shift
    out["t"] = {f"q{i}": (5 + q[i] + t + rng.normal(0, noise, samples)).tolist() for i in range(QUESTIONS)}
    return out


def decide(scores: dict, comparator: str, budget: int) -> tuple[bool, bool, int]:
    """The extension's looks: (failed, underpowered at the last look taken, samples used)."""
    looks = budget  # samples 1 .. budget: L = budget looks
    baselines = [a for a in scores if a != "t"]
    alternative = "equivalent" if comparator == "baselines" else "no-worse"
    result = None
    for s in range(1, budget + 1):
        cut = {a: {q: v[:s] for q, v in by_q.items()} for a, by_q in scores.items()}
        result = evaluate_equivalence(
            cut,
            target="t",
            baselines=baselines,
            alternative=alternative,
            false_alarm=LEVEL / looks,
            alpha=round(pass_alpha(POWER) / looks, 12),
        )
        (method,) = result.methods
        if not method.underpowered:
            return not result.passed, False, s
    assert result is not None
    return not result.passed, True, budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    print(f"judge scale, margin 1, {QUESTIONS} questions, false-alarm level {LEVEL:.4g}, {args.runs} runs a cell\n")
    print(
        "| comparator | shape | max_samples | underpowered (good) | false alarm | power at margin "
        "| underpowered (at margin) | samples asked (good) | samples asked at margin |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for comparator in ("baselines", "release"):
        for shape in SHAPES:
            for budget in BUDGETS:
                rng = np.random.default_rng(zlib.crc32(f"{comparator}/{shape}".encode()))
                fa = und_good = power = und_bad = used = used_good = 0
                for _ in range(args.runs):
                    failed, und, s = decide(draw(rng, shape, comparator, 0.0, budget), comparator, budget)
                    fa += failed
                    und_good += und
                    used_good += s
                    failed, und, s = decide(draw(rng, shape, comparator, 1.0, budget), comparator, budget)
                    power += failed
                    und_bad += und
                    used += s
                r = args.runs
                print(
                    f"| {comparator} | {shape} | {budget} | {und_good / r:.1%} | {fa / r:.1%} | {power / r:.1%} "
                    f"| {und_bad / r:.1%} | {used_good / r:.2f} | {used / r:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
