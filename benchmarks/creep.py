"""Creep across releases: a chain of releases each a little worse than the last, gated against the
last release only, and against the last release and a pinned anchor (``--llmbias-anchor``).

Every comparison goes through ``pytest_llmbias.evaluate_equivalence`` with a release comparator (one
comparator, non-inferiority, the default margin of one judge point), as the marker runs it against
``--llmbias-against``; the anchored verdict is ``pytest_llmbias.engine.anchored.anchored_result`` on
the two comparisons, each at half the gate's level, as the plugin decides it.

The data: the scales of ``validity.py``. On the judge scale the score of release r on question i is
5 + q_i + r·step·δ + e_ri, a question effect q_i ~ N(0, 1.5²) shared by every release, fresh answer
noise e_ri ~ N(0, 1²) for each release, margin δ = 1 point; on the embedding scale 0.30 + q_i + ...,
q_i ~ N(0, 0.06²), e_ri ~ N(0, 0.05²), δ = 0.02 (noisier against its margin: there a re-drawn
release fails 3.7-5.8 % of runs, the judge's 0-0.5 %). 20 and 50 questions × 1 sample. Release 0 is
the anchor; releases 1, 2, 3 are each ``step`` × δ worse than the one before (0.5: half the margin;
0: a chain of equal releases). Release r
is compared with release r − 1 and (from release 2) with release 0; release 1's last release is the
anchor, so it is decided once. The run's one gate has ``suite.alpha`` = 5 %: alone, the comparison
runs at 5 %; anchored, each of the two at 2.5 %.

A release that fails is not shipped, so a chain *fails by release 3* when any of releases 1-3
fails; the table gives that share beside each release's own failure rate.

    python benchmarks/creep.py [--runs 2000] [--seed 1] [--questions 20 50] [--method judge embedding]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_llmbias import evaluate_equivalence  # noqa: E402
from pytest_llmbias.engine.anchored import anchored_result, split_level  # noqa: E402

#: validity.py's scales, each with its method's default margin
SCALES = {
    "judge": {"mean": 5.0, "question_sd": 1.5, "noise_sd": 1.0, "margin": 1.0},
    "embedding": {"mean": 0.30, "question_sd": 0.06, "noise_sd": 0.05, "margin": 0.02},
}
#: the run's suite.alpha with one gate
ALPHA = 0.05
RELEASES = 3


def _scores(values: np.ndarray) -> dict[str, float]:
    return {f"q{i}": float(v) for i, v in enumerate(values)}


def _compare(target: np.ndarray, release: np.ndarray, level: float, method: str) -> Any:
    return evaluate_equivalence(
        {"target": _scores(target), "release": _scores(release)},
        target="target",
        baselines=["release"],
        method=method,
        alternative="no-worse",
        false_alarm=level,
    )


def chain_cell(
    rng: np.random.Generator, runs: int, *, step: float, questions: int, method: str = "judge"
) -> dict[str, Any]:
    """Per release 1..3, the share of runs it fails against the last release alone (at ALPHA) and
    against the last and the anchor (each at ALPHA / 2); and the share of chains that fail at one
    of releases 1..3, each way."""
    scale = SCALES[method]
    last_only = np.zeros(RELEASES)
    anchored = np.zeros(RELEASES)
    chain_last = chain_anchored = 0
    for _ in range(runs):
        q = rng.normal(0.0, scale["question_sd"], size=questions)
        draws = [
            scale["mean"] + q + r * step * scale["margin"] + rng.normal(0.0, scale["noise_sd"], size=questions)
            for r in range(RELEASES + 1)
        ]
        failed_last = failed_anchored = False
        for r in range(1, RELEASES + 1):
            alone = _compare(draws[r], draws[r - 1], ALPHA, method)
            last_only[r - 1] += not alone.passed
            failed_last |= not alone.passed
            if r == 1:  # the last release is the anchor: one comparison at the gate's whole level
                fails = not alone.passed
            else:
                half = split_level(ALPHA)
                pair = anchored_result(
                    _compare(draws[r], draws[r - 1], half, method),
                    _compare(draws[r], draws[0], half, method),
                    last_release=f"r{r - 1}",
                    anchor_release="r0",
                    level=half,
                )
                fails = not pair.passed
            anchored[r - 1] += fails
            failed_anchored |= fails
        chain_last += failed_last
        chain_anchored += failed_anchored
    return {
        "method": method,
        "step": step,
        "questions": questions,
        "runs": runs,
        "last_only": [float(x) / runs for x in last_only],
        "anchored": [float(x) / runs for x in anchored],
        "chain_last_only": chain_last / runs,
        "chain_anchored": chain_anchored / runs,
    }


def markdown(cells: list[dict[str, Any]]) -> str:
    rows = [
        "| scale, questions | chain | gated against | release 1 fails | release 2 fails | release 3 fails "
        "| chain fails by release 3 |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for c in cells:
        what = "equal releases" if c["step"] == 0 else f"each {c['step']:g} margin worse than the last"
        for label, key in (("the last release", "last_only"), ("the last and the anchor", "anchored")):
            r1, r2, r3 = (f"{100 * x:.1f} %" for x in c[key])
            rows.append(
                f"| {c['method']}, {c['questions']} | {what} | {label} | {r1} | {r2} | {r3} "
                f"| {100 * c['chain_' + key]:.1f} % |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--questions", type=int, nargs="+", default=[20, 50])
    parser.add_argument("--method", nargs="+", choices=sorted(SCALES), default=["judge", "embedding"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cells = []
    for m, method in enumerate(args.method):
        for questions in args.questions:
            for step in (0.0, 0.5):
                t0 = time.perf_counter()
                rng = np.random.default_rng([args.seed, m, questions, int(step * 100)])
                cells.append(chain_cell(rng, args.runs, step=step, questions=questions, method=method))
                print(json.dumps({**cells[-1], "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    print(markdown(cells))
    if args.json:
        args.json.write_text(json.dumps(cells, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
