"""The tables ``suite_validity.py`` prints: per cell the suite's false alarm and each kind's, power at
the margin with the share of designs sized, where the plan says the budget suffices, and the cells
that miss the suite's promise (suite false alarm above 5 %, power below 80 % where the plan says sized)."""

from __future__ import annotations

import math
from typing import Any

from suite_plan import Cell, plan_summary


def _ref(c: Cell) -> str:
    return "–" if c.release else c.reference


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}"


def tables(
    rows: list[dict[str, Any]], kinds: tuple[str, ...], *, own_rate: tuple[str, ...], planned: tuple[str, ...]
) -> str:
    """The benchmark's Markdown: suite and per-kind false alarm, power at the margin, the plan's summary
    for the ``planned`` kinds and the cells that miss the promise (``own_rate``: kinds left out of the
    second false-alarm column)."""
    runs = rows[0]["runs"]
    key = "| against | reference | shape | τ | samples | questions |"
    own = [k for k in own_rate if k in kinds]
    without = f" without {'/'.join(own)} |" if own else ""
    out = [
        f"**Suite false alarm** (a good release fails any gate; ± one SE at {runs} runs), each kind's false "
        "alarm, how often a gate's error about its comparators stopped a good release that no gate failed, "
        "share of designs sized, calls per model; %:",
        "",
        f"{key} suite false alarm |{without} {' | '.join(kinds)} | stopped | sized | calls |",
        "|---|---|---|---:|---:|---:|---:|" + "---:|" * (len(kinds) + bool(own)) + "---:|---:|---:|",
    ]
    for r in rows:
        c, fa = r["cell"], r["suite_false_alarm"]
        se = math.sqrt(max(fa * (1 - fa), 1 / runs) / runs)
        per_kind = " | ".join(
            ([f"{100 * r['others_false_alarm']:.1f}"] if own else []) + [pct(r["false_alarm"][k]) for k in kinds]
        )
        out.append(
            f"| {c.against} | {_ref(c)} | {c.shape} | {c.tau:g} | {c.budget} | {c.questions} | "
            f"{100 * fa:.1f} ± {100 * se:.1f} "
            f"| {per_kind} | {100 * r['stopped']:.1f} | {pct(r['sized_all'])} | {r['calls']} |"
        )
    out += [
        "",
        "**Power at the margin** (the kind's data worse by its margin, one kind at a time: how often its "
        "gate fails), with the share of its designs sized in brackets, † where the plan says the budget "
        "suffices; %:",
        "",
        key + " " + " | ".join(kinds) + " |",
        "|---|---|---|---:|---:|---:|" + "---:|" * len(kinds),
    ]
    for r in rows:
        c = r["cell"]
        out.append(
            f"| {c.against} | {_ref(c)} | {c.shape} | {c.tau:g} | {c.budget} | {c.questions} | "
            + " | ".join(f"{pct(r['power'][k])} ({pct(r['sized'][k])}){'†' if r['plan'][k] else ''}" for k in kinds)
            + " |"
        )
    out += ["", *plan_summary(rows, [k for k in kinds if k in planned]), "", *flags(rows, kinds)]
    errors = {k: sum(r["raised"][k] for r in rows) for k in kinds}
    if any(errors.values()):
        out += [
            "",
            "Gates that raised (neither failed nor passed; good and worse draws): "
            + ", ".join(f"{k} {v}" for k, v in errors.items() if v),
        ]
    return "\n".join(out)


def flags(rows: list[dict[str, Any]], kinds: tuple[str, ...]) -> list[str]:
    """The cells that miss the suite's promise: suite false alarm above ``suite.alpha`` (5 %), or
    power at the margin below 80 % for a kind the plan calls sized (†)."""
    out = []
    for r in rows:
        c = r["cell"]
        where = f"{c.against}, {_ref(c)}, {c.shape}, τ {c.tau:g}, {c.budget} × {c.questions}"
        if r["suite_false_alarm"] > 0.05:
            out.append(f"- suite false alarm {100 * r['suite_false_alarm']:.1f} % at {where}")
        low = [f"{k} {pct(r['power'][k])} %" for k in kinds if r["plan"][k] and r["power"][k] < 0.8]
        if low:
            out.append(f"- power below 80 % where the plan says sized, at {where}: {', '.join(low)}")
    return [
        "**Cells above 5 % suite false alarm or below 80 % power where sized** (Monte Carlo error included):",
        "",
    ] + (out or ["- none"])
