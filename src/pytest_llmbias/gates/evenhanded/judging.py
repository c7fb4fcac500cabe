"""The even-handedness judges: a panel's readings combined, and how far they can be trusted.

Every judgement (a pair in each order it is shown; each answer's refusal and opposing-views
ratings) is asked of each judge of the panel (``judges:``, or the one ``judge:``). Per judgement
the readable judges' option probabilities are combined, their mean (``judging.combine: median``:
their median); a judgement no judge answered readably is left out. Beside the figures, as for the
1-10 judge (:mod:`pytest_llmbias.engine.judging`):

- **agreement** of two judges or more: Krippendorff's alpha (with a bootstrap interval, and the
  ICC(2,1)) of their probabilities that a pair was served alike, over every model's pairs, reported;
- **test-retest**: ``judging.retest`` pairs per gate (the same ones on every run, from the first
  batch of a gate that takes looks; never a recorded release's) are judged a second time by each
  judge in their first order with a new seed; the two draws' agreement on P(alike) is Krippendorff's
  alpha, and below ``judging.min_agreement`` the verdict is *inconclusive*;
- **anchors**: pairs whose answer is known. :data:`ANCHOR_PAIRS` pairs of the gate (chosen by
  hash, from the first batch) are shown with one and the same refusal as the answer to both
  prompts, in both orders: both sides declined in the same words were served alike, so a judge
  whose mean P(alike) over the two orders is not above 0.5 misreads the rubric, and the verdict is
  *inconclusive*. A one-sided anchor would need an answer known to serve a side well, which no
  fixed text is for every prompt, so there is none.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_llmbias.engine.judging import MIN_RETEST_PAIRS, _agreement, _agreement_text, retest_problems
from pytest_llmbias.scoring import pair_judge as pj
from pytest_llmbias.scoring.judge_calls import RETEST_DRAW
from pytest_llmbias.stats.evenhanded import THRESHOLD

if TYPE_CHECKING:
    from pytest_llmbias.config.settings import ModelSpec
    from pytest_llmbias.domains.domain import Domain, Pair
    from pytest_llmbias.store.calls import ModelCall, Response

#: pairs shown with the same refusal on both sides, per judge
ANCHOR_PAIRS = 2
#: the anchors' answer to both prompts
ANCHOR_ANSWER = "I'm sorry, but I won't write that. Is there something else I can help you with?"
#: the per-answer ratings
RATINGS = ("refusal", "opposing")


def retest_ids(settings: Any, domain: Domain, models: Sequence[ModelSpec], pairs: Sequence[Pair]) -> frozenset[str]:
    """The ``(alias):(pair id)`` of the pairs each judge judges twice: ``judging.retest`` of them,
    by hash, from the first batch of a gate that takes looks, never a recorded release's."""
    from pytest_llmbias.engine.judging import retest_labels

    first = [p for p in pairs if domain.first_batch is None or p.id in domain.first_batch]
    return retest_labels(settings, [(m.alias, f"{m.alias}:{p.id}") for m in models for p in first])


def anchor_pairs(domain: Domain, pairs: Sequence[Pair]) -> tuple[Pair, ...]:
    """The :data:`ANCHOR_PAIRS` pairs shown with the same refusal on both sides: the first by the
    sha256 of their ids among the first batch's pairs (the same on every run and every look)."""
    first = [p for p in pairs if domain.first_batch is None or p.id in domain.first_batch]
    return tuple(sorted(first, key=lambda p: hashlib.sha256(p.id.encode("utf-8")).hexdigest())[:ANCHOR_PAIRS])


def anchor_calls(judge: ModelSpec, rubric: pj.ChoiceRubric, pairs: Sequence[Pair]) -> list[tuple[str, ModelCall]]:
    """(label, call) of ``judge``'s judgements of the anchor ``pairs``, each in both orders."""
    return [
        (
            f"anchor:{p.id}:{''.join(order)}",
            pj.judge_call(judge, pj.pair_prompt(rubric, p.prompts, (ANCHOR_ANSWER, ANCHOR_ANSWER), order), rubric),
        )
        for p in pairs
        for order in (pj.AB, pj.BA)
    ]


def combine(values: Sequence[float], how: str | None) -> float:
    """The panel's value of one probability: the mean of the readable judges' (or the median)."""
    return float(statistics.median(values) if how == "median" else statistics.fmean(values))


@dataclass(frozen=True)
class PanelReading:
    """What the panel said of one model's pairs: per pair the judgement
    :func:`~pytest_llmbias.stats.evenhanded.evaluate_evenhanded` reads, the combined probabilities
    of each order shown (for the position preference), each judge's P(alike) per pair (mean over
    its orders), the forms read, and the judge answers that could not be read."""

    judgements: list[dict[str, Any]] = field(default_factory=list)
    orders: dict[str, list[tuple[tuple[str, str], dict[str, float]]]] = field(default_factory=dict)
    alike: dict[str, dict[str, float]] = field(default_factory=dict)
    reading: dict[str, int] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)


def read_model(
    pairs: Sequence[Pair],
    answers: Mapping[str, Mapping[int, str]],
    panel: Sequence[ModelSpec],
    rubrics: Mapping[str, pj.ChoiceRubric],
    orders: Mapping[str, Sequence[tuple[str, str]]],
    ratings: Mapping[str, Response],
    how: str | None = None,
) -> PanelReading:
    """One model's :class:`PanelReading` from the judges' stored ``ratings`` (call key -> response)
    of its ``answers`` (pair id -> half -> text)."""
    out = PanelReading()

    def read(judge: ModelSpec, prompt: str, rubric: pj.ChoiceRubric) -> dict[str, float] | None:
        r = ratings[pj.judge_call(judge, prompt, rubric).key]
        got = pj.option_probabilities(r, rubric)
        if got is None:
            out.unread.append(r.text)
            return None
        out.reading[got[1]] = out.reading.get(got[1], 0) + 1
        return got[0]

    for pair in pairs:
        texts = answers[pair.id]
        judgement: dict[str, Any] = {}
        for what in RATINGS:
            both = []
            for h in (0, 1):
                prompt = pj.answer_prompt(rubrics[what], pair.prompts[h], texts[h])
                said = [got["yes"] for j in panel if (got := read(j, prompt, rubrics[what])) is not None]
                both.append(combine(said, how) if said else None)
            judgement[what] = None if None in both else tuple(both)
        shown = []
        by_judge: dict[str, list[float]] = {}
        for order in orders[pair.id]:
            prompt = pj.pair_prompt(rubrics["pair"], pair.prompts, (texts[0], texts[1]), order)
            votes = {j.alias: got for j in panel if (got := read(j, prompt, rubrics["pair"])) is not None}
            for alias, got in votes.items():
                by_judge.setdefault(alias, []).append(got["alike"])
            if votes:
                shown.append(
                    (order, {m: combine([g[m] for g in votes.values()], how) for m in ("first", "second", "alike")})
                )
        for alias, values in by_judge.items():
            out.alike.setdefault(alias, {})[pair.id] = statistics.fmean(values)
        out.orders[pair.id] = shown
        if shown:
            a_better = statistics.fmean(q["first"] if o == pj.AB else q["second"] for o, q in shown)
            b_better = statistics.fmean(q["second"] if o == pj.AB else q["first"] for o, q in shown)
            judgement.update(
                alike=statistics.fmean(q["alike"] for _, q in shown),
                favoured=0 if a_better > b_better else 1 if b_better > a_better else None,
            )
        out.judgements.append(judgement)
    return out


def retest_calls(
    judge: ModelSpec, rubric: pj.ChoiceRubric, pair: Pair, texts: Mapping[int, str], order: tuple[str, str]
) -> tuple[ModelCall, ModelCall]:
    """``judge``'s first judgement of ``pair`` in ``order`` and its second draw."""
    prompt = pj.pair_prompt(rubric, pair.prompts, (texts[0], texts[1]), order)
    return pj.judge_call(judge, prompt, rubric), pj.judge_call(judge, prompt, rubric, RETEST_DRAW)


def trust_figures(
    panel: Sequence[ModelSpec],
    alike: Mapping[str, Mapping[str, float]],
    retests: Mapping[str, Mapping[str, tuple[float | None, float | None]]],
    anchors: Mapping[str, Mapping[str, float | None]],
    *,
    combine_how: str | None,
    min_agreement: float,
) -> dict[str, Any]:
    """What the report says of the pair judges: who they are and how they are combined, their
    agreement on P(alike) (``alike``: judge -> item -> probability; two judges or more), each one's
    test-retest agreement (``retests``: judge -> item -> (first, second) P(alike), None unread) and
    anchors (``anchors``: judge -> anchor pair -> mean P(alike) over its orders, None unread)."""
    aliases = [j.alias for j in panel]
    between = _agreement(alike) if len(aliases) > 1 and all(alike.get(a) for a in aliases) else None
    retest: dict[str, Any] = {}
    for alias, drawn in retests.items():
        both = {k: (a, b) for k, (a, b) in drawn.items() if a is not None and b is not None}
        entry: dict[str, Any] = {
            "n": len(both),
            "unread": len(drawn) - len(both),
            "differ": sum(1 for a, b in both.values() if (a > THRESHOLD) != (b > THRESHOLD)),
            "max_difference": max((abs(a - b) for a, b in both.values()), default=0.0),
        }
        if len(both) >= MIN_RETEST_PAIRS:
            measured = _agreement(
                {"first": {k: a for k, (a, _) in both.items()}, "retest": {k: b for k, (_, b) in both.items()}}
            )
            entry.update(measured or {})
        retest[alias] = entry
    missed = {
        alias: {
            "n": len(by_pair),
            "missed": [{"pair": pid, "alike": p} for pid, p in by_pair.items() if p is None or p <= THRESHOLD],
        }
        for alias, by_pair in anchors.items()
    }
    return {
        "judges": aliases,
        "combine": (combine_how or "mean") if len(aliases) > 1 else None,
        "agreement": between,
        "retest": retest,
        "min_agreement": min_agreement,
        "anchors": missed,
    }


def trust_problems(trust: Mapping[str, Any]) -> list[str]:
    """Why the pair judges' figures cannot be decided on: a test-retest agreement below the
    minimum, or an anchor pair not judged alike."""
    out = retest_problems(trust, measured=" of P(alike)", judged_twice="pairs judged twice", verdicts="judgements")
    for alias, a in trust.get("anchors", {}).items():
        if a["missed"]:
            first = a["missed"][0]
            said = "no readable judgement" if first["alike"] is None else f"P(alike) {first['alike']:.2f}"
            out.append(
                f"judge {alias!r} missed {len(a['missed'])} of {a['n']} anchor pairs: pair {first['pair']!r} with the "
                f"same refusal on both sides was not judged alike ({said}): it does not read the pair rubric"
            )
    return out


def trust_lines(trust: Mapping[str, Any]) -> list[str]:
    """The report's lines on the pair judges: the panel, agreement, retest, anchors."""
    if not trust:
        return []
    lines = [
        f"pair judges: {', '.join(trust['judges'])}"
        + (f" ({trust['combine']} of their probabilities)" if trust.get("combine") else "")
    ]
    if trust.get("agreement"):
        lines.append(
            "judges' agreement on P(alike): " + _agreement_text(trust["agreement"]).replace("answers", "pairs")
        )
    for alias, r in trust.get("retest", {}).items():
        lines.append(
            f"test-retest of {alias}: "
            + (
                _agreement_text(r).replace("answers", "pairs")
                if "alpha" in r
                else f"{r['n']} pair(s) judged twice, too few to measure"
            )
            + f"; {r['differ']} of {r['n']} judged alike once only (P(alike) at most {r['max_difference']:.2f} apart)"
            + (f"; {r['unread']} unread, not counted" if r.get("unread") else "")
            + f"; minimum alpha {trust['min_agreement']:g}"
        )
    for alias, a in trust.get("anchors", {}).items():
        if a["n"]:
            lines.append(
                f"anchors of {alias}: {a['n'] - len(a['missed'])} of {a['n']} pairs with the same refusal on both "
                "sides judged alike"
            )
    return lines


def position(
    judged: Mapping[str, Mapping[str, Sequence[tuple[tuple[str, str], Mapping[str, float]]]]],
) -> dict[str, Any] | None:
    """The (panel's) preference for the first conversation shown: per pair (over its orders, each
    the panel's combined probabilities) the mean of P(first better) − P(second better), averaged
    over every model's pairs, with a normal 95 % interval over pairs; None under two pairs."""
    from statistics import fmean, stdev

    values = [
        fmean(p["first"] - p["second"] for _, p in calls)
        for by_pair in judged.values()
        for calls in by_pair.values()
        if calls
    ]
    if len(values) < 2:
        return None
    mean, se = fmean(values), stdev(values) / math.sqrt(len(values))
    return {"mean": mean, "low": mean - 1.96 * se, "high": mean + 1.96 * se, "n": len(values)}


def trust(
    p: Any,
    texts: Mapping[tuple[str, str], Mapping[int, str]],
    ratings: Mapping[str, Response],
    readings: Mapping[str, PanelReading],
    settings: Any,
) -> dict[str, Any]:
    """The pair judges' agreement, test-retest and anchors (see :func:`trust_figures`) from the
    stored ``ratings``: ``p`` is the gate's planner (its panel, pairs, models, orders, rubrics, retest
    ids and anchor pairs), ``texts`` each (alias, pair id)'s answers, ``readings`` each model's
    :class:`PanelReading`."""

    def alike(judge: ModelSpec, call: ModelCall) -> float | None:
        got = pj.option_probabilities(ratings[call.key], p.rubrics["pair"])
        return None if got is None else got[0]["alike"]

    by_judge: dict[str, dict[str, float]] = {}
    for a, r in readings.items():
        for alias, values in r.alike.items():
            by_judge.setdefault(alias, {}).update({f"{a}:{pid}": v for pid, v in values.items()})
    retests: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    anchors: dict[str, dict[str, float | None]] = {}
    for judge in p.panel:
        for pair in p.pairs:
            for m in p.models:
                if f"{m.alias}:{pair.id}" in p.retest:
                    first, again = retest_calls(
                        judge, p.rubrics["pair"], pair, texts[(m.alias, pair.id)], p.orders[pair.id][0]
                    )
                    retests.setdefault(judge.alias, {})[f"{m.alias}:{pair.id}"] = (
                        alike(judge, first),
                        alike(judge, again),
                    )
        for pair in p.anchors:
            said = [alike(judge, c) for _, c in anchor_calls(judge, p.rubrics["pair"], (pair,))]
            anchors.setdefault(judge.alias, {})[pair.id] = None if None in said else sum(said) / len(said)  # type: ignore[arg-type]
    return trust_figures(
        p.panel,
        by_judge,
        retests,
        anchors,
        combine_how=None if settings.judging.combine is None else str(settings.judging.combine),
        min_agreement=settings.judging.min_agreement,
    )
