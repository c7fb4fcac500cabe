"""How often a suite of comparison gates fails a good release, and how often each catches a release
worse by its margin, on data shaped unlike the simulation that chose the defaults.

Each run draws a suite of ``--gates`` judge-scored ``bias_equivalent`` gates (each on its own domain),
decided through ``evaluate_equivalence`` — what the marker calls — with the run's ``suite.alpha``
shared out by Bonferroni (each gate at alpha / gates, the least Holm's step-down gives it) and
``suite.power`` at its default. Judge scores are 5 + question effect (SD ``q``) + model offset (SD
``tau``, against baselines only) + answer noise (SD ``noise``), averaged over ``samples`` answers a
question. *Against a release*: the target and one recorded comparator (no-worse); *against baselines*:
three baselines (equivalence). A *good* release is drawn like its comparator; a *worse* one is shifted
by the margin (one judge point) on one gate. The table prints, per cell, the suite's false alarm,
the power of the shifted gate, and the share of gates whose design was sized.

    python benchmarks/suite_validity.py --runs 400
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_llmbias import evaluate_equivalence  # noqa: E402

SHAPES = {  # name -> (question SD, answer noise SD)
    "question-dominated": (1.5, 1.0),
    "noise 0.5": (0.0, 0.5),
    "noise 1.0": (0.0, 1.0),
    "noise 1.5": (0.0, 1.5),
}


def draw(rng: np.random.Generator, *, models: list[str], questions: int, samples: int, q_sd: float, noise: float,
         tau: float, shift: float) -> dict[str, dict[str, list[float]]]:
    q = rng.normal(0, q_sd, questions)
    out = {}
    for alias in models:
        offset = rng.normal(0, tau) + (shift if alias == "tgt" else 0.0)
        out[alias] = {f"q{i}": list(5 + q[i] + offset + rng.normal(0, noise, samples)) for i in range(questions)}
    return out


def cell(rng: np.random.Generator, *, against: str, shape: str, tau: float, samples: int, questions: int,
         gates: int, runs: int, alpha: float) -> dict[str, float]:
    q_sd, noise = SHAPES[shape]
    baselines = ["rel"] if against == "release" else ["b0", "b1", "b2"]
    alternative = "no-worse" if against == "release" else "equivalent"
    tau = 0.0 if against == "release" else tau
    level = alpha / gates
    suite_fails = caught = sized = 0
    for _ in range(runs):
        failed_any = False
        for g in range(gates):
            scores = draw(rng, models=["tgt", *baselines], questions=questions, samples=samples, q_sd=q_sd, noise=noise,
                          tau=tau, shift=0.0)
            result = evaluate_equivalence(scores, target="tgt", baselines=baselines, alternative=alternative,
                                          false_alarm=level)
            failed_any |= not result.passed
            sized += bool(result.methods[0].design and result.methods[0].design.sized)
        suite_fails += failed_any
        worse = draw(rng, models=["tgt", *baselines], questions=questions, samples=samples, q_sd=q_sd, noise=noise,
                     tau=tau, shift=1.0)
        caught += not evaluate_equivalence(worse, target="tgt", baselines=baselines, alternative=alternative,
                                           false_alarm=level).passed
    return {"false_alarm": suite_fails / runs, "power": caught / runs, "sized": sized / (runs * gates)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--gates", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{args.gates} bias_equivalent (judge) gates, suite.alpha {args.alpha:g} (Bonferroni), suite.power 0.8, "
          f"margin 1 judge point, {args.runs} runs a cell")
    print("| against | shape | τ | samples | questions | suite false alarm | power at the margin | sized |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    grid = itertools.product(("release", "baselines"), SHAPES, (0.0, 0.3), (1, 3), (20, 50, 100))
    for against, shape, tau, samples, questions in grid:
        if against == "release" and tau:
            continue
        r = cell(rng, against=against, shape=shape, tau=tau, samples=samples, questions=questions, gates=args.gates,
                 runs=args.runs, alpha=args.alpha)
        print(f"| {against} | {shape} | {tau:g} | {samples} | {questions} | {r['false_alarm']:.1%} | "
              f"{r['power']:.1%} | {r['sized']:.0%} |", flush=True)


if __name__ == "__main__":
    main()
