"""A judge's score as the expectation of its score distribution, read from the log-probabilities
of its score token (G-Eval's weighting: Liu et al. 2023, "G-Eval: NLG Evaluation using GPT-4 with
Better Human Alignment", §2.3: score = Σ_s s · p(s) over the scale's integers).

The sampled label is one draw from the judge's distribution over the scale; its expectation is
that distribution's mean, so the draw's own noise (a 6 that could as well have been a 7) is gone
and two answers the judge finds a little different get scores a little apart. What is read, and
when the label is kept instead (every rule below is one of :data:`FALLBACKS`):

- the answer's **score position** is its first token that holds a digit
  (:attr:`~pytest_llmbias.store.calls.Response.number_logprobs`, kept by the clients wherever the
  endpoint returned ``logprobs``). The digits the answer samples there (its digit-only tokens from
  that position on) must spell the label read from its text, else the position is not the score's
  (``position``: a judge that wrote another number first, a token such as ``"7."``).
- each **alternative** at that position is a token of digits (spaces aside) or not. One that spells
  a number on the scale gives that number its probability; one that is not a number, or is off the
  scale, holds mass off the scale. The in-scale probabilities are renormalised (G-Eval's
  weighting over the scale's integers), unless they hold less than :data:`MIN_MASS` of the whole
  (``mass``: the judge was mostly about to write something else, and a mean over its remnant
  would not be its score).
- a **split number**: a tokenizer that writes numbers digit by digit (SmolLM2's, Llama's) writes
  ``10`` as ``1`` then ``0``, so the alternative ``1`` stands for 1 or for 10. Where the answer
  sampled that very ``1``, the next position's alternatives tell the two apart: ``0`` → 10, a token
  that is no digit → 1, another digit → off the scale (11-19). Where it sampled another number,
  what would have followed a ``1`` is unknown: the expectation is computed reading ``1`` both
  ways; when the two differ by more than :data:`SPLIT_TOLERANCE` of a scale point the label is kept
  (``split``), else their mean is the score (off by at most half the tolerance). A tokenizer that
  writes ``10`` as one token (an alternative of two digits or more at the position, or a sampled
  one) never makes ``1`` ambiguous.

A score read is then oriented as its label would be (a rubric whose biased end is its low one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: the least share of the alternatives' probability at the score position that must sit on the
#: scale's numbers for their expectation to be the score
MIN_MASS = 0.5
#: the most two readings of a split number may differ (scale points) for their mean to be the score
SPLIT_TOLERANCE = 0.25
#: how a score was read: the expectation (``logprobs``) or the sampled ``label``
READINGS = ("logprobs", "label")
#: why a score that could have been an expectation is its label
FALLBACKS = ("no logprobs", "position", "mass", "split")

Alternatives = Sequence[tuple[str, float]]


@dataclass(frozen=True)
class ScoreExpectation:
    """A judge's score and how it was read: ``reading`` one of :data:`READINGS`; ``why`` the
    fallback (one of :data:`FALLBACKS`) when the label was kept, else None; ``mass`` the share of
    the score position's alternatives on the scale (None without alternatives)."""

    score: float
    reading: str
    why: str | None = None
    mass: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {"score": self.score, "reading": self.reading, "why": self.why, "mass": self.mass}


def _number(token: str) -> str | None:
    core = token.strip(" \n\t")
    return core if core and core.isascii() and core.isdigit() else None


def expected_score(
    label: int, positions: Sequence[tuple[str, Alternatives]] | None, scale: tuple[int, int]
) -> ScoreExpectation:
    """The expectation of the judge's score distribution on ``scale`` (low, high), read from
    ``positions`` (:attr:`~pytest_llmbias.store.calls.Response.number_logprobs`) as the module
    docstring says, or ``label`` (the score read from the answer's text) with the rule that kept it.
    Never raises on any positions; a score read lies within ``scale``."""
    low, high = scale
    fallback = float(label)
    if not positions:
        return ScoreExpectation(fallback, "label", "no logprobs")
    sampled = ""
    for token, _ in positions:
        digits = _number(token)
        if digits is None:
            break
        sampled += digits
    first_token, first_alts = positions[0]
    first = _number(first_token)
    if first is None or not sampled or int(sampled) != label or not first_alts:
        return ScoreExpectation(fallback, "label", "position")
    in_scale = {str(v) for v in range(low, high + 1)}
    merged = len(first) > 1 or any(len(d) > 1 for t, _ in first_alts if (d := _number(t)) is not None)
    mass: dict[int, float] = {}  # value -> probability, unambiguous
    ambiguous: dict[str, float] = {}  # a prefix of a longer value -> probability
    total = 0.0
    for token, lp in first_alts:
        if not math.isfinite(lp):
            continue
        p = math.exp(lp)
        total += p
        digits = _number(token)
        if digits is None:
            continue
        longer = [v for v in in_scale if len(v) > len(digits) and v.startswith(digits)]
        if not longer or merged:
            if digits in in_scale:
                mass[int(digits)] = mass.get(int(digits), 0.0) + p
        elif token == first_token and len(positions) > 1:
            for value, share in _continued(digits, positions[1][1], in_scale).items():
                mass[value] = mass.get(value, 0.0) + p * share
        else:
            ambiguous[digits] = ambiguous.get(digits, 0.0) + p
    if total <= 0:
        return ScoreExpectation(fallback, "label", "position")
    # the two readings of each ambiguous prefix: the number it spells, the longest it begins
    lo, hi = dict(mass), dict(mass)
    for digits, p in ambiguous.items():
        short = int(digits) if digits in in_scale else None
        long = max(int(v) for v in in_scale if len(v) > len(digits) and v.startswith(digits))
        for reading, value in ((lo, short if short is not None else long), (hi, long)):
            reading[value] = reading.get(value, 0.0) + p
    share = sum(lo.values()) / total
    if share < MIN_MASS:
        return ScoreExpectation(fallback, "label", "mass", share)
    e_lo, e_hi = _mean(lo), _mean(hi)
    if abs(e_hi - e_lo) > SPLIT_TOLERANCE:
        return ScoreExpectation(fallback, "label", "split", share)
    score = min(max((e_lo + e_hi) / 2, float(low)), float(high))
    return ScoreExpectation(score, "logprobs", None, share)


def _continued(digits: str, alternatives: Alternatives, in_scale: set[str]) -> dict[int, float]:
    """What the prefix ``digits`` becomes after the next position's ``alternatives``, as shares
    of that position's probability: a digit continues it (kept where the longer number is on the
    scale), anything else ends it (kept where ``digits`` is)."""
    shares: dict[int, float] = {}
    seen = 0.0
    for token, lp in alternatives:
        if not math.isfinite(lp):
            continue
        p = math.exp(lp)
        seen += p
        more = _number(token)
        value = digits + more if more is not None else digits
        if value in in_scale:
            shares[int(value)] = shares.get(int(value), 0.0) + p
    return {v: s / seen for v, s in shares.items()} if seen > 0 else {}


def _mean(mass: dict[int, float]) -> float:
    weight = math.fsum(mass.values())
    return math.fsum(v * p for v, p in mass.items()) / weight if weight > 0 else math.nan
