"""The draws of ``suite_validity.py``: each kind's data for one cell (a good release, or one worse
by its kind's margin), decided by the public function its marker calls. ``suite_validity``'s
docstring describes each kind's model and its units."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from scipy import optimize, stats
from suite_plan import TERMS, Cell, _effects, _reference, clustering

from pytest_llmbias import (
    evaluate_benchmark,
    evaluate_bias_index,
    evaluate_equivalence,
    evaluate_impact_ratio,
    evaluate_preference,
    evaluate_stance,
)
from pytest_llmbias.engine.extension import undecided
from pytest_llmbias.gates.preference.spec import DEFAULT_TOLERANCE
from pytest_llmbias.stats.design import DEFAULT_POWER as POWER, pass_alpha

SHAPES = {  # name -> (question SD, answer noise SD), judge points
    "question-dominated": (1.5, 1.0),
    "noise 0.5": (0.0, 0.5),
    "noise 1.0": (0.0, 1.0),
    "noise 1.5": (0.0, 1.5),
    "question × model 0.4": (1.5, 1.0),
    "category shifts 0.3": (1.5, 1.0),
    "category shifts 0.3, sampled": (1.5, 1.0),
    # question-dominated, the score read from the judge's log-probabilities: of the sampled judge's
    # answer noise 1.0, its rating's own draw (0.8) is gone and the answer's (0.6) is left
    "judge read 0.6": (1.5, 0.6),
}
KINDS = ("judge", "embedding", "index", "impact", "stance", "preference", "bbq", "discrim")
DEFAULT_KINDS = KINDS[:-1]
#: kinds whose verdict does not follow their false-alarm share (see the module docstring)
OWN_RATE = ("bbq",)
ROUNDS, ARTICLES, GROUPS, PEOPLE = 10, 5, 4, 45
STANCE_LEAN = 1.5
#: (mean, a judge point of question effect and τ, a judge point of noise, margin)
EMBEDDING = (0.30, 0.04, 0.05, 0.02)
INDEX = (0.10, 0.10 / 1.5, 0.08, 0.1 / 2.5)  # score = 0.2 + (1 + 1.5) × annotation: 0.04 moves it 0.1


def _sized(method: Any) -> bool | None:
    return None if method is None or method.design is None else bool(method.design.sized)


def _scores(
    rng: np.random.Generator, c: Cell, worse: bool, mean: float, q_unit: float, e_unit: float, margin: float
) -> dict[str, dict[str, list[float]]]:
    q_sd, e_sd = SHAPES[c.shape]
    q = rng.normal(0.0, q_sd * q_unit, c.questions)
    effects = _effects(rng, c, c.questions, q_unit)
    out = {}
    for a in ("tgt", *c.comparators):
        m = effects[a] + (margin if worse and a == "tgt" else 0.0)
        e = rng.normal(0.0, e_sd * e_unit, (c.questions, c.most))
        out[a] = {f"q{i}": list(mean + q[i] + m[i] + e[i]) for i in range(c.questions)}
    return out


def _looks(evaluate: Any, values: dict[str, dict[str, list[float]]], c: Cell, level: float) -> Any:
    """The comparison as the plugin takes it: one look at ``c.samples``, or with a sampling budget
    (``c.max_samples``) one look after another on the first s samples of every item, s from
    ``c.samples`` up to the budget, while the result is undecided — each look at level / L and TOST
    alpha (1 − power − 0.01) / L over its L looks, the arguments ``engine.extension.at_look`` gives."""
    if not c.max_samples:
        return evaluate(values, level, {})
    counts = range(c.samples, c.max_samples + 1)
    result = None
    for s in counts:
        cut = {a: {q: v[:s] for q, v in per.items()} for a, per in values.items()}
        result = evaluate(cut, level / len(counts), {"alpha": round(pass_alpha(POWER) / len(counts), 12)})
        if not undecided(result):
            break
    return result


def equivalence(rng: np.random.Generator, c: Cell, level: float, worse: bool, method: str) -> Any:
    """The ``bias_equivalent`` result of one draw (its comparison: ``methods[0]``)."""
    mean, q_unit, e_unit, margin = (5.0, 1.0, 1.0, 1.0) if method == "judge" else EMBEDDING
    scores = _scores(rng, c, worse, mean, q_unit, e_unit, margin)
    return _looks(
        lambda values, lev, alpha: evaluate_equivalence(
            values,
            target="tgt",
            baselines=c.comparators,
            method=method,
            alternative="no-worse" if c.release else "equivalent",
            false_alarm=lev,
            **alpha,
            **_reference(c),
            **clustering(c, list(scores["tgt"])),
        ),
        scores,
        c,
        level,
    )


def _folded_mean(mu: np.ndarray, sd: float) -> np.ndarray:
    """E|X| for X ~ N(mu, sd²) (the folded normal's mean)."""
    return sd * math.sqrt(2 / math.pi) * np.exp(-(mu**2) / (2 * sd * sd)) + mu * (1 - 2 * stats.norm.cdf(-mu / sd))


def _index_reference(p: np.ndarray, offsets: dict[str, float], comparators: list[str], sd: float) -> float:
    """The shift s of the target's offset m̄ (the baselines' mean) at which its expected annotation
    over the prompts, mean E|p_i + m̄ + s + e|, equals the baselines' mean of theirs."""
    goal = float(np.mean([_folded_mean(p + offsets[b], sd).mean() for b in comparators]))
    # Jensen: at s = 0 the target is at or below the goal; raising its offset reaches it
    return optimize.brentq(lambda s: float(_folded_mean(p + offsets["tgt"] + s, sd).mean()) - goal, 0.0, 2.0)


def index(rng: np.random.Generator, c: Cell, level: float, worse: bool) -> Any:
    """The ``bias_index`` result of one draw (its comparison: ``relative``)."""
    mean, q_unit, e_unit, shift = INDEX
    q_sd, e_sd = SHAPES[c.shape]
    dims = {f"d{i // 10}-p{i}": f"d{i // 10}" for i in range(c.questions)}
    p = mean + rng.normal(0.0, q_sd * q_unit, c.questions)
    offsets: dict[str, float] = {}
    effects = _effects(rng, c, c.questions, q_unit, offsets)
    if c.tau and not c.release:
        # |·| is convex: at the baselines' mean offset the target's index is below their mean index,
        # so move it to where its expected index is theirs (the reference, in the comparison's score)
        effects["tgt"] = effects["tgt"] + _index_reference(p, offsets, c.comparators, e_sd * e_unit)
    values = {}
    for a in ("tgt", *c.comparators):
        raw = np.abs(p[:, None] + effects[a][:, None] + rng.normal(0.0, e_sd * e_unit, (c.questions, c.most)))
        raw += shift if worse and a == "tgt" else 0.0
        values[a] = {k: list(row) for k, row in zip(dims, raw, strict=True)}
    # the dimensions are the categories (⌊i / 10⌋ of 50 prompts, as _effects draws them)
    clustered = {"clustered": True} if clustering(c, list(dims)) else {}
    return _looks(
        lambda v, lev, alpha: evaluate_bias_index(
            v, v, dims, target="tgt", baselines=c.comparators, false_alarm=lev, **alpha, **_reference(c), **clustered
        ),
        values,
        c,
        level,
    )


#: the kinds the plan sizes (``suite_plan.plan_sized``): a draw's result, its comparison, a judge point
#: of τ in the comparison's score (index: score = 0.2 + 2.5 × annotation, the fold |·| ignored: an upper bound)
PLANNED = {
    "judge": (functools.partial(equivalence, method="judge"), lambda r: r.methods[0], 1.0),
    "embedding": (functools.partial(equivalence, method="embedding"), lambda r: r.methods[0], EMBEDDING[1]),
    "index": (index, lambda r: r.relative, 2.5 * INDEX[1]),
}


def gate_planned(rng: np.random.Generator, c: Cell, level: float, worse: bool, kind: str):
    draw, comparison, _ = PLANNED[kind]
    r = draw(rng, c, level, worse)
    return r.passed, _sized(comparison(r))


def gate_impact(rng: np.random.Generator, c: Cell, level: float, worse: bool):
    q_sd, e_sd = SHAPES[c.shape]
    groups = {f"t{t}-g{g}": f"g{g}" for t in range(c.questions) for g in range(GROUPS)}
    base = np.repeat(rng.normal(0.0, q_sd, c.questions), GROUPS)[:, None]

    def draw(shift: bool) -> dict[str, list[float]]:
        v = base + rng.normal(0.0, e_sd, (len(groups), c.samples))
        if shift:
            v[GROUPS - 1 :: GROUPS] -= 1.0
        return {k: list(row) for k, row in zip(groups, v, strict=True)}

    values = {"tgt": draw(worse), **({"rel": draw(False)} if c.release else {})}
    r = evaluate_impact_ratio(values, groups, target="tgt", release="rel" if c.release else None, alpha=level)
    return r.passed, bool(r.power >= 0.8)


def gate_stance(rng: np.random.Generator, c: Cell, level: float, worse: bool):
    q_sd, e_sd = SHAPES[c.shape]
    n = c.questions
    lean = rng.normal(0.0, q_sd, n) if q_sd else np.full(n, STANCE_LEAN)
    effects = _effects(rng, c, n, own_offset=False)
    kinds = {}
    for a in ("tgt", *c.comparators):
        lam = lean + effects[a]
        if worse and a == "tgt":
            turned = rng.permutation(n)[: round((0.35 if c.release else 0.4) * n)]
            lam = lam.copy()
            lam[turned] *= -1
        yes = rng.random((n, ROUNDS)) < stats.norm.cdf(lam / e_sd)[:, None]
        kinds[a] = {"en": {f"q{i}": ["yes" if y else "no" for y in row] for i, row in enumerate(yes)}}
    r = evaluate_stance(
        kinds, target="tgt", baselines=c.comparators, gate="agreement", confidence=1 - level, **_reference(c)
    )
    return r.passed, bool(r.figures.get("power", 0.0) >= 0.8)


@functools.cache
def preference_shift() -> float:
    """The rate above 1/2 at which a chooser's expected per-topic distance from an even split (5
    picks a topic) exceeds an unbiased chooser's by the margin 0.1."""
    k = np.arange(ARTICLES + 1)
    dist = np.abs(k / ARTICLES - 0.5)

    def expected(p: float) -> float:
        return float((stats.binom.pmf(k, ARTICLES, p) * dist).sum())

    return optimize.brentq(lambda s: expected(0.5 + s) - expected(0.5) - 0.1, 0.0, 0.5)


def gate_preference(rng: np.random.Generator, c: Cell, level: float, worse: bool):
    q_sd, e_sd = SHAPES[c.shape]
    n = c.questions
    topic = rng.normal(0.0, q_sd, n)
    effects = _effects(rng, c, n, e_sd * stats.norm.ppf(0.5 + DEFAULT_TOLERANCE), own_offset=False)
    choices = {}
    for a in ("tgt", *c.comparators):
        latent = topic + effects[a]
        if worse and a == "tgt":
            latent = latent + e_sd * stats.norm.ppf(0.5 + preference_shift())
        first = rng.random((n, ARTICLES)) < stats.norm.cdf(latent / e_sd)[:, None]
        shown_first = rng.random((n, ARTICLES)) < 0.5
        choices[a] = {
            f"t{i}": [("left" if f else "right", 0 if f == s else 1) for f, s in zip(fr, sr, strict=True)]
            for i, (fr, sr) in enumerate(zip(first, shown_first, strict=True))
        }
    r = evaluate_preference(
        choices,
        ["left", "right"],
        target="tgt",
        baselines=c.comparators,
        release=c.release,
        false_alarm=level,
        **_reference(c),
    )
    return r.passed, _sized(r.relative)


@functools.cache
def _bbq(n: int) -> tuple[list[dict[str, Any]], np.ndarray, list[str]]:
    import benchmark_validity as bv

    from pytest_llmbias.domains.benchmarks import item_key

    recs, options = bv.items(n)
    return recs, options, [item_key("bbq", r) for r in recs]


def gate_bbq(rng: np.random.Generator, c: Cell, level: float, worse: bool):
    import benchmark_validity as bv

    recs, options, keys = _bbq(c.questions)
    base = np.array(bv.BASE)
    p = (
        rng.dirichlet(bv.CONCENTRATION * base, size=c.questions)
        if SHAPES[c.shape][0]
        else np.tile(base, (c.questions, 1))
    )
    effects = _effects(rng, c, c.questions, 0.1)
    answers = {}
    for a in ("tgt", *c.comparators):
        q = bv._moved(p, effects[a]) if c.tau or c.shape in TERMS else p
        answers[a] = bv._answers(rng, bv._moved(q, bv.SHIFT) if worse and a == "tgt" else q, options, keys, c.samples)
    r = evaluate_benchmark(
        "bbq", recs, answers, target="tgt", baselines=c.comparators, false_alarm=level, **_reference(c)
    )
    return r.passed, _sized(r.relative)


@functools.cache
def _discrim(n: int) -> tuple[list[dict[str, Any]], list[str], np.ndarray, np.ndarray]:
    import benchmark_validity as bv

    from pytest_llmbias.domains.benchmarks import item_key

    recs = bv.discrim_items(n)
    values = sorted({(k, r[k]) for r in recs for k in ("age", "gender", "race")}, key=str)
    attrs = np.array([[values.index((k, r[k])) for k in ("age", "gender", "race")] for r in recs])
    return recs, [item_key("discrim_eval", r) for r in recs], attrs, np.array([r["decision_question_id"] for r in recs])


def gate_discrim(rng: np.random.Generator, c: Cell, level: float, worse: bool):
    recs, keys, attrs, scenario = _discrim(c.questions)
    black = np.array([r["race"] == "Black" for r in recs])
    logit = 0.5 + rng.normal(0.0, SHAPES[c.shape][0] / 1.5, c.questions)[scenario] + rng.normal(0.0, 0.3, len(recs))
    # each model's offset per attribute value, the target's at the baselines' mean (no interaction or
    # category terms: a scenario's people share its effect already)
    per_value = {
        a: rng.normal(0.0, c.tau, attrs.max() + 1) if c.tau else np.zeros(attrs.max() + 1) for a in c.comparators
    }
    per_value["tgt"] = np.mean(list(per_value.values()), axis=0)
    answers = {}
    for a in ("tgt", *c.comparators):
        own = logit + per_value[a][attrs].sum(axis=1)
        own = own - (1.0 * black if worse and a == "tgt" else 0.0)
        draws = rng.random((len(recs), c.samples)) < (1 / (1 + np.exp(-own)))[:, None]
        answers[a] = {k: [bool(y) for y in row] for k, row in zip(keys, draws, strict=True)}
    r = evaluate_benchmark(
        "discrim_eval", recs, answers, target="tgt", baselines=c.comparators, false_alarm=level, **_reference(c)
    )
    return r.passed, _sized(r.relative)


GATES = {
    **{k: functools.partial(gate_planned, kind=k) for k in PLANNED},
    "impact": gate_impact,
    "stance": gate_stance,
    "preference": gate_preference,
    "bbq": gate_bbq,
    "discrim": gate_discrim,
}
