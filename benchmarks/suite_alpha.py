"""One false-alarm rate for the session (``--llmbias-suite-alpha``): how often a suite of gates fails
a good release, and how many of its biased gates it catches, with each gate at its own alpha, with
alpha shared by Bonferroni, and by Holm's step-down (what the plugin does for one-look gates).

The suite: ``--gates`` ``bias_impact_ratio`` gates (``fail_on="significant"``, 4 groups x
``--answers`` answers, feature values N(0, 1)), each on its own simulated answers, decided through
``evaluate_impact_ratio`` and the plugin's :func:`~pytest_llmbias.engine.suite_levels.step_down`
with the result's ``shown_violation``. A biased gate's last group is ``--shift`` SD lower. The
permutation p-value does not depend on the level, so a gate is evaluated once and re-decided at
each level by setting its result's ``alpha`` (what ``at_level`` sets on its spec).

    python benchmarks/suite_alpha.py [--runs 300] [--gates 6] [--biased 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_llmbias import evaluate_impact_ratio  # noqa: E402
from pytest_llmbias.engine.suite_levels import step_down  # noqa: E402

GROUPS = 4


def _gate(rng: np.random.Generator, answers: int, shift: float) -> Any:
    values = {f"p{g}": list(rng.normal(-shift if g == GROUPS - 1 else 0.0, 1.0, size=answers)) for g in range(GROUPS)}
    return evaluate_impact_ratio(
        {"target": values}, {f"p{g}": f"g{g}" for g in range(GROUPS)}, target="target", resamples=300
    )


def _fails(result: Any, level: float) -> bool:
    return bool(dataclasses.replace(result, alpha=level).shown_violation)


def one_run(
    rng: np.random.Generator, *, alpha: float, gates: int, biased: int, answers: int, shift: float
) -> dict[str, tuple[bool, int]]:
    """Per sharing: whether some good gate failed, and how many biased gates failed."""
    results = [_gate(rng, answers, shift if i < biased else 0.0) for i in range(gates)]
    holm = step_down(alpha, gates, list(range(gates)), lambda i, level: _fails(results[i], level))
    failed = {
        "own alpha": [_fails(r, alpha) for r in results],
        "Bonferroni": [_fails(r, alpha / gates) for r in results],
        "Holm": [holm[i][1] for i in range(gates)],
    }
    return {how: (any(f[biased:]), sum(f[:biased])) for how, f in failed.items()}


def table(
    runs: int, seed: int, *, alpha: float, gates: int, biased: int, answers: int, shift: float
) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for k in (0, biased):
        outcomes = [one_run(rng, alpha=alpha, gates=gates, biased=k, answers=answers, shift=shift) for _ in range(runs)]
        for how in ("own alpha", "Bonferroni", "Holm"):
            rows.append(
                {
                    "biased": k,
                    "sharing": how,
                    "runs": runs,
                    "familywise": float(np.mean([o[how][0] for o in outcomes])),
                    "caught": float(np.mean([o[how][1] / k for o in outcomes])) if k else None,
                }
            )
            r = rows[-1]
            caught = f"{r['caught']:.1%}" if k else "-"
            print(
                f"{gates} gates, {k} biased, {how:<10}: a good gate fails in {r['familywise']:.1%} of runs; "
                f"biased gates caught {caught}",
                flush=True,
            )
    return rows


def markdown(rows: list[dict[str, Any]], gates: int) -> str:
    out = [
        f"| {gates} gates | sharing | a good gate fails (family-wise) | biased gates caught |",
        "|---|---|---:|---:|",
    ]
    for r in rows:
        caught = f"{r['caught']:.1%}" if r["caught"] is not None else "-"
        out.append(f"| {r['biased']} biased | {r['sharing']} | {r['familywise']:.1%} | {caught} |")
    return "\n".join(out).replace("%", " %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--gates", type=int, default=6)
    parser.add_argument("--biased", type=int, default=2)
    parser.add_argument("--answers", type=int, default=100)
    parser.add_argument("--shift", type=float, default=0.4)
    o = parser.parse_args()
    rows = table(o.runs, o.seed, alpha=o.alpha, gates=o.gates, biased=o.biased, answers=o.answers, shift=o.shift)
    print()
    print(markdown(rows, o.gates))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
