"""What group-sequential looks cost and save: false alarm, power and the calls asked, against the
fixed design at the same maximum, on simulated data through the function the marker calls.

Every gate kind: ``bias_benchmark`` (BBQ, ``bias_ambiguous``) at its default size (800 items, about 400 ambiguous
ones, two baselines), the answer model of ``benchmark_validity.py``: a target like its baselines,
one picking the stereotyped answer in 10 % more of the ambiguous items (the validity table's
effect), and one halfway (5 %); and ``bias_equivalent``, ``bias_impact_ratio``, ``bias_index``,
``bias_stance`` and ``bias_preference`` at the validity table's default cells through ``run_looks``
and their public functions (``sequential_kinds.py``): a target like its baselines, one shifted by
the validity table's effect, one halfway. For looks 1, 2 and 4 and both spendings, each on the same
simulated data: how often each target fails, and the share of the fixed design's calls asked on
average (answers and what follows them alike: judge ratings, trials).

    python benchmarks/sequential.py [--runs 200] [--gate benchmark|equivalent|impact_ratio|index|stance|preference|all]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from benchmark_validity import BASE, CONCENTRATION, _answers, _moved, items  # noqa: E402

from pytest_llmbias import evaluate_benchmark  # noqa: E402
from pytest_llmbias.domains.benchmarks import item_key  # noqa: E402

DESIGNS = ((1, "obrien-fleming"), (2, "obrien-fleming"), (4, "obrien-fleming"), (2, "pocock"), (4, "pocock"))
CASES = (("like", 0.0), ("halfway", 0.05), ("shifted", 0.10))


def table(runs: int, seed: int, n: int = 400, baselines: int = 2) -> list[dict[str, Any]]:
    """Every design on the same simulated answers (common random numbers: the differences between
    designs are not noise between separate simulations)."""
    rng = np.random.default_rng(seed)
    recs, options = items(n)
    keys = [item_key("bbq", r) for r in recs]
    names = [f"b{j}" for j in range(baselines)]
    failed = {(d, c): 0 for d in DESIGNS for c, _ in CASES}
    asked = {(d, c): 0.0 for d in DESIGNS for c, _ in CASES}
    t0 = time.perf_counter()
    for run in range(runs):
        for case, shift in CASES:
            p = rng.dirichlet(CONCENTRATION * np.array(BASE), size=n)
            answers = {
                alias: _answers(rng, _moved(p, shift) if alias == "target" and shift else p, options, keys, 1)
                for alias in ("target", *names)
            }
            for looks, spending in DESIGNS:
                result = evaluate_benchmark(
                    "bbq", recs, answers, target="target", baselines=names, looks=looks, spending=spending
                )
                failed[(looks, spending), case] += not result.passed
                q = result.sequential
                asked[(looks, spending), case] += 1.0 if q is None else q["items"] / q["items_max"]
        if (run + 1) % 25 == 0:
            print(f"{run + 1} runs, {time.perf_counter() - t0:.0f} s", flush=True)
    rows = []
    for looks, spending in DESIGNS:
        row: dict[str, Any] = {"gate": "bias_benchmark (BBQ)", "looks": looks, "spending": spending, "runs": runs}
        for case, _ in CASES:
            row[f"fails_{case}"] = failed[(looks, spending), case] / runs
            row[f"calls_{case}"] = asked[(looks, spending), case] / runs
        rows.append(row)
        print(
            f"looks={looks} {spending:<15} "
            + "  ".join(f"{c}: fails {row[f'fails_{c}']:6.1%} calls {row[f'calls_{c}']:5.0%}" for c, _ in CASES),
            flush=True,
        )
    return rows


def kind_table(name: str, runs: int, seed: int) -> list[dict[str, Any]]:
    """One gate kind of ``sequential_kinds.KINDS`` by design, on common random numbers."""
    from sequential_kinds import KINDS

    from pytest_llmbias import run_looks

    kind = KINDS[name]
    rng = np.random.default_rng(seed)
    failed = {(d, c): 0 for d in DESIGNS for c, _ in kind.cases}
    asked = {(d, c): 0.0 for d in DESIGNS for c, _ in kind.cases}
    t0 = time.perf_counter()
    for run in range(runs):
        for case, shift in kind.cases:
            data, units = kind.simulate(rng, shift)
            units = [str(u) for u in rng.permutation(units)]  # the marker's seeded order: unrelated to the data

            def evaluate(kept: tuple[str, ...], nominal: float, first: Any, data: Any = data) -> Any:
                return kind.evaluate(data, kept, nominal, first)

            for looks, spending in DESIGNS:
                size, extra = divmod(len(units), looks)
                cuts = np.cumsum([0] + [size + (1 if k < extra else 0) for k in range(looks)])
                parts = [units[cuts[k] : cuts[k + 1]] for k in range(looks)]
                result, _, _ = run_looks(evaluate, parts, alpha=0.05, spending=spending)
                failed[(looks, spending), case] += not result.passed
                q = result.sequential
                asked[(looks, spending), case] += q["units"] / q["units_max"]
        if (run + 1) % 50 == 0:
            print(f"{kind.gate}: {run + 1} runs, {time.perf_counter() - t0:.0f} s", flush=True)
    rows = []
    for looks, spending in DESIGNS:
        row: dict[str, Any] = {"gate": kind.gate, "looks": looks, "spending": spending, "runs": runs}
        for case, _ in kind.cases:
            row[f"fails_{case}"] = failed[(looks, spending), case] / runs
            row[f"calls_{case}"] = asked[(looks, spending), case] / runs
        rows.append(row)
        print(
            f"{kind.gate} looks={looks} {spending:<15} "
            + "  ".join(f"{c}: fails {row[f'fails_{c}']:6.1%} calls {row[f'calls_{c}']:5.0%}" for c, _ in kind.cases),
            flush=True,
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        "| gate | looks | spending | false alarm (like) | fails halfway | power (shifted) | calls: like | "
        "halfway | shifted |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['gate']} | {r['looks']} | {r['spending'] if r['looks'] > 1 else '-'} | "
            f"{r['fails_like']:.1%} | {r['fails_halfway']:.1%} | {r['fails_shifted']:.1%} | "
            f"{r['calls_like']:.0%} | {r['calls_halfway']:.0%} | {r['calls_shifted']:.0%} |"
        )
    return "\n".join(out).replace("%", " %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--json", type=Path)
    kinds = ("equivalent", "impact_ratio", "index", "stance", "preference")
    parser.add_argument("--gate", choices=("benchmark", *kinds, "all"), default="all")
    options = parser.parse_args()
    rows = table(options.runs, options.seed) if options.gate in ("benchmark", "all") else []
    for name in kinds:
        if options.gate in (name, "all"):
            rows += kind_table(name, options.runs, options.seed)
    if options.json:
        options.json.write_text(json.dumps(rows, indent=2))
    print()
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
