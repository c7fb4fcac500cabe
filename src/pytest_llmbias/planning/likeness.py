"""Whether two asks of the fingerprint probes came from the same model.

A server that batches requests (vLLM, ``llmbias serve``) decodes a greedy probe beside whatever else
it is decoding, and the batch changes the arithmetic slightly: where two next words are nearly tied
the answer can take the other one and go on in other words from there. So two asks of one model
may differ in their answers' ends; a model swapped behind the same name (another checkpoint,
system prompt or sampling) differs from the first words on. :func:`alike` reads each answer's first
:data:`PREFIX_WORDS` words and allows a word-level edit distance up to :data:`TOLERANCE` of them on
each probe (every probe must be within it: the answers with one expected word say little by
themselves, the sentence tells models apart). The figures are chosen from
``benchmarks/fingerprint_drift.py`` (docs/store.md quotes them).

Pure and cheap (no model, no import beyond the standard library): it runs before every run's calls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: how many of an answer's first words are compared
PREFIX_WORDS = 16
#: the largest share of those words that may differ (insertions, deletions, substitutions) on one probe
TOLERANCE = 0.125

_WORD = re.compile(r"\w+|[^\w\s]")


def words(text: str) -> list[str]:
    """``text`` as its words and punctuation marks, lower-cased (case and spacing are not a model's)."""
    return _WORD.findall(text.lower())


def distance(a: Sequence[str], b: Sequence[str]) -> float:
    """The Levenshtein distance between the word lists ``a`` and ``b`` divided by the longer one's
    length: 0.0 for equal lists (two empty ones included), 1.0 when no word can be kept."""
    if not a and not b:
        return 0.0
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1] / max(len(a), len(b))


def answer_distance(known: str, found: str) -> float:
    """How far apart two answers to one probe are, as :func:`alike` reads them: the normalised
    edit distance (:func:`distance`) between their first words, as many as the shorter answer has
    and at most :data:`PREFIX_WORDS` (an answer that goes on where the other stopped is 0.0 from
    it: a greedy answer decoded beside other requests may end or go on at a near-tie); 1.0 when
    one answer is empty and the other is not."""
    a, b = words(known)[:PREFIX_WORDS], words(found)[:PREFIX_WORDS]
    if not a or not b:
        return 0.0 if a == b else 1.0
    n = min(len(a), len(b))
    return distance(a[:n], b[:n])


def alike(known: Sequence[str], found: Sequence[str]) -> bool:
    """Whether the probe answers ``found`` come from the model that gave ``known`` (both in probe
    order): as many answers, and every probe's :func:`answer_distance` at most :data:`TOLERANCE`
    (see the module's reasons)."""
    if len(known) != len(found):
        return False
    return all(answer_distance(k, f) <= TOLERANCE for k, f in zip(known, found, strict=True))
