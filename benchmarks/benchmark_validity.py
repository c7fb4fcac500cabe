"""How often the ``bias_benchmark`` gate fails a good model (false alarm) and a biased one (power),
on simulated BBQ answers, through ``pytest_llmbias.evaluate_benchmark`` (the function the marker
calls) with its defaults.

**The model.** The ambiguous items of a BBQ subset (the gate's default metric, ``bias_ambiguous``,
is computed on them; a subset of ``limit`` items holds about ``limit / 2``). Each item has its own
answer probabilities, shared by every model: (unknown, biased, other) ~ Dirichlet(c · (0.7, 0.2,
0.1)) with c = 2, so items differ as BBQ's do (some are nearly always answered with the
stereotype). A model answers each item once per sample, a draw from those probabilities; with
``tau`` > 0 each model also moves a share m_j ~ N(0, τ²) of every item's mass between "unknown"
and the biased answer (models differ a little in how often they guess). A *good* target answers
at the baselines' mean, the reference the default compares with: each item's probabilities are the
mean of theirs, so its expected count of each answer is their mean count (``population=True``, the
``reference="population"`` rows, draws it like them instead, a share m of its own); a *biased* one
picks the stereotyped answer in 10 % more of the ambiguous items (0.10 of each item's probability
moved to the biased answer from "unknown", or from "other" where "unknown" has less). At τ = 0 the
two are the same target.

**discrim-eval.** ``scenarios`` decision scenarios × the 45 people of the balanced grid the loader
keeps at k = 1 (ages 40, 60, 80 × 3 genders × 5 races). Each scenario has its own base rate of yes
(logit N(0.5, 1)) and each person a small effect of their own (logit N(0, 0.3²)), shared by every
model; each model decides once per sample. A *biased* target is 1 logit harder on Black applicants.
The gate tests every group (8 of them) and passes only if each passes. Half as many runs as BBQ.

    python benchmarks/validity.py --gate benchmark [--runs 400]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_llmbias import evaluate_benchmark  # noqa: E402
from pytest_llmbias.domains.benchmarks import item_key  # noqa: E402
from pytest_llmbias.stats.bbq import UNKNOWN_OPTIONS, biased_options  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "unit" / "data" / "bbq_items.jsonl"
SHIFT = 0.10
CONCENTRATION = 2.0
BASE = (0.7, 0.2, 0.1)


def templates() -> list[dict[str, Any]]:
    """The fixture's ambiguous items with one biased option and one other option naming a person."""
    out = []
    for line in FIXTURE.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item["context_condition"] == "ambig" and len(biased_options(item)) == 1:
            out.append(item)
    return out


def items(n: int) -> tuple[list[dict[str, Any]], np.ndarray]:
    """``n`` ambiguous items (the fixture's, renumbered) and each one's option indices
    (unknown, biased, other)."""
    base = templates()
    out, options = [], []
    for i in range(n):
        item = dict(base[i % len(base)], example_id=1000 + i)
        unknown = next(k for k in range(3) if item[f"ans{k}"] in UNKNOWN_OPTIONS)
        biased = next(iter(biased_options(item)))
        other = ({0, 1, 2} - {unknown, biased}).pop()
        out.append(item)
        options.append((unknown, biased, other))
    return out, np.array(options)


def _answers(
    rng: np.random.Generator, p: np.ndarray, options: np.ndarray, keys: list[str], samples: int
) -> dict[str, list[int]]:
    cum = np.cumsum(p, axis=1)
    draws = (rng.random((len(keys), samples, 1)) > cum[:, None, :2]).sum(axis=2)  # 0 unknown, 1 biased, 2 other
    return {k: [int(options[i, d]) for d in draws[i]] for i, k in enumerate(keys)}


def _moved(p: np.ndarray, share: np.ndarray | float) -> np.ndarray:
    """``p`` with ``share`` of each item's mass moved from "unknown" (then "other") to the biased
    answer (a negative share moves it back, from the biased answer to "unknown")."""
    q = p.copy()
    share = np.broadcast_to(np.asarray(share, dtype=float), (len(p),))
    up = np.clip(share, 0, None)
    from_unknown = np.minimum(up, q[:, 0])
    from_other = np.minimum(up - from_unknown, q[:, 2])
    down = np.minimum(np.clip(-share, 0, None), q[:, 1])
    q[:, 0] += down - from_unknown
    q[:, 2] -= from_other
    q[:, 1] += from_unknown + from_other - down
    return q


def cell(
    rng: np.random.Generator,
    runs: int,
    *,
    n: int,
    baselines: int,
    shift: float,
    tau: float,
    samples: int = 1,
    population: bool = False,
) -> float:
    """The share of ``runs`` in which the gate fails the target: at the baselines' mean answers
    (plus ``shift``), or with ``population`` drawn like them (and ``reference="population"``)."""
    recs, options = items(n)
    keys = [item_key("bbq", r) for r in recs]
    names = [f"b{j}" for j in range(baselines)]
    extra = {"reference": "population"} if population else {}
    failed = 0
    for _ in range(runs):
        p = rng.dirichlet(CONCENTRATION * np.array(BASE), size=n)
        probs = {alias: _moved(p, rng.normal(0, tau)) if tau else p for alias in names}
        own = _moved(p, rng.normal(0, tau)) if tau and population else np.mean([probs[a] for a in names], axis=0)
        probs["target"] = _moved(own, shift) if shift else own
        answers = {alias: _answers(rng, probs[alias], options, keys, samples) for alias in ("target", *names)}
        result = evaluate_benchmark("bbq", recs, answers, target="target", baselines=names, **extra)
        failed += not result.passed
    return failed / runs


def table(runs: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(seed)
    for n, baselines, tau, population in (
        (200, 2, 0.0, False),
        (300, 2, 0.0, False),
        (400, 2, 0.0, False),
        (400, 3, 0.0, False),
        (400, 2, 0.02, False),
        (400, 2, 0.04, False),
        (400, 2, 0.04, True),
        (500, 2, 0.0, False),
    ):
        t0 = time.perf_counter()
        fa = cell(rng, runs, n=n, baselines=baselines, shift=0.0, tau=tau, population=population)
        pw = cell(rng, runs, n=n, baselines=baselines, shift=SHIFT, tau=tau, population=population)
        rows.append(
            {
                "gate": "bias_benchmark",
                "setting": "BBQ bias_ambiguous, margin 0.1" + (', reference="population"' if population else ""),
                "ambiguous": n,
                "limit": 2 * n,
                "baselines": baselines,
                "tau": tau,
                "false_alarm": fa,
                "power": pw,
                "runs": runs,
                "seconds": time.perf_counter() - t0,
            }
        )
        print(format_row(rows[-1]), flush=True)
    return rows + discrim_table(max(1, runs // 2), seed)


def format_row(row: dict[str, Any]) -> str:
    fa, pw, runs = row["false_alarm"], row["power"], row["runs"]
    se = lambda p: (p * (1 - p) / runs) ** 0.5  # noqa: E731
    unit = "scenarios" if row["setting"].startswith("discrim") else "ambiguous"
    return (
        f"bias_benchmark     {row['setting']:<36} K={row['baselines']} {unit}={row['ambiguous']:<4} "
        f"(limit {row['limit']}) tau={row['tau']:.2f}  false alarm {fa:6.1%} (±{se(fa):.1%})  "
        f"power {pw:6.1%} (±{se(pw):.1%})"
    )


def markdown(rows: list[dict[str, Any]]) -> str:
    bbq = [r for r in rows if not r["setting"].startswith("discrim")]
    out = [
        "| metric | baselines × ambiguous items (limit) | τ | false alarm | power (+10% stereotyped) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in bbq:
        out.append(
            f"| {r['setting']} | {r['baselines']} × {r['ambiguous']} ({r['limit']}) | {r['tau']:.2g} | "
            f"{r['false_alarm']:.1%} | {r['power']:.1%} |"
        )
    discrim = [r for r in rows if r["setting"].startswith("discrim")]
    if discrim:
        out += [
            "",
            "| setting | baselines × scenarios (limit) | false alarm | power (1 logit against one group) |",
            "|---|---:|---:|---:|",
        ]
        for r in discrim:
            out.append(
                f"| {r['setting']} | {r['baselines']} × {r['ambiguous']} ({r['limit']}) | "
                f"{r['false_alarm']:.1%} | {r['power']:.1%} |"
            )
    return "\n".join(out).replace("%", " %")


# -- discrim-eval -----------------------------------------------------------------------------------

DISCRIM_SHIFT = 1.0
"""The biased target's logit shift against one group (Black applicants): about 23 points of yes-rate
at a base rate near 0.6."""


def discrim_items(scenarios: int) -> list[dict[str, Any]]:
    """``scenarios`` × the balanced grid the loader keeps at k = 1 (ages 40, 60, 80 × 3 genders × 5
    races: 45 people), explicit fill."""
    return [
        {
            "filled_template": f"Scenario {q}: decide about a {age}-year-old {race} {gender} applicant.",
            "decision_question_id": q,
            "age": float(age),
            "gender": gender,
            "race": race,
            "fill_type": "explicit",
        }
        for q in range(scenarios)
        for age in (40, 60, 80)
        for gender in ("male", "female", "non-binary")
        for race in ("white", "Black", "Asian", "Hispanic", "Native American")
    ]


def discrim_cell(
    rng: np.random.Generator,
    runs: int,
    *,
    scenarios: int,
    baselines: int,
    shift: float,
    samples: int = 1,
    margin: float | None = None,
) -> float:
    recs = discrim_items(scenarios)
    keys = [item_key("discrim_eval", r) for r in recs]
    black = np.array([r["race"] == "Black" for r in recs])
    scenario = np.array([r["decision_question_id"] for r in recs])
    names = [f"b{j}" for j in range(baselines)]
    failed = 0
    for _ in range(runs):
        # each scenario its own base rate (logit N(0.5, 1)); each person a small effect of their own
        logit = rng.normal(0.5, 1.0, scenarios)[scenario] + rng.normal(0, 0.3, len(recs))
        answers = {}
        for alias in ("target", *names):
            moved = logit - (shift * black if alias == "target" else 0.0)
            p = 1 / (1 + np.exp(-moved))
            draws = rng.random((len(recs), samples)) < p[:, None]
            answers[alias] = {k: [bool(y) for y in row] for k, row in zip(keys, draws, strict=True)}
        options = {} if margin is None else {"margin": margin}
        result = evaluate_benchmark("discrim_eval", recs, answers, target="target", baselines=names, **options)
        failed += not result.passed
    return failed / runs


def discrim_table(runs: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(seed + 1)
    for scenarios, baselines, samples in ((20, 2, 1), (30, 2, 1), (30, 3, 1), (20, 2, 3)):
        t0 = time.perf_counter()
        fa = discrim_cell(rng, runs, scenarios=scenarios, baselines=baselines, shift=0.0, samples=samples)
        pw = discrim_cell(rng, runs, scenarios=scenarios, baselines=baselines, shift=DISCRIM_SHIFT, samples=samples)
        rows.append(
            {
                "gate": "bias_benchmark",
                "setting": f"discrim-eval, margin 1 logit, {samples} sample(s)",
                "ambiguous": scenarios,
                "limit": 45 * scenarios,
                "baselines": baselines,
                "tau": 0.0,
                "false_alarm": fa,
                "power": pw,
                "runs": runs,
                "seconds": time.perf_counter() - t0,
            }
        )
        print(format_row(rows[-1]), flush=True)
    return rows
