"""Lenient or strict by default? False alarms and misses of the checks whose pass only says that a
violation was not shown, at CI sizes, with an underpowered pass counted as a pass (lenient, the
default) and as a failure (``--llmbias-strict``).

Each check is run through the public function its marker calls, on the simulated data of
``validity.py`` at smaller and larger sizes:

- ``bias_stance(gate="agreement")``: 3 baselines, 4 rounds, the questions' leans of validity.py;
  a *good* target shares them, a *biased* one turns its lean round on 30 % of the questions;
- ``bias_impact_ratio`` (``fail_on="significant"``): 4 groups, feature values N(0, 1); a *biased*
  target's last group is 0.5 SD lower (true min impact ratio about 0.64);
- ``bias_index(relative=False, max_index=...)``: 9 dimensions, the bound the good model's expected
  index (its worst case); a *biased* target is loaded by +0.30 on two dimensions.

    python benchmarks/underpowered.py [--runs 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import validity  # noqa: E402

from pytest_llmbias import evaluate_bias_index, evaluate_impact_ratio, evaluate_stance  # noqa: E402


def _stance(rng: np.random.Generator, n: int, biased: bool) -> tuple[bool, bool, bool]:
    rounds = 4
    lean = np.where(rng.random(n) < validity.STANCE["clear"], np.where(rng.random(n) < 0.5, 0.9, 0.1), 0.5)
    kinds: dict[str, Any] = {}
    for alias in ("target", "b0", "b1", "b2"):
        p = np.where(rng.random(n) < validity.STANCE["flip"], 1 - lean, lean) if biased and alias == "target" else lean
        yes = rng.random((n, rounds)) < p[:, None]
        kinds[alias] = {"en": {f"q{i}": ["yes" if y else "no" for y in row] for i, row in enumerate(yes)}}
    lenient = evaluate_stance(kinds, target="target", baselines=["b0", "b1", "b2"], gate="agreement")
    strict = evaluate_stance(kinds, target="target", baselines=["b0", "b1", "b2"], gate="agreement", strict=True)
    return lenient.passed, strict.passed, lenient.underpowered


def _impact(rng: np.random.Generator, n: int, biased: bool) -> tuple[bool, bool, bool]:
    groups = 4
    values = {
        f"p{g}": list(rng.normal(-0.5 if biased and g == groups - 1 else 0.0, 1.0, size=n)) for g in range(groups)
    }
    result = evaluate_impact_ratio(
        {"target": values}, {f"p{g}": f"g{g}" for g in range(groups)}, target="target", resamples=300
    )
    return result.passed, dataclasses.replace(result, strict=True).passed, result.underpowered


def _index(rng: np.random.Generator, n: int, biased: bool, bound: float) -> tuple[bool, bool, bool]:
    validity.INDEX["prompts"] = n
    values, dims, _ = validity.simulate_annotations(rng, baselines=0, tau=0.0, shift=0.30 if biased else 0.0)
    result = evaluate_bias_index(
        values, values, dims, target="target", baselines=(), relative=False, max_index=bound, resamples=500
    )
    return result.passed, dataclasses.replace(result, strict=True).passed, result.underpowered


def table(runs: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    validity.INDEX["prompts"] = 10
    bound = validity.expected_index(rng, draws=2000)
    cells = [("bias_stance agreement", "questions", n, lambda b, n=n: _stance(rng, n, b)) for n in (12, 40, 80)]
    cells += [
        ("bias_impact_ratio significant", "answers per group", n, lambda b, n=n: _impact(rng, n, b))
        for n in (12, 50, 100)
    ]
    cells += [
        ("bias_index max_index", "prompts per dimension", n, lambda b, n=n: _index(rng, n, b, bound))
        for n in (2, 5, 10)
    ]
    rows = []
    for check, unit, n, run in cells:
        good = [run(False) for _ in range(runs)]
        bad = [run(True) for _ in range(runs)]
        row = {
            "check": check,
            "unit": unit,
            "n": n,
            "runs": runs,
            "lenient_false_alarm": 1 - np.mean([g[0] for g in good]),
            "strict_false_alarm": 1 - np.mean([g[1] for g in good]),
            "lenient_miss": float(np.mean([b[0] for b in bad])),
            "strict_miss": float(np.mean([b[1] for b in bad])),
            "underpowered_good": float(np.mean([g[2] for g in good])),
        }
        rows.append(row)
        print(
            f"{check:<30} {unit} {n:<4} lenient: false alarm {row['lenient_false_alarm']:6.1%}, miss "
            f"{row['lenient_miss']:6.1%} | strict: false alarm {row['strict_false_alarm']:6.1%}, miss "
            f"{row['strict_miss']:6.1%} | good passes underpowered {row['underpowered_good']:6.1%}",
            flush=True,
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    out = ["| check | size | lenient: false alarm / miss | strict: false alarm / miss |", "|---|---:|---:|---:|"]
    for r in rows:
        out.append(
            f"| {r['check']} | {r['n']} {r['unit']} | {r['lenient_false_alarm']:.1%} / {r['lenient_miss']:.1%} | "
            f"{r['strict_false_alarm']:.1%} / {r['strict_miss']:.1%} |"
        )
    return "\n".join(out).replace("%", " %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261125)
    options = parser.parse_args()
    rows = table(options.runs, options.seed)
    print()
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
