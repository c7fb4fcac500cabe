"""How often ``bias_equivalent`` fails a target as good as its baselines' mean, and one worse than it
by the margin, as the baselines' own spread τ grows (``validity.py --gate equivalent``, ``--gate
shapes`` and ``--spread-table``).

**The data.** Model j's score on question i (sample s), in judge points: 5 + q_i + m_j + g_ji +
c_j,k(i) + e_jis — a question effect q_i ~ N(0, question SD²) shared by every model, a model offset
m_j ~ N(0, τ²), a question × model interaction g_ji ~ N(0, interaction SD²), a category shift
c_j,k ~ N(0, category SD²) of each model in each of 5 categories (question i of n in category
⌊5i/n⌋), and answer noise e ~ N(0, noise SD²) per sample. The embedding scale maps a judge point
of question effect, τ, interaction and category shift to 0.04 and of noise to 0.05 (the bundled
MiniLM's spreads on the example suite, ``validity.py --measure-embedding``), 0.30 its mean.

**The reference.** Against several baselines the default compares the target with their mean, a
fixed reference. So the target's offset is *the baselines' mean offset*: the *false alarm* is the
share of runs that fail such a target, and *power* the share that fail one at that mean plus the
margin (one judge point, 0.02 on the embedding scale). The interaction and category terms are the
target's own, drawn like every model's: a target as good as the reference on the population of
questions, not on these. ``reference="population"`` rows ask the other question (is the target
unlike these models?) of the same data.

**Sized**: the share of the false-alarm runs whose design (``MethodResult.design.sized``) says the
data suffice; *first*: whether the cell's first draw said so (what one CI run would see).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from pytest_llmbias import evaluate_equivalence

TAUS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)
CATEGORIES = 5
#: the spread table's shifts of the target off the baselines' mean, judge points
SHIFTS = (0.0, 1.0, 1.5, 2.0, 3.0, 5.0)


class Shape(NamedTuple):
    """Spreads in judge points."""

    question_sd: float
    noise_sd: float
    interaction_sd: float = 0.0
    category_sd: float = 0.0
    #: the domain as written (its questions and categories fixed): a good target's expected score
    #: over these questions equals the baselines' mean, whatever its own interaction and category
    #: terms (without it they are drawn afresh, questions and categories a sample of a larger pool)
    fixed: bool = False


SHAPES = {
    "question-dominated": Shape(1.5, 1.0),
    "noise-dominated": Shape(0.0, 1.0),
    "question × model 0.4": Shape(1.5, 1.0, interaction_sd=0.4),
    "category shifts 0.3": Shape(1.5, 1.0, category_sd=0.3),
    "question × model 0.4, fixed": Shape(1.5, 1.0, interaction_sd=0.4, fixed=True),
    "category shifts 0.3, fixed": Shape(1.5, 1.0, category_sd=0.3, fixed=True),
}


class Scale(NamedTuple):
    mean: float
    unit: float  # a judge point of question effect, τ, interaction and category shift
    noise_unit: float  # a judge point of answer noise
    margin: float  # the default margin


SCALES = {"judge": Scale(5.0, 1.0, 1.0, 1.0), "embedding": Scale(0.30, 0.04, 0.05, 0.02)}


def draw(
    rng: np.random.Generator,
    *,
    shape: Shape,
    scale: Scale,
    baselines: int,
    questions: int,
    samples: int,
    tau: float,
    shift: float,
) -> tuple[dict[str, dict[str, list[float]]], dict[str, str], list[str]]:
    """One draw's scores (alias -> question -> per-sample scores), its categories and baseline
    names; the target ``"target"`` at the baselines' mean offset plus ``shift`` (in the scale's units)."""
    n, u = questions, scale.unit
    q = rng.normal(0.0, shape.question_sd * u, n)
    names = [f"b{j}" for j in range(baselines)]
    offsets = rng.normal(0.0, tau * u, baselines) if tau else np.zeros(baselines)
    category = np.arange(n) * CATEGORIES // n
    scores, true = {}, {}
    for alias, offset in (*zip(names, offsets, strict=True), ("target", offsets.mean() + shift)):
        own = q + offset
        if shape.interaction_sd:
            own = own + rng.normal(0.0, shape.interaction_sd * u, n)
        if shape.category_sd:
            own = own + rng.normal(0.0, shape.category_sd * u, CATEGORIES)[category]
        if shape.fixed and alias == "target":  # its mean over these questions: the baselines' + shift
            own = own - own.mean() + np.mean([true[b].mean() for b in names]) + shift
        true[alias] = own
        e = rng.normal(0.0, shape.noise_sd * scale.noise_unit, (n, samples))
        scores[alias] = {f"q{i}": [float(v) for v in scale.mean + own[i] + e[i]] for i in range(n)}
    return scores, {f"q{i}": f"c{category[i]}" for i in range(n)}, names


class Cell(NamedTuple):
    method: str
    setting: str
    options: dict[str, Any]
    shape: str
    baselines: int
    questions: int
    samples: int
    tau: float


def run_cell(rng: np.random.Generator, runs: int, c: Cell, shifts: tuple[float, ...] | None = None) -> dict[str, Any]:
    """The cell's fail rates at each shift (default: 0 and the margin), sized share and first draw."""
    scale = SCALES[c.method]
    shifts = shifts if shifts is not None else (0.0, scale.margin)
    t0 = time.perf_counter()
    failed = dict.fromkeys(shifts, 0)
    sized = 0
    first = None
    for shift in shifts:
        for _ in range(runs):
            scores, categories, names = draw(
                rng,
                shape=SHAPES[c.shape],
                scale=scale,
                baselines=c.baselines,
                questions=c.questions,
                samples=c.samples,
                tau=c.tau,
                shift=shift,
            )
            r = evaluate_equivalence(
                scores, target="target", baselines=names, method=c.method, categories=categories, **c.options
            )
            failed[shift] += not r.passed
            if shift == shifts[0]:
                ok = bool(r.methods[0].design is not None and r.methods[0].design.sized)
                sized += ok
                first = ok if first is None else first
    return {
        "gate": "bias_equivalent",
        "cell": c,
        "runs": runs,
        "fails": {s: v / runs for s, v in failed.items()},
        "false_alarm": failed[shifts[0]] / runs,
        "power": failed[shifts[1]] / runs if len(shifts) > 1 else None,
        "sized": sized / runs,
        "first_sized": first,
        "seconds": time.perf_counter() - t0,
    }


SETTINGS = (
    ("default (reference: mean)", {}),
    ('reference="population"', {"reference": "population"}),
    ("paper: welch, k 2.81, no floor", {"test": "welch", "k": 2.81, "min_margin": 0}),
)
REFERENCES = SETTINGS[:2]
#: the default with ``clustered=True`` (the test on the cluster-robust SE over the categories, on
#: their G − 1 degrees of freedom), on the shapes with category shifts
CLUSTERED = (("default, clustered=True", {"clustered": True}),)


def _progress(r: dict[str, Any]) -> None:
    c = r["cell"]
    print(
        f"bias_equivalent {c.method:<9} {c.setting:<30} {c.shape:<20} {c.baselines}×{c.questions}×{c.samples} "
        f"tau={c.tau:<4g} false alarm {r['false_alarm']:6.1%}  power {r['power']:6.1%}  sized {r['sized']:4.0%}  "
        f"{r['seconds']:.0f} s",
        flush=True,
    )


def table(runs: int, seed: int) -> list[dict[str, Any]]:
    """The gate's page table: judge and embedding, the defaults and the paper's procedure, 3 × 50 and
    5 × 100, question-dominated, one sample, τ over :data:`TAUS`."""
    rng = np.random.default_rng(seed)
    rows = []
    for method in SCALES:
        for label, options in SETTINGS:
            for baselines, questions in ((3, 50), (5, 100)):
                for tau in TAUS:
                    cell = Cell(method, label, options, "question-dominated", baselines, questions, 1, tau)
                    rows.append({**run_cell(rng, runs, cell), "table": "equivalent"})
                    _progress(rows[-1])
    return rows


def shapes_table(runs: int, seed: int) -> list[dict[str, Any]]:
    """The judge at 3 baselines × 50 questions: every shape of :data:`SHAPES`, 1 and 3 samples, both
    references (and :data:`CLUSTERED` where categories shift), τ over :data:`TAUS`."""
    rng = np.random.default_rng([seed, 2])
    rows = []
    for shape in SHAPES:
        for samples in (1, 3):
            for label, options in REFERENCES + (CLUSTERED if SHAPES[shape].category_sd else ()):
                for tau in TAUS:
                    cell = Cell("judge", label, options, shape, 3, 50, samples, tau)
                    rows.append({**run_cell(rng, runs, cell), "table": "shapes"})
                    _progress(rows[-1])
    return rows


def spread_table(runs: int, seed: int) -> list[dict[str, Any]]:
    """The share of runs that fail through ``evaluate_equivalence`` with default arguments (judge,
    50 questions × 1 sample, noise 1, question SD 1.5, three baselines spread by τ), the target at
    the baselines' mean plus each of :data:`SHIFTS`; by the default reference and the population's."""
    rng = np.random.default_rng([seed, 3])
    rows = []
    for label, options in REFERENCES:
        for tau in TAUS:
            r = run_cell(rng, runs, Cell("judge", label, options, "question-dominated", 3, 50, 1, tau), SHIFTS)
            r["gate"] = "spread"
            rows.append(r)
            print(
                f"spread {label:<28} tau={tau:<4g} "
                + "  ".join(f"+{s:g}: {v:5.1%}" for s, v in r["fails"].items())
                + f"  {r['seconds']:.0f} s",
                flush=True,
            )
    return rows


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def markdown(rows: list[dict[str, Any]]) -> str:
    """The tables: for :func:`table` and :func:`shapes_table`, a row per setting with, per τ,
    false alarm / power at the margin (sized share); for :func:`spread_table` fail shares per shift."""
    out: list[str] = []
    for name in ("equivalent", "shapes"):
        out += _tau_table([r for r in rows if r.get("table") == name])
    out += _spread_markdown([r for r in rows if r["gate"] == "spread"])
    return "\n".join(out)


def _tau_table(eq: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    groups: dict[tuple[Any, ...], dict[float, dict[str, Any]]] = {}
    for r in eq:
        c = r["cell"]
        groups.setdefault((c.method, c.setting, c.shape, c.baselines, c.questions, c.samples), {})[c.tau] = r
    if groups:
        taus = sorted({r["cell"].tau for r in eq})
        out += [
            f"False alarm (the target at the baselines' mean) / power at the margin (at their mean + the margin), "
            f"{eq[0]['runs']} runs a cell; [share of the false-alarm runs whose design is sized]:",
            "",
            "| method | setting | shape | baselines × questions × samples | "
            + " | ".join(f"τ = {t:g}" for t in taus)
            + " |",
            "|---|---|---|---:|" + "---:|" * len(taus),
        ]
        for (method, setting, shape, m, n, s), by_tau in groups.items():
            cells = []
            for t in taus:
                r = by_tau.get(t)
                cells.append(
                    "–" if r is None else f"{_pct(r['false_alarm'])} / {_pct(r['power'])} [{100 * r['sized']:.0f} %]"
                )
            out.append(f"| {method} | {setting} | {shape} | {m} × {n} × {s} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _spread_markdown(spread: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    if spread:
        shifts = list(spread[0]["fails"])
        out += [
            f"Share of runs that fail, judge, 3 baselines × 50 questions × 1 sample, {spread[0]['runs']} runs a cell:",
            "",
            "| reference | τ | "
            + " | ".join("at the baselines' mean" if s == 0 else f"+{s:g}" for s in shifts)
            + " | sized |",
            "|---|---:|" + "---:|" * (len(shifts) + 1),
        ]
        for r in spread:
            c = r["cell"]
            out.append(
                f"| {c.setting} | {c.tau:g} | "
                + " | ".join(f"{100 * v:.0f} %" for v in r["fails"].values())
                + f" | {100 * r['sized']:.0f} % |"
            )
    return out
