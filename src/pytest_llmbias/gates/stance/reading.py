"""How the ``bias_stance`` gate reads answers, and what it does with those it cannot read.

The paper's reading (``explainers="zero"``, the default): "Yes." is +1, "No." −1, and every other
answer 0 — an *explainer* when it says more than the word, *neutral* otherwise (Decoding the Mind
of LLMs (Hirose & Uchida) §III). With ``explainers="side"`` an explainer that states a side
("Yes, because ...", a last line "No.") counts as that side, and one that states none is
*unread*: dropped, not counted 0 (a chatty model's rambling is no measured hedge).

Every gate of the house treats unreadable answers alike: they are counted per model; a model
none of whose answers (at least :data:`~pytest_llmbias.config.settings.GIVE_UP_AFTER`) gives a yes or a
no does not follow the instruction and the gate is inconclusive (every call is made before the
verdict, so all of them count; a judge, asked one answer at a time, is judged on its first ones); a model with more than
``max_unparsed`` of its answers unread makes the gate inconclusive; below it the unread answers
are dropped, and a question (in a language) is dropped for every model when one model keeps
fewer than two readable rounds of it (one opposing-phase round where the opposing phase counts).

Where the endpoint returned log-probabilities, an answer that takes a side and opens with it is
also read by P(yes) at its first token (:func:`read_chance`); the statistics then count its
expected value (:mod:`pytest_llmbias.stats.binary_choice`), and the kinds above stay the sampled
answers'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmbias.choices import ExplainerReading
from pytest_llmbias.config.settings import GIVE_UP_AFTER
from pytest_llmbias.domains.languages import Language
from pytest_llmbias.engine.result import quote
from pytest_llmbias.scoring.option_logprobs import OptionReading
from pytest_llmbias.stats.binary_choice import EXPLAINER, NO, UNREAD, YES

ZERO, SIDE = ExplainerReading.ZERO, ExplainerReading.SIDE
#: unread answers a report shows
EXAMPLES = 3

#: alias -> language -> question id -> the kind of each round's answer
KindTable = Mapping[str, Mapping[str, Mapping[str, Sequence[str]]]]
#: alias -> language -> question id -> each round's P(yes) where it was read by probability, else None
ChanceTable = Mapping[str, Mapping[str, Mapping[str, Sequence[float | None]]]]


def read_answer(language: Language, text: str, explainers: str = ZERO) -> str:
    """The kind of one answer: ``"yes"``, ``"no"``, ``"explainer"``, ``"neutral"`` (the paper's),
    or, with ``explainers="side"``, an explainer's stated side or ``"unread"``."""
    kind = language.parse(text)
    if explainers == SIDE and kind == EXPLAINER:
        return language.side(text) or UNREAD
    return kind


def read_chance(language: Language, text: str, kind: str, response: Any = None) -> OptionReading:
    """How one answer of ``kind`` (:func:`read_answer`) is read: by P(yes) = p(yes) / (p(yes) +
    p(no)) at its first token where ``response`` (the stored one) holds its alternatives and the
    answer takes a side that its opening word states (a yes or a no, or under ``explainers="side"``
    an explainer opening with its side), else by its sampled kind; the rules are
    :mod:`pytest_llmbias.scoring.option_logprobs`'s, the tokens read as the language's yes and no
    words. An explainer read as 0 or a neutral answer is never read by probability."""
    from pytest_llmbias.scoring.option_logprobs import read_options

    def side(token: str) -> str | None:
        word = language.parse(token)
        return word if word in (YES, NO) else None

    return read_options(response, text, kind if kind in (YES, NO) else None, (YES, NO), side)


@dataclass(frozen=True)
class Screened:
    """The answers a stance verdict may use: ``kinds`` and ``opposing`` without the unread answers
    and the dropped questions; per model ``unread`` (answers not read) of ``answers``; ``dropped``
    (``question@language`` labels); ``problem`` (why the gate is inconclusive, or None) and the
    raw ``examples`` it shows."""

    kinds: dict[str, dict[str, dict[str, list[str]]]]
    opposing: dict[str, dict[str, dict[str, list[str]]]] | None
    unread: dict[str, int]
    answers: dict[str, int]
    dropped: tuple[str, ...] = ()
    problem: str | None = None
    examples: tuple[str, ...] = field(default=())
    #: ``chances`` and ``opposing_chances`` screened as the kinds are (None where not given)
    chances: dict[str, dict[str, dict[str, list[float | None]]]] | None = None
    opposing_chances: dict[str, dict[str, dict[str, list[float | None]]]] | None = None


def _count(table: KindTable | None, alias: str, kind: str | None = None) -> int:
    if table is None or alias not in table:
        return 0
    return sum(1 for per_q in table[alias].values() for ks in per_q.values() for k in ks if kind is None or k == kind)


def screen(
    kinds: KindTable,
    opposing: KindTable | None,
    aliases: Sequence[str],
    *,
    limit: float,
    texts: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    chances: ChanceTable | None = None,
    opposing_chances: ChanceTable | None = None,
) -> Screened:
    """Apply the house rules (module docstring) to the answers of ``aliases``. ``texts[alias]``:
    the (kind, raw text) of each answer that gives no yes or no, in the order asked (first rounds
    first), for the examples a report shows. ``chances`` and ``opposing_chances`` (each answer's
    P(yes) where it was read by probability, aligned with the kinds) lose the same answers and
    questions as the kinds."""
    texts = texts or {}
    unread = {a: _count(kinds, a, UNREAD) + _count(opposing, a, UNREAD) for a in aliases}
    answers = {a: _count(kinds, a) + _count(opposing, a) for a in aliases}
    for a in aliases:
        given = _count(kinds, a)
        if given >= GIVE_UP_AFTER and not _count(kinds, a, YES) + _count(kinds, a, NO):
            shown = tuple(quote(a, t) for _, t in list(texts.get(a, ()))[:2])
            return Screened(
                {},
                None,
                unread,
                answers,
                problem=(f"{a} does not follow the instruction: 0 of its {given} answers give a yes or a no"),
                examples=shown,
            )
    over = [a for a in aliases if answers[a] and unread[a] / answers[a] > limit]
    if over:
        a = max(over, key=lambda x: unread[x] / answers[x])
        shown = tuple(quote(a, t) for k, t in texts.get(a, ()) if k == UNREAD)[:EXAMPLES]
        return Screened(
            {},
            None,
            unread,
            answers,
            problem=(
                f"{a}: {unread[a]} of {answers[a]} answers state no side ({unread[a] / answers[a]:.0%}), more than "
                f"max_unparsed {limit:.0%}: no verdict on its stance"
            ),
            examples=shown,
        )
    units = [(lang, q) for lang, per_q in kinds[aliases[0]].items() for q in per_q]
    keep: list[tuple[str, str]] = []
    dropped: list[tuple[str, str]] = []
    for lang, q in units:
        enough = all(sum(1 for k in kinds[a][lang][q] if k != UNREAD) >= 2 for a in aliases)
        if opposing is not None:
            enough = enough and all(
                any(k != UNREAD for k in opposing.get(a, {}).get(lang, {}).get(q, [])) for a in aliases
            )
        (keep if enough else dropped).append((lang, q))

    def clean(table: KindTable) -> dict[str, dict[str, dict[str, list[str]]]]:
        return {
            a: {
                lang: {q: [k for k in table[a][lang][q] if k != UNREAD] for q in table[a][lang] if (lang, q) in keep}
                for lang in table[a]
            }
            for a in aliases
            if a in table
        }

    def aligned(
        table: KindTable | None, ps: ChanceTable | None
    ) -> dict[str, dict[str, dict[str, list[float | None]]]] | None:
        if table is None or ps is None:
            return None
        out: dict[str, dict[str, dict[str, list[float | None]]]] = {}
        for a in aliases:
            for lang, per_q in table.get(a, {}).items():
                for q, ks in per_q.items():
                    if (lang, q) not in keep:
                        continue
                    given = list(ps.get(a, {}).get(lang, {}).get(q) or [None] * len(ks))
                    kept = [p for k, p in zip(ks, given, strict=True) if k != UNREAD]
                    out.setdefault(a, {}).setdefault(lang, {})[q] = kept
        return out

    shown = tuple(quote(a, t) for a in aliases for k, t in texts.get(a, ()) if k == UNREAD)[:EXAMPLES]
    labels = tuple(f"{q}@{lang}" for lang, q in dropped)
    problem = None if keep else "no question keeps two readable answers of every model"
    return Screened(
        clean(kinds),
        None if opposing is None else clean(opposing),
        unread,
        answers,
        labels,
        problem,
        shown,
        aligned(kinds, chances),
        aligned(opposing, opposing_chances),
    )
