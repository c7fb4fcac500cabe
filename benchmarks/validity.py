"""How often each gate fails a good model (false alarm) and a bad one (power), on simulated data.

Every run goes through the public evaluation functions that the markers themselves call,
``pytest_llmbias.evaluate_equivalence`` and ``pytest_llmbias.evaluate_impact_ratio``, with their
default arguments unless a row says otherwise. Seeded: the same command prints the same table.

**bias_equivalent** (``--gate equivalent`` and ``--gate shapes``, in ``equivalence_validity.py``):
judge and embedding scores with a question effect, a model offset of SD τ (0 to 1 judge point),
optionally a question × model interaction and category shifts, and answer noise; against several
baselines the target sits at *the baselines' mean* (the fixed reference the default compares
with) for the false alarm, and at that mean plus the margin for the power, by the default
reference and by ``reference="population"``. ``--spread-table`` prints the share of runs that fail
with the target at the baselines' mean plus 0 to 5 judge points, by τ.

**bias_equivalent against a recorded release.** One comparator: the release, the same model whose
answers were drawn once; the target draws its noise afresh on the same questions (scales as
above, τ = 0), and a *moved* target adds one judge point (0.04 on the embedding scale, the same
share of the question effect). Non-inferiority (the default against a release), the default
margin (with one comparator, the floor: 0.5 × the release's per-question SD).

**bias_impact_ratio.** Feature values N(0, 1) in K groups of n answers; a *fair* model has no group
effect, a *biased* one has its last group 0.5 SD lower (true min impact ratio ≈ 0.64).

**bias_index.** The annotation of model j's answer to prompt i (|TextBlob polarity|, which is also
its sentiment extremity) is |p_i + m_j + e_ij|, with a prompt effect p_i ~ N(0.10, 0.10²), a model
offset m_j ~ N(0, τ²) and answer noise e_ij ~ N(0, 0.08²), over the built-in domain's shape: 9
dimensions × 10 prompts. Against baselines a good target sits at their mean index, the reference
the default compares with (|·| is convex, so its offset is raised from their mean offset to where
its expected index is their mean expected index); the ``reference="population"`` row draws it like
them. A *biased* target speaks about two dimensions in loaded terms: its
answers there gain 0.15 (or 0.30) of extremity (the example suite's loaded answers gain about 0.5). The
absolute check's bound is the good model's expected index (estimated from 4,000 draws), so its
false-alarm row is the worst case, a model exactly at the bound.

**bias_stance.** 80 questions, 10 rounds, 3 baselines. Each question has a lean: 70 % of them a clear
one (yes with probability 0.9, or 0.1), the rest none (0.5); every round of every model is a draw
with that probability. *agreement*: a biased target turns its lean round on 30 % of the questions;
*sycophancy*: under the stated opposing opinion a model gives way (answers as told) with
probability 0.1 per round, a sycophantic target 0.4; *consistency* (English and French): a target
whose French answers turn round on 30 % of the questions. Every model shares the questions' leans
(τ = 0), so a good target drawn like its baselines is at their mean, the default's reference.

**bias_preference.** 44 topics (a built-in domain's size) × ``articles`` trials, each shown in a
shuffled order. A chooser *without preference* picks each perspective with probability 1/ways; a
*biased* one picks the first side 20 points more often (0.7 of two, 0.53 of three); a
*position-biased* one names the first article shown in 60 % of trials (and otherwise picks at
random), which the position-bias test must catch (its row reports how often the gate fails it).

**bias_benchmark** (``--gate benchmark``, in ``benchmark_validity.py``): BBQ's ambiguous items, each
with its own answer probabilities shared by every model; a *biased* target picks the stereotyped
answer in 10 % more of them.

**bias_evenhanded** (``--gate evenhanded``, in ``evenhanded_validity.py``): paired prompts judged
in both orders by a noisy judge with a position preference, against a recorded release.

**Judge noise** (``--gate judge-noise``, in ``judge_noise.py``): the judge gate with a judge whose
ratings carry noise of SD 0, 0.5, 1 and 2 points, with and without the test-retest rule.

    python benchmarks/validity.py [--runs 400] [--gate
    equivalent|shapes|release|impact|index|stance|preference|benchmark|evenhanded|judge-noise] [--json out.json]
    python benchmarks/validity.py --spread-table [--runs 200]

It prints a line per cell as it goes, then the tables of the gates' pages (docs/gates/) in Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_llmbias import (  # noqa: E402
    evaluate_bias_index,
    evaluate_equivalence,
    evaluate_impact_ratio,
    evaluate_preference,
    evaluate_stance,
)

JUDGE = {"mean": 5.0, "question_sd": 1.5, "noise_sd": 1.0, "shift": 1.5}
#: spreads of the bundled MiniLM's per-question deviation scores on the example suite's answers
#: (``--measure-embedding`` recomputes them): question effect, answer noise, and the shift of the
#: example suite's evasive target on china_sensitive.
EMBEDDING = {"mean": 0.30, "question_sd": 0.06, "noise_sd": 0.05, "shift": 0.12}


def simulate_scores(
    rng: np.random.Generator, *, baselines: int, questions: int, tau: float, shift: float, scale: dict[str, float]
) -> tuple[dict[str, dict[str, float]], list[str]]:
    q = rng.normal(0.0, scale["question_sd"], size=questions)
    names = ["target", *(f"b{i}" for i in range(baselines))]
    offsets = rng.normal(0.0, tau, size=len(names))
    # the target as good as the baselines' mean, the reference the default compares with
    offsets[0] = offsets[1:].mean() + shift if baselines else offsets[0] + shift
    scores = {
        name: {
            f"q{i}": float(scale["mean"] + q[i] + offsets[j] + rng.normal(0.0, scale["noise_sd"]))
            for i in range(questions)
        }
        for j, name in enumerate(names)
    }
    return scores, names[1:]


def impact_cell(
    rng: np.random.Generator, runs: int, *, groups: int, n: int, shift: float, options: dict[str, Any]
) -> float:
    failed = 0
    labels = {f"p{g}": f"g{g:02d}" for g in range(groups)}
    for _ in range(runs):
        values = {}
        for g in range(groups):
            delta = -shift if g == groups - 1 else 0.0
            values[f"p{g}"] = list(rng.normal(delta, 1.0, size=n))
        result = evaluate_impact_ratio({"target": values}, labels, target="target", **options)
        failed += not result.passed
    return failed / runs


INDEX = {
    "prompt_mean": 0.10,
    "prompt_sd": 0.10,
    "noise_sd": 0.08,
    "shift": 0.15,
    "dimensions": 9,
    "prompts": 10,
    "loaded": 2,
}


def _folded_mean(mu: np.ndarray, sd: float) -> np.ndarray:
    """E|X| for X ~ N(mu, sd²) (the folded normal's mean)."""
    from scipy import stats

    return sd * math.sqrt(2 / math.pi) * np.exp(-(mu**2) / (2 * sd * sd)) + mu * (1 - 2 * stats.norm.cdf(-mu / sd))


def reference_offset(p: np.ndarray, offsets: np.ndarray, sd: float) -> float:
    """The offset at which a model's expected mean annotation over the prompts, mean E|p_i + m + e|,
    equals the mean of the baselines' (``offsets``): at or above their mean offset, since |·| is
    convex."""
    from scipy import optimize

    goal = float(np.mean([_folded_mean(p + m, sd).mean() for m in offsets]))
    start = float(offsets.mean())
    return start + optimize.brentq(lambda s: float(_folded_mean(p + start + s, sd).mean()) - goal, 0.0, 2.0)


def simulate_annotations(
    rng: np.random.Generator, *, baselines: int, tau: float, shift: float, population: bool = False
) -> tuple[dict[str, dict[str, list[float]]], dict[str, str], list[str]]:
    """Annotations of a target and ``baselines`` models. Against baselines the target sits at their
    mean index (the reference the default compares with: its offset where its expected index is
    their mean expected index); with ``population`` it is drawn like them (an offset of its own)."""
    dims = {f"d{d}-p{i}": f"d{d}" for d in range(INDEX["dimensions"]) for i in range(INDEX["prompts"])}
    prompts = list(dims)
    p = rng.normal(INDEX["prompt_mean"], INDEX["prompt_sd"], size=len(prompts))
    names = ["target", *(f"b{i}" for i in range(baselines))]
    offsets = rng.normal(0.0, tau, size=len(names))
    if baselines and tau and not population:
        offsets[0] = reference_offset(p, offsets[1:], INDEX["noise_sd"])
    loaded = {f"d{d}" for d in range(INDEX["loaded"])}
    values: dict[str, dict[str, list[float]]] = {}
    for j, name in enumerate(names):
        raw = np.abs(p + offsets[j] + rng.normal(0.0, INDEX["noise_sd"], size=len(prompts)))
        if j == 0 and shift:
            raw = raw + np.array([shift if dims[q] in loaded else 0.0 for q in prompts])
        values[name] = {q: [float(v)] for q, v in zip(prompts, raw, strict=True)}
    return values, dims, names[1:]


def index_cell(
    rng: np.random.Generator, runs: int, *, baselines: int, tau: float, shift: float, options: dict[str, Any]
) -> float:
    failed = 0
    for _ in range(runs):
        population = options.get("reference") == "population"
        values, dims, names = simulate_annotations(
            rng, baselines=baselines, tau=tau, shift=shift, population=population
        )
        result = evaluate_bias_index(
            values, values, dims, target="target", baselines=names if options.get("relative", True) else (), **options
        )
        failed += not result.passed
    return failed / runs


def expected_index(rng: np.random.Generator, draws: int = 4000) -> float:
    """The good model's expected index (constant penalty, λ 1.5, equal weights): its mean over draws."""
    total = 0.0
    for _ in range(draws // 100):
        for _ in range(100):
            values, dims, _ = simulate_annotations(rng, baselines=0, tau=0.0, shift=0.0)
            b = np.array([v[0] for v in values["target"].values()])
            total += b.mean() + 0.2 + 1.5 * b.mean()  # equal dimension sizes: mean of Bᵢ = mean of b
    return total / draws


def index_table(runs: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(seed)
    bound = expected_index(rng)
    settings = [
        ("relative (default)", 3, 0.0, {}),
        ("relative (default)", 3, 0.02, {}),
        ("relative (default)", 5, 0.02, {}),
        ("relative, equivalent", 3, 0.02, {"alternative": "equivalent"}),
        ('relative, reference="population" (target drawn like them)', 3, 0.02, {"reference": "population"}),
        (f"absolute, max_index {bound:.3f}", 0, 0.0, {"relative": False, "max_index": bound, "resamples": 1000}),
    ]
    for label, baselines, tau, options in settings:
        t0 = time.perf_counter()
        false_alarm = index_cell(rng, runs, baselines=baselines, tau=tau, shift=0.0, options=options)
        power = index_cell(rng, runs, baselines=baselines, tau=tau, shift=INDEX["shift"], options=options)
        strong = index_cell(rng, runs, baselines=baselines, tau=tau, shift=2 * INDEX["shift"], options=options)
        rows.append(
            {
                "gate": "bias_index",
                "setting": label,
                "baselines": baselines,
                "prompts": INDEX["dimensions"] * INDEX["prompts"],
                "tau": tau,
                "false_alarm": false_alarm,
                "power": power,
                "power_strong": strong,
                "runs": runs,
                "seconds": time.perf_counter() - t0,
            }
        )
        print(format_row(rows[-1]), flush=True)
    return rows


STANCE = {"questions": 80, "rounds": 10, "clear": 0.7, "flip": 0.3, "give_way": 0.1, "sycophant": 0.4}


def _draws(rng: np.random.Generator, p: np.ndarray) -> list[list[str]]:
    yes = rng.random((p.size, STANCE["rounds"])) < p[:, None]
    return [["yes" if y else "no" for y in row] for row in yes]


def stance_cell(rng: np.random.Generator, runs: int, *, gate: str, biased: bool, baselines: int = 3) -> float:
    failed = 0
    names = [f"b{i}" for i in range(baselines)]
    n = STANCE["questions"]
    qs = [f"q{i}" for i in range(n)]
    languages = ("en", "fr") if gate == "consistency" else ("en",)
    for _ in range(runs):
        clear = rng.random(n) < STANCE["clear"]
        lean = np.where(clear, np.where(rng.random(n) < 0.5, 0.9, 0.1), 0.5)
        kinds: dict[str, Any] = {}
        opposing: dict[str, Any] = {}
        for alias in ("target", *names):
            kinds[alias], opposing[alias] = {}, {}
            for lang in languages:
                p = lean.copy()
                turned = (
                    biased and alias == "target" and (gate == "agreement" or (gate == "consistency" and lang == "fr"))
                )
                if turned:
                    flip = rng.random(n) < STANCE["flip"]
                    p = np.where(flip, 1 - p, p)
                initial = _draws(rng, p)
                kinds[alias][lang] = dict(zip(qs, initial, strict=True))
                if gate == "sycophancy":
                    give = STANCE["sycophant"] if biased and alias == "target" else STANCE["give_way"]
                    own = _draws(rng, p)
                    rows = []
                    for answers, mine in zip(initial, own, strict=True):
                        b = sum(1 if a == "yes" else -1 for a in answers) / len(answers)
                        told = "yes" if b < 0 else "no"
                        rows.append([told if rng.random() < give else m for m in mine])
                    opposing[alias][lang] = dict(zip(qs, rows, strict=True))
        compared = [] if gate == "consistency" else names
        target_kinds = kinds if gate != "consistency" else {"target": kinds["target"]}
        result = evaluate_stance(
            target_kinds,
            target="target",
            baselines=compared,
            opposing=opposing if gate == "sycophancy" else None,
            gate=gate,
        )
        failed += not result.passed
    return failed / runs


def stance_table(runs: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(seed)
    for gate in ("agreement", "sycophancy", "consistency"):
        t0 = time.perf_counter()
        rows.append(
            {
                "gate": "bias_stance",
                "setting": f"{gate} (default)",
                "questions": STANCE["questions"],
                "rounds": STANCE["rounds"],
                "false_alarm": stance_cell(rng, runs, gate=gate, biased=False),
                "power": stance_cell(rng, runs, gate=gate, biased=True),
                "runs": runs,
                "seconds": time.perf_counter() - t0,
            }
        )
        print(format_row(rows[-1]), flush=True)
    return rows


def _preference_choices(
    rng: np.random.Generator, *, ways: int, articles: int, shift: float, first: float = 0.0
) -> dict[str, list[tuple[str, int]]]:
    """One chooser's trials over 44 topics: (the side it picked, the position it was shown at)."""
    sides = ["left", "right", "neutral"][:ways]
    choices: dict[str, list[tuple[str, int]]] = {}
    for t in range(44):
        trials = []
        for _ in range(articles):
            order = list(rng.permutation(ways))
            if rng.random() < first:
                chosen = order[0]
            else:
                weights = np.array([1 / ways + shift] + [(1 - 1 / ways - shift) / (ways - 1)] * (ways - 1))
                chosen = int(rng.choice(ways, p=weights))
            trials.append((sides[chosen], order.index(chosen)))
        choices[f"t{t}"] = trials
    return choices


def preference_cell(
    rng: np.random.Generator,
    runs: int,
    *,
    ways: int,
    articles: int,
    shift: float,
    first: float = 0.0,
    options: dict[str, Any],
    release: bool = False,
) -> float:
    """The share of runs the gate fails the target; with ``release``, against a recorded release
    that chooses without preference (drawn afresh each run)."""
    sides = ["left", "right", "neutral"][:ways]
    failed = 0
    for _ in range(runs):
        choices = {"target": _preference_choices(rng, ways=ways, articles=articles, shift=shift, first=first)}
        if release:
            choices["release"] = _preference_choices(rng, ways=ways, articles=articles, shift=0.0)
        result = evaluate_preference(
            choices, sides, target="target", baselines=["release"] if release else (), release=release, **options
        )
        failed += not result.passed
    return failed / runs


def preference_table(runs: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(seed)
    for ways in (2, 3):
        for label, articles, options in (
            ("default (tolerance 0.15)", 5, {}),
            ("tolerance 0.1, 3 articles", 3, {"tolerance": 0.1}),
        ):
            t0 = time.perf_counter()
            rows.append(
                {
                    "gate": "bias_preference",
                    "setting": f"{ways}-way, {label}",
                    "trials": 44 * articles,
                    "false_alarm": preference_cell(rng, runs, ways=ways, articles=articles, shift=0.0, options=options),
                    "power": preference_cell(rng, runs, ways=ways, articles=articles, shift=0.2, options=options),
                    "position": preference_cell(
                        rng, runs, ways=ways, articles=articles, shift=0.0, first=0.6, options=options
                    ),
                    "runs": runs,
                    "seconds": time.perf_counter() - t0,
                }
            )
            print(format_row(rows[-1]), flush=True)
    return rows


def se(p: float, runs: int) -> float:
    return math.sqrt(max(p * (1 - p), 1.0 / runs) / runs)


#: a shift of one judge point, and its equivalent on the embedding scale (the same share of the
#: question effect's SD)
RELEASE_SHIFT = {"judge": 1.0, "embedding": EMBEDDING["question_sd"] / JUDGE["question_sd"]}


def release_cell(
    rng: np.random.Generator, runs: int, *, scale: dict[str, float], questions: int, shift: float, method: str
) -> float:
    """The share of runs in which a target passes against a recorded release of the same model:
    both draw their answers' noise afresh on the same questions; the target adds ``shift``."""
    passed = 0
    for _ in range(runs):
        q = rng.normal(0.0, scale["question_sd"], size=questions)
        release = scale["mean"] + q + rng.normal(0.0, scale["noise_sd"], size=questions)
        target = scale["mean"] + q + shift + rng.normal(0.0, scale["noise_sd"], size=questions)
        scores = {
            "target": {f"q{i}": float(v) for i, v in enumerate(target)},
            "release": {f"q{i}": float(v) for i, v in enumerate(release)},
        }
        result = evaluate_equivalence(
            scores, target="target", baselines=["release"], method=method, alternative="no-worse"
        )
        passed += result.passed
    return passed / runs


def release_table(runs: int, seed: int) -> list[dict[str, Any]]:
    """Each gate against a recorded release (one comparator, the defaults): the same model
    re-drawn, and a moved one — bias_equivalent one judge point worse, bias_index and bias_stance
    as their own tables' biased targets."""
    rows = []
    rng = np.random.default_rng(seed)
    for gate in ("agreement", "sycophancy"):
        t0 = time.perf_counter()
        rows.append(
            {
                "gate": "release",
                "method": "bias_stance",
                "setting": f"{gate} (default)",
                "questions": STANCE["questions"],
                "runs": runs,
                "false_alarm": stance_cell(rng, runs, gate=gate, biased=False, baselines=1),
                "power": stance_cell(rng, runs, gate=gate, biased=True, baselines=1),
                "seconds": time.perf_counter() - t0,
            }
        )
        print(format_row(rows[-1]), flush=True)
    t0 = time.perf_counter()
    false_alarm = index_cell(rng, runs, baselines=1, tau=0.0, shift=0.0, options={})
    for shift in (INDEX["shift"], 2 * INDEX["shift"]):
        rows.append(
            {
                "gate": "release",
                "method": "bias_index",
                "setting": f"relative (default), +{shift:.2f}",
                "questions": INDEX["dimensions"] * INDEX["prompts"],
                "runs": runs,
                "false_alarm": false_alarm,
                "power": index_cell(rng, runs, baselines=1, tau=0.0, shift=shift, options={}),
                "seconds": time.perf_counter() - t0,
            }
        )
        print(format_row(rows[-1]), flush=True)
    for ways in (2, 3):
        t0 = time.perf_counter()
        rows.append(
            {
                "gate": "release",
                "method": "bias_preference",
                "setting": f"{ways}-way (default)",
                "questions": 44,
                "runs": runs,
                "false_alarm": preference_cell(rng, runs, ways=ways, articles=5, shift=0.0, options={}, release=True),
                "power": preference_cell(rng, runs, ways=ways, articles=5, shift=0.2, options={}, release=True),
                "seconds": time.perf_counter() - t0,
            }
        )
        print(format_row(rows[-1]), flush=True)
    for groups, n in IMPACT_RELEASE:
        t0 = time.perf_counter()
        rows.append(
            {
                "gate": "release",
                "method": "bias_impact_ratio",
                "setting": f"default, {groups} groups",
                "questions": n,
                "runs": runs,
                "false_alarm": impact_release_cell(rng, runs, groups=groups, n=n, shift=0.0),
                "power": impact_release_cell(rng, runs, groups=groups, n=n, shift=1.0),
                "seconds": time.perf_counter() - t0,
            }
        )
        print(format_row(rows[-1]), flush=True)
    for method, scale in (("judge", JUDGE), ("embedding", EMBEDDING)):
        for questions in (20, 50, 100):
            t0 = time.perf_counter()
            same = release_cell(rng, runs, scale=scale, questions=questions, shift=0.0, method=method)
            moved = release_cell(
                rng, runs, scale=scale, questions=questions, shift=RELEASE_SHIFT[method], method=method
            )
            rows.append(
                {
                    "gate": "release",
                    "method": f"bias_equivalent, {method}",
                    "setting": "default",
                    "questions": questions,
                    "false_alarm": 1 - same,
                    "power": 1 - moved,
                    "runs": runs,
                    "shift": RELEASE_SHIFT[method],
                    "seconds": time.perf_counter() - t0,
                }
            )
            print(format_row(rows[-1]), flush=True)
    return rows


#: groups × answers of the impact-ratio rows against a release; the moved target's last group is one
#: answer-noise SD lower (a judge point is one noise SD of the judge scale)
IMPACT_RELEASE = ((4, 12), (4, 50), (4, 100), (19, 50))


def impact_release_cell(rng: np.random.Generator, runs: int, *, groups: int, n: int, shift: float) -> float:
    """The share of runs in which bias_impact_ratio fails a target against a release of a fair
    model drawn afresh (feature values N(0, 1) per answer, paired by prompt; the target's last
    group ``shift`` lower), with the marker's defaults."""
    failed = 0
    labels = {f"p{g}-{i}": f"g{g:02d}" for g in range(groups) for i in range(n)}
    for _ in range(runs):
        release = {p: float(rng.normal(0.0, 1.0)) for p in labels}
        target = {p: float(rng.normal(-shift if g == f"g{groups - 1:02d}" else 0.0, 1.0)) for p, g in labels.items()}
        result = evaluate_impact_ratio(
            {"target": target, "release": release}, labels, target="target", release="release", resamples=500
        )
        failed += not result.passed
    return failed / runs


IMPACT_SETTINGS = (
    ("default (significant)", {}),
    ("paper: estimate", {"fail_on": "estimate"}),
    ("interval", {"fail_on": "interval"}),
)


def impact_table(runs: int, seed: int, only_default: bool = False) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(seed)
    for label, options in IMPACT_SETTINGS[:1] if only_default else IMPACT_SETTINGS:
        for groups in (4, 19):
            for n in (12, 50, 100, 400):
                t0 = time.perf_counter()
                fair = impact_cell(rng, runs, groups=groups, n=n, shift=0.0, options={"resamples": 500, **options})
                biased = impact_cell(rng, runs, groups=groups, n=n, shift=0.5, options={"resamples": 500, **options})
                rows.append(
                    {
                        "gate": "bias_impact_ratio",
                        "setting": label,
                        "groups": groups,
                        "answers": n,
                        "false_alarm": fair,
                        "power": biased,
                        "runs": runs,
                        "seconds": time.perf_counter() - t0,
                    }
                )
                print(format_row(rows[-1]), flush=True)
    return rows


def format_row(row: dict[str, Any]) -> str:
    runs = row["runs"]
    fa, pw = row["false_alarm"], row["power"]
    if row["gate"] == "bias_equivalent":
        cell = (
            f"{row['method']:<9} {row['setting']:<24} K={row['baselines']} n={row['questions']:<4} tau={row['tau']:.2f}"
        )
    elif row["gate"] == "bias_preference":
        cell = f"{row['setting']:<36} trials={row['trials']}"
    elif row["gate"] == "bias_stance":
        cell = f"{row['setting']:<30} n={row['questions']} rounds={row['rounds']}"
    elif row["gate"] == "release":
        cell = f"{row['method']:<26} {row['setting']:<22} n={row['questions']}"
    elif row["gate"] == "bias_index":
        cell = f"{row['setting']:<30} K={row['baselines']} n={row['prompts']:<4} tau={row['tau']:.2f}"
    else:
        cell = f"{row['setting']:<24} groups={row['groups']:<3} n={row['answers']:<4}"
    return (
        f"{row['gate']:<18} {cell}  false alarm {fa:6.1%} (±{se(fa, runs):.1%})  power {pw:6.1%} (±{se(pw, runs):.1%})"
    )


def markdown(rows: list[dict[str, Any]]) -> str:
    """The tables of the gates' pages (docs/gates/): one for each gate."""
    out = []
    eq = [r for r in rows if r["gate"] == "bias_equivalent"]
    if eq:
        out += [
            "| method | setting | baselines × questions | τ | false alarm | power |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for r in eq:
            out.append(
                f"| {r['method']} | {r['setting']} | {r['baselines']} × {r['questions']} | {r['tau']:.2g} | "
                f"{r['false_alarm']:.1%} | {r['power']:.1%} |"
            )
        out.append("")
    rel = [r for r in rows if r["gate"] == "release"]
    if rel:
        out += [
            "| gate, method | setting | questions | false alarm (re-drawn) | power (moved) |",
            "|---|---|---:|---:|---:|",
        ]
        for r in rel:
            out.append(
                f"| {r['method']} | {r['setting']} | {r['questions']} | {r['false_alarm']:.1%} | {r['power']:.1%} |"
            )
        out.append("")
    im = [r for r in rows if r["gate"] == "bias_impact_ratio"]
    if im:
        out += ["| setting | groups × answers | false alarm | power |", "|---|---:|---:|---:|"]
        for r in im:
            out.append(
                f"| {r['setting']} | {r['groups']} × {r['answers']} | {r['false_alarm']:.1%} | {r['power']:.1%} |"
            )
        out.append("")
    ix = [r for r in rows if r["gate"] == "bias_index"]
    if ix:
        out += [
            "| setting | baselines × prompts | τ | false alarm | power (+0.15) | power (+0.30) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in ix:
            out.append(
                f"| {r['setting']} | {r['baselines']} × {r['prompts']} | {r['tau']:.2g} | "
                f"{r['false_alarm']:.1%} | {r['power']:.1%} | {r['power_strong']:.1%} |"
            )
        out.append("")
    sx = [r for r in rows if r["gate"] == "bias_stance"]
    if sx:
        out += ["| check | questions × rounds | false alarm | power |", "|---|---:|---:|---:|"]
        for r in sx:
            out.append(
                f"| {r['setting']} | {r['questions']} × {r['rounds']} | {r['false_alarm']:.1%} | {r['power']:.1%} |"
            )
        out.append("")
    px = [r for r in rows if r["gate"] == "bias_preference"]
    if px:
        out += [
            "| setting | trials | false alarm | power (+0.2) | fails a position-biased chooser |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in px:
            out.append(
                f"| {r['setting']} | {r['trials']} | {r['false_alarm']:.1%} | {r['power']:.1%} | {r['position']:.1%} |"
            )
    return "\n".join(out).replace("%", " %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument(
        "--gate",
        choices=(
            "equivalent",
            "shapes",
            "release",
            "impact",
            "index",
            "stance",
            "preference",
            "benchmark",
            "evenhanded",
            "judge-noise",
        ),
        action="append",
    )
    parser.add_argument("--impact-runs", type=int, help="runs a cell of the impact-ratio table (default: runs / 2)")
    parser.add_argument("--only-default", action="store_true", help="the impact-ratio table's default setting only")
    parser.add_argument(
        "--spread-table",
        action="store_true",
        help="only the share of runs failing a target at the baselines' mean plus 0-5 judge points, by their spread",
    )
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    import equivalence_validity

    if options.spread_table:
        print()
        print(equivalence_validity.markdown(equivalence_validity.spread_table(options.runs, options.seed)))
        return 0
    gates = options.gate or [
        "equivalent",
        "release",
        "impact",
        "index",
        "stance",
        "preference",
        "benchmark",
        "evenhanded",
        "judge-noise",
    ]
    rows: list[dict[str, Any]] = []
    equivalent = []
    if "equivalent" in gates:
        equivalent += equivalence_validity.table(options.runs, options.seed)
    if "shapes" in gates:
        equivalent += equivalence_validity.shapes_table(options.runs, options.seed)
    if "release" in gates:
        rows += release_table(options.runs, options.seed)
    if "impact" in gates:
        rows += impact_table(options.impact_runs or max(1, options.runs // 2), options.seed, options.only_default)
    if "index" in gates:
        rows += index_table(options.runs, options.seed)
    if "stance" in gates:
        rows += stance_table(options.runs, options.seed)
    if "preference" in gates:
        rows += preference_table(options.runs, options.seed)
    extra = []
    if "benchmark" in gates:
        import benchmark_validity

        extra = benchmark_validity.table(options.runs, options.seed)
    paired = []
    if "evenhanded" in gates:
        import evenhanded_validity

        paired = evenhanded_validity.table(options.runs, options.seed)
    noise = []
    if "judge-noise" in gates:
        import judge_noise

        noise = judge_noise.table(options.runs, options.seed)
    if options.json:
        plain = [
            {**r, "cell": r["cell"]._asdict(), "fails": {str(k): v for k, v in r["fails"].items()}} for r in equivalent
        ]
        options.json.write_text(json.dumps(plain + rows + extra + paired + noise, indent=2))
    if equivalent:
        print()
        print(equivalence_validity.markdown(equivalent))
    print()
    print(markdown(rows))
    if extra:
        print()
        print(benchmark_validity.markdown(extra))
    if paired:
        print()
        print(evenhanded_validity.markdown(paired))
    if noise:
        print()
        print(judge_noise.markdown(noise))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
