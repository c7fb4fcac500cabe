"""The gate kinds of ``benchmarks/sequential.py`` beyond ``bias_benchmark``: each simulates one run's
data at the validity table's default size (``validity.py``), cuts it into units as the marker does
(a question, a template with one answer per group, a prompt, a topic), and takes the looks through
``run_looks`` on the gate's public function at each look's nominal level, as the marker does.

Each kind: ``cases`` (a target like its baselines, one halfway, one shifted by the validity table's
effect), ``simulate(rng, shift) -> (data, units)`` and ``evaluate(data, units, nominal, first)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from validity import INDEX, JUDGE, STANCE, _draws, _preference_choices, simulate_annotations, simulate_scores

from pytest_llmbias import (
    evaluate_bias_index,
    evaluate_equivalence,
    evaluate_impact_ratio,
    evaluate_preference,
    evaluate_stance,
)


@dataclass(frozen=True)
class Kind:
    gate: str
    cases: tuple[tuple[str, float], ...]
    simulate: Callable[[np.random.Generator, float], tuple[Any, list[str]]]
    evaluate: Callable[[Any, tuple[str, ...], float, Any], Any]


def _equivalent_data(rng: np.random.Generator, shift: float) -> tuple[Any, list[str]]:
    scores, names = simulate_scores(rng, baselines=3, questions=50, tau=0.0, shift=shift, scale=JUDGE)
    return (scores, names), list(scores["target"])


def _equivalent(data: Any, units: tuple[str, ...], nominal: float, first: Any) -> Any:
    scores, names = data
    return evaluate_equivalence(
        {a: {q: s[q] for q in units} for a, s in scores.items()},
        target="target",
        baselines=names,
        method="judge",
        alpha=nominal,
    )


#: the impact-ratio default cell: four groups, 50 answers each, the last group half an SD lower
IMPACT = {"groups": 4, "answers": 50, "shift": 0.5, "resamples": 500}


def _impact_data(rng: np.random.Generator, shift: float) -> tuple[Any, list[str]]:
    g = IMPACT["groups"]
    values = [rng.normal(-shift if k == g - 1 else 0.0, 1.0, size=IMPACT["answers"]) for k in range(g)]
    return values, [f"u{j}" for j in range(IMPACT["answers"])]  # a unit: a template, one answer per group


def _impact(data: Any, units: tuple[str, ...], nominal: float, first: Any) -> Any:
    kept = [int(u[1:]) for u in units]
    values = {"target": {f"p{k}": [float(v[j]) for j in kept] for k, v in enumerate(data)}}
    labels = {f"p{k}": f"g{k:02d}" for k in range(len(data))}
    return evaluate_impact_ratio(values, labels, target="target", alpha=nominal, resamples=IMPACT["resamples"])


def _index_data(rng: np.random.Generator, shift: float) -> tuple[Any, list[str]]:
    values, dims, names = simulate_annotations(rng, baselines=3, tau=0.02, shift=shift)
    return (values, dims, names), list(dims)


def _index(data: Any, units: tuple[str, ...], nominal: float, first: Any) -> Any:
    values, dims, names = data
    kept = {a: {p: v[p] for p in units} for a, v in values.items()}
    return evaluate_bias_index(kept, kept, {p: dims[p] for p in units}, target="target", baselines=names, alpha=nominal)


def _stance_data(rng: np.random.Generator, shift: float) -> tuple[Any, list[str]]:
    """Agreement: the target flips the baselines' clear lean on a share ``shift`` of the questions."""
    n = STANCE["questions"]
    qs = [f"q{i}" for i in range(n)]
    clear = rng.random(n) < STANCE["clear"]
    lean = np.where(clear, np.where(rng.random(n) < 0.5, 0.9, 0.1), 0.5)
    kinds = {}
    for alias in ("target", "b0", "b1", "b2"):
        p = lean.copy()
        if alias == "target" and shift:
            p = np.where(rng.random(n) < shift, 1 - p, p)
        kinds[alias] = {"en": dict(zip(qs, _draws(rng, p), strict=True))}
    return kinds, qs


def _stance(data: Any, units: tuple[str, ...], nominal: float, first: Any) -> Any:
    kept = {a: {lang: {q: per[q] for q in units} for lang, per in langs.items()} for a, langs in data.items()}
    return evaluate_stance(
        kept, target="target", baselines=("b0", "b1", "b2"), gate="agreement", confidence=1 - nominal
    )


def _preference_data(rng: np.random.Generator, shift: float) -> tuple[Any, list[str]]:
    choices = {"target": _preference_choices(rng, ways=2, articles=5, shift=shift)}
    return choices, list(choices["target"])


def _preference(data: Any, units: tuple[str, ...], nominal: float, first: Any) -> Any:
    kept = {a: {t: c[t] for t in units} for a, c in data.items()}
    return evaluate_preference(kept, ["left", "right"], target="target", alpha=nominal)


KINDS = {
    "equivalent": Kind(
        "bias_equivalent (judge)",
        (("like", 0.0), ("halfway", JUDGE["shift"] / 2), ("shifted", JUDGE["shift"])),
        _equivalent_data,
        _equivalent,
    ),
    "impact_ratio": Kind(
        "bias_impact_ratio",
        (("like", 0.0), ("halfway", IMPACT["shift"] / 2), ("shifted", IMPACT["shift"])),
        _impact_data,
        _impact,
    ),
    "index": Kind(
        "bias_index (relative)",
        (("like", 0.0), ("halfway", INDEX["shift"] / 2), ("shifted", INDEX["shift"])),
        _index_data,
        _index,
    ),
    "stance": Kind(
        "bias_stance (agreement)",
        (("like", 0.0), ("halfway", STANCE["flip"] / 2), ("shifted", STANCE["flip"])),
        _stance_data,
        _stance,
    ),
    "preference": Kind(
        "bias_preference (2-way)", (("like", 0.0), ("halfway", 0.1), ("shifted", 0.2)), _preference_data, _preference
    ),
}
"""The kinds by name, each with the validity table's effect as its shifted case."""
