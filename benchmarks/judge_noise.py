"""How a noisy judge changes the judge gates, and what the test-retest rule does about it.

The model of ``validity.py``'s judge scale gives each answer a true score: 5 + q_i + m_j + e_ij
(question effect SD 1.5, answer noise SD 1, τ = 0), for a target and 3 baselines on 50 questions.
A judge reads an answer's score with its own noise: its rating is the true score plus N(0, σ²),
rounded to a whole number and kept on the 1-10 scale; σ is the judge's *retest SD* (the SD of two
ratings of one answer is σ√2). The gate (``evaluate_equivalence``, the marker's defaults) sees
the ratings. The test-retest rule rates ``retest`` answers of the 200 a second time (a new draw of
the judge's noise) and, when Krippendorff's alpha of the two draws (``judge_agreement``, the
function the gate calls) is below the minimum, the judge method is inconclusive: the gate fails.

For each σ (0, 0.5, 1, 2) and each minimum: the false alarm (a target like its baselines fails)
and the power (a target 1.5 points worse fails), without and with the rule, and how often the rule
alone fires; and, without the rule, the power against a target half as far off (0.75 points),
where the judge's noise costs the most.

    python benchmarks/judge_noise.py [--runs 400] [--retest 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_llmbias import evaluate_equivalence  # noqa: E402
from pytest_llmbias.errors import StatisticsError  # noqa: E402
from pytest_llmbias.stats.agreement import judge_agreement  # noqa: E402

SIGMAS = (0.0, 0.5, 1.0, 2.0)
MINIMUMS = (0.5, 0.667, 0.8)
QUESTION_SD, NOISE_SD, MEAN, SHIFT = 1.5, 1.0, 5.0, 1.5
BASELINES, QUESTIONS = 3, 50


def _rate(rng: np.random.Generator, truth: np.ndarray, sigma: float) -> np.ndarray:
    return np.clip(np.rint(truth + rng.normal(0.0, sigma, size=truth.shape)), 1, 10)


def one_run(rng: np.random.Generator, *, sigma: float, shift: float, retest: int) -> tuple[bool, float | None]:
    """(did the gate pass on the judge's ratings, the retest alpha — None when every rating of the
    sample was the same in both draws, which the gate takes as agreement)."""
    q = rng.normal(0.0, QUESTION_SD, size=QUESTIONS)
    truth = MEAN + q[None, :] + rng.normal(0.0, NOISE_SD, size=(BASELINES + 1, QUESTIONS))
    truth[0] += shift
    first = _rate(rng, truth, sigma)
    names = ["target", *(f"b{i}" for i in range(BASELINES))]
    scores = {n: {f"q{i}": float(first[j, i]) for i in range(QUESTIONS)} for j, n in enumerate(names)}
    passed = evaluate_equivalence(scores, target="target", baselines=names[1:], method="judge").passed
    if retest == 0:
        return passed, None
    picked = rng.choice(first.size, size=min(retest, first.size), replace=False)
    again = _rate(rng, truth.reshape(-1)[picked], sigma)
    try:
        alpha = judge_agreement(
            {
                "first": {str(k): float(first.reshape(-1)[k]) for k in picked},
                "retest": {str(k): float(v) for k, v in zip(picked, again, strict=True)},
            },
            resamples=1,
        ).alpha
    except StatisticsError:
        alpha = None
    return passed, alpha


def table(runs: int, seed: int, retest: int = 20) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for sigma in SIGMAS:
        t0 = time.perf_counter()
        like = [one_run(rng, sigma=sigma, shift=0.0, retest=retest) for _ in range(runs)]
        shifted = [one_run(rng, sigma=sigma, shift=SHIFT, retest=retest) for _ in range(runs)]
        half = [one_run(rng, sigma=sigma, shift=SHIFT / 2, retest=0)[0] for _ in range(runs)]
        row: dict[str, Any] = {
            "gate": "judge_noise",
            "sigma": sigma,
            "retest": retest,
            "runs": runs,
            "false_alarm": 1 - np.mean([p for p, _ in like]),
            "power": 1 - np.mean([p for p, _ in shifted]),
            "power_half": 1 - float(np.mean(half)),
            "median_alpha": float(np.median([a if a is not None else 1.0 for _, a in like])),
        }
        for minimum in MINIMUMS:

            def fails(run: tuple[bool, float | None], minimum: float = minimum) -> bool:
                passed, alpha = run
                return not passed or (alpha is not None and alpha < minimum)

            row[f"false_alarm@{minimum}"] = float(np.mean([fails(r) for r in like]))
            row[f"power@{minimum}"] = float(np.mean([fails(r) for r in shifted]))
            row[f"flagged@{minimum}"] = float(np.mean([a is not None and a < minimum for _, a in like + shifted]))
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(format_row(row), flush=True)
    return rows


def format_row(row: dict[str, Any]) -> str:
    parts = [
        f"judge retest SD {row['sigma']:.1f} (retest {row['retest']}, median alpha {row['median_alpha']:.2f}): "
        f"no rule {row['false_alarm']:.1%} / {row['power']:.1%} (+0.75: {row['power_half']:.1%})"
    ]
    parts += [
        f"min {m}: {row[f'false_alarm@{m}']:.1%} / {row[f'power@{m}']:.1%} (flags {row[f'flagged@{m}']:.1%})"
        for m in MINIMUMS
    ]
    return "; ".join(parts)


def markdown(rows: list[dict[str, Any]]) -> str:
    head = (
        "| judge's retest SD | median retest alpha | no rule: false alarm / power (+1.5) / power (+0.75) | "
        + " | ".join(f"min alpha {m}: false alarm / power (judge flagged)" for m in MINIMUMS)
        + " |"
    )
    out = [head, "|---:|---:|---:|" + "---:|" * len(MINIMUMS)]
    for r in rows:
        cells = [f"{r[f'false_alarm@{m}']:.1%} / {r[f'power@{m}']:.1%} ({r[f'flagged@{m}']:.1%})" for m in MINIMUMS]
        out.append(
            f"| {r['sigma']:g} | {r['median_alpha']:.2f} | {r['false_alarm']:.1%} / {r['power']:.1%} / "
            f"{r['power_half']:.1%} | " + " | ".join(cells) + " |"
        )
    return "\n".join(out).replace("%", " %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--retest", type=int, default=20)
    options = parser.parse_args()
    rows = table(options.runs, options.seed, options.retest)
    print()
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
