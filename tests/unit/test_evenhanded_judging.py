"""The even-handedness judges: a panel's readings combined per judgement (mean or median, the
unreadable left out), the anchor pairs, and the trust figures (agreement, test-retest, anchors)
with the problems that leave a verdict inconclusive."""

from __future__ import annotations

import math

import pytest

from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.domains.domain import Domain, Pair
from pytest_llmbias.gates.evenhanded import judging as ej
from pytest_llmbias.scoring import pair_judge as pj
from pytest_llmbias.store.calls import Response

RUBRICS = pj.rubrics()
PAIRS = tuple(
    Pair(f"p{k}", "SCHOOLS", "essay", (f"Argue for option {k}.", f"Argue against option {k}."), ("pro", "con"))
    for k in range(4)
)
ANSWERS = {p.id: {0: f"For {p.id}: yes.", 1: f"Against {p.id}: no."} for p in PAIRS}
J1, J2 = ModelSpec("openai/j1", "j1"), ModelSpec("openai/j2", "j2")


def _ratings(said):
    """Every judge call of ``PAIRS`` answered as ``said(judge, kind, pair, order_or_half)`` says:
    text, or (text, {letter: probability})."""
    out = {}
    for judge in (J1, J2):
        for pair in PAIRS:
            for h in (0, 1):
                for what in ej.RATINGS:
                    prompt = pj.answer_prompt(RUBRICS[what], pair.prompts[h], ANSWERS[pair.id][h])
                    call = pj.judge_call(judge, prompt, RUBRICS[what])
                    out[call.key] = Response(call, said(judge, what, pair, h))
            for order in (pj.AB, pj.BA):
                call = pj.judge_call(
                    judge,
                    pj.pair_prompt(RUBRICS["pair"], pair.prompts, (ANSWERS[pair.id][0], ANSWERS[pair.id][1]), order),
                    RUBRICS["pair"],
                )
                got = said(judge, "pair", pair, order)
                text, top = got if isinstance(got, tuple) else (got, None)
                tops = None if top is None else tuple((k, math.log(v)) for k, v in top.items())
                out[call.key] = Response(call, text, top_logprobs=tops)
    return out


def test_a_panel_is_combined_per_judgement_and_the_unreadable_left_out():
    def said(judge, what, pair, which):
        if what == "pair":
            if judge is J1:
                return "C", {"C": 0.8, "A": 0.2}
            return "no letter here" if pair.id == "p0" else "A" if which == pj.AB else "B"
        if what == "refusal":
            return "Y" if (judge is J2 and which == 1) else "N"
        return "?" if pair.id == "p1" else "Y"

    orders = {p.id: (pj.AB, pj.BA) for p in PAIRS}
    read = ej.read_model(PAIRS, ANSWERS, (J1, J2), RUBRICS, orders, _ratings(said))
    first = read.judgements[0]  # p0: only J1's pair judgement is readable
    assert first["alike"] == pytest.approx(0.8) and first["refusal"] == (0.0, 0.5) and first["opposing"] == (1.0, 1.0)
    # p2: J1 alike 0.8, J2 says side a (first when a is shown first, second when b is): alike 0.4, a favoured
    assert read.judgements[2]["alike"] == pytest.approx(0.4) and read.judgements[2]["favoured"] == 0
    assert read.judgements[1]["opposing"] is None  # neither judge readable
    assert read.alike == {"j1": {p.id: pytest.approx(0.8) for p in PAIRS}, "j2": {p.id: 0.0 for p in PAIRS[1:]}}
    assert len(read.unread) == 2 + 4 and read.reading == {"logprobs": 8, "vote": 6 + 32 - 4}
    median = ej.read_model(PAIRS, ANSWERS, (J1, J2), RUBRICS, orders, _ratings(said), "median")
    assert median.judgements[0]["refusal"] == (0.0, 0.5)  # the median of two is their mean


def test_anchor_pairs_are_chosen_by_hash_from_the_first_batch():
    domain = Domain("d", "d", "d", "f", "i", pairs=PAIRS)
    chosen = ej.anchor_pairs(domain, PAIRS)
    assert len(chosen) == ej.ANCHOR_PAIRS and chosen == ej.anchor_pairs(domain, PAIRS[::-1])
    batch = domain.restricted(["p0", "p1", "p2"], first=["p3", "p1"])
    assert {p.id for p in ej.anchor_pairs(batch, PAIRS)} == {"p1", "p3"}
    calls = ej.anchor_calls(J1, RUBRICS["pair"], chosen[:1])
    assert [label for label, _ in calls] == [f"anchor:{chosen[0].id}:ab", f"anchor:{chosen[0].id}:ba"]
    assert ej.ANCHOR_ANSWER in calls[0][1].messages[-1][1]


def test_trust_figures_and_the_problems_they_raise():
    alike = {"j1": {f"m:{k}": v for k, v in enumerate((0.9, 0.1, 0.8, 0.2, 0.7))}}
    alike["j2"] = {k: min(1.0, v + 0.05) for k, v in alike["j1"].items()}
    steady = {k: (v, v) for k, v in alike["j1"].items()}
    trust = ej.trust_figures(
        (J1, J2), alike, {"j1": steady}, {"j1": {"p0": 0.9}, "j2": {"p0": 0.6}}, combine_how=None, min_agreement=0.5
    )
    assert trust["combine"] == "mean" and trust["agreement"]["alpha"] > 0.9 and trust["agreement"]["n_items"] == 5
    assert trust["retest"]["j1"]["alpha"] == pytest.approx(1.0) and trust["retest"]["j1"]["differ"] == 0
    assert ej.trust_problems(trust) == []
    lines = ej.trust_lines(trust)
    assert lines[0] == "pair judges: j1, j2 (mean of their probabilities)"
    assert "anchors of j2: 1 of 1 pairs with the same refusal on both sides judged alike" in lines
    flipped = {k: (v, 1 - v) for k, v in alike["j1"].items()} | {"m:9": (0.5, None)}
    worse = ej.trust_figures(
        (J1,), alike, {"j1": flipped}, {"j1": {"p0": 0.3, "p1": None}}, combine_how=None, min_agreement=0.5
    )
    assert worse["agreement"] is None and worse["combine"] is None
    assert worse["retest"]["j1"]["unread"] == 1 and worse["retest"]["j1"]["differ"] == 5
    problems = ej.trust_problems(worse)
    assert "test-retest agreement" in problems[0] and "below min_judge_agreement 0.5" in problems[0]
    assert "missed 2 of 2 anchor pairs: pair 'p0'" in problems[1] and "P(alike) 0.30" in problems[1]
    few = ej.trust_figures(
        (J1,), alike, {"j1": dict(list(steady.items())[:2])}, {}, combine_how=None, min_agreement=0.5
    )
    assert "too few to measure" in ej.trust_lines(few)[1]


def test_the_retest_draw_is_another_call():
    first, again = ej.retest_calls(J1, RUBRICS["pair"], PAIRS[0], ANSWERS["p0"], pj.AB)
    assert first.key != again.key and first == pj.judge_call(J1, first.messages[-1][1], RUBRICS["pair"])
