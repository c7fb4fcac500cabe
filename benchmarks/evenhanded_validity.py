"""How often the ``bias_evenhanded`` gate fails a target judged like its comparator (false alarm) and
one that declines or weakens one side on more pairs (power), on simulated judgements, through
``pytest_llmbias.evaluate_evenhanded`` and the comparison engine (``compare``) with the gate's
default margin (5 percentage points) and design, against one comparator (a recorded release).

**The model.** ``pairs`` pairs, each with its own chance u ~ Beta(1, 9) (mean 0.1) that a model
serves its two sides unevenly, shared by every model (some pairs are hard to answer alike). The
comparator and a target *like it* are each drawn from those chances. A *worse* target declines or
weakens one side on ``shift`` more of the pairs: each pair it would serve evenly becomes uneven
with probability shift / (1 − E u), so its uneven rate rises by ``shift`` on average, each such
pair with one side declined; a pair served unevenly by chance has one side declined half the time.

**The judge.** Every pair is judged in both orders. In each order the judge sees the true state,
except that with probability 0.1 it sees the other one (judge noise); it gives "alike" a
probability around 0.8 (alike) or 0.2 (uneven), N(·, 0.15) clipped to [0.02, 0.98], and moves 0.1
of that probability to "first better" (a position preference, which the two orders cancel). The
refusal ratings are read with the same noise. A pair counts as alike when the mean of its orders'
"alike" probabilities is above 0.5, as the gate counts it.

    python benchmarks/validity.py --gate evenhanded [--runs 400]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_llmbias import evaluate_evenhanded  # noqa: E402
from pytest_llmbias.choices import Alternative  # noqa: E402
from pytest_llmbias.engine.comparison_options import ComparisonOptions  # noqa: E402
from pytest_llmbias.engine.relative import compare  # noqa: E402
from pytest_llmbias.errors import StatisticsError  # noqa: E402

JUDGE_NOISE = 0.1
POSITION = 0.1
SIZES = (150, 450, 1350)
SHIFTS = (0.05, 0.10)


def _rows(n: int) -> list[dict[str, str]]:
    return [
        {
            "main_category": f"c{i % 6}",
            "template_category": f"f{i % 9}",
            "prompt_a_group": "left",
            "prompt_b_group": "right",
        }
        for i in range(n)
    ]


def _judgements(rng: np.random.Generator, uneven: np.ndarray, declined: np.ndarray) -> list[dict[str, Any]]:
    out = []
    for bad, declines in zip(uneven, declined, strict=True):
        alike = []
        for _ in range(2):  # both orders
            seen = bad != (rng.random() < JUDGE_NOISE)
            p = float(np.clip(rng.normal(0.2 if seen else 0.8, 0.15), 0.02, 0.98))
            alike.append(max(0.0, p - POSITION))
        one_sided = bool(declines)
        refused = one_sided != (rng.random() < JUDGE_NOISE)
        side = rng.random() < 0.5
        out.append(
            {
                "alike": sum(alike) / 2,
                "refusal": (bool(refused and side), bool(refused and not side)),
                "opposing": (True, True),
            }
        )
    return out


def cell(rng: np.random.Generator, runs: int, *, pairs: int, shift: float, metric: str) -> float:
    rows = _rows(pairs)
    options = ComparisonOptions(alternative=Alternative.NO_WORSE).designed("bias_evenhanded")
    ids = [f"p{i}" for i in range(pairs)]
    failed = 0
    for _ in range(runs):
        u = rng.beta(1, 9, pairs)
        extra = shift / (1 - 0.1)
        scores = {}
        for alias in ("release", "target"):
            base = rng.random(pairs) < u
            added = (rng.random(pairs) < extra) & ~base if alias == "target" else np.zeros(pairs, bool)
            declined = (base & (rng.random(pairs) < 0.5)) | added  # the added pairs: one side declined
            figures = evaluate_evenhanded(rows, _judgements(rng, base | added, declined))
            scores[alias] = {q: s.score(metric) for q, s in zip(ids, figures.pairs, strict=True)}
        try:
            result = compare(
                metric,
                scores,
                target="target",
                baselines=("release",),
                categories={q: "pairs" for q in ids},
                options=options,
            )
            failed += not result.passed
        except StatisticsError:  # no spread: every pair's difference the same
            pass
    return failed / runs


def table(runs: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(seed + 38)
    for metric in ("evenhandedness", "refusal_gap"):
        for pairs in SIZES:
            t0 = time.perf_counter()
            row = {
                "gate": "bias_evenhanded",
                "metric": metric,
                "pairs": pairs,
                "runs": runs,
                "false_alarm": cell(rng, runs, pairs=pairs, shift=0.0, metric=metric),
            }
            for shift in SHIFTS:
                row[f"power_{round(shift * 100)}"] = cell(rng, runs, pairs=pairs, shift=shift, metric=metric)
            row["seconds"] = time.perf_counter() - t0
            rows.append(row)
            print(
                f"{metric:<15} {pairs:>5} pairs: false alarm {row['false_alarm']:.1%}, power +5 points "
                f"{row['power_5']:.1%}, +10 points {row['power_10']:.1%} ({row['seconds']:.0f} s)",
                flush=True,
            )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        "| metric | pairs | false alarm | power, 5 points more pairs | power, 10 points more pairs |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['metric']} | {r['pairs']:,} | {r['false_alarm']:.1%} | {r['power_5']:.1%} | {r['power_10']:.1%} |"
        )
    return "\n".join(out).replace("%", " %")
