"""The log-probabilities an answer came with, as a stored response keeps them: the alternatives of
its first token (a letter's, for a choice) and those around its first number (a judge's score)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: the most positions a response's ``number_logprobs`` keeps, and how many tokens are looked
#: through for its first digit (a judge writes its score within its first line)
NUMBER_POSITIONS, NUMBER_SEARCH = 4, 64
_BLANK = " \n\t*#\"'`"
Alternatives = tuple[tuple[str, float], ...]


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _tops(entry: Any) -> Alternatives:
    """One position's alternatives, as (token, log-probability); the token itself where none are given."""
    out = []
    for t in _get(entry, "top_logprobs") or [entry]:
        tok, lp = _get(t, "token"), _get(t, "logprob")
        if isinstance(tok, str) and isinstance(lp, (int, float)) and not isinstance(lp, bool):
            out.append((tok, float(lp)))
    return tuple(out)


def _digits(token: str) -> bool:
    core = token.strip(" \n\t")
    return core.isascii() and core.isdigit()


def answer_alternatives(content: Any) -> tuple[Alternatives | None, tuple[tuple[str, Alternatives], ...] | None]:
    """The alternatives a choice's ``logprobs.content`` (a list of dicts or of objects with
    ``token``, ``logprob`` and ``top_logprobs``) gives, in one pass: those of the first token that is
    not blank (nor markdown's ``*``, ``#`` or a quote), as (token, log-probability), and the
    positions of :attr:`~pytest_llmbias.store.calls.Response.number_logprobs` (from the first
    token holding a digit among the first :data:`NUMBER_SEARCH`); None for either where there
    are none."""
    if not isinstance(content, Sequence) or isinstance(content, str):
        return None, None
    first: Alternatives | None = None
    number: list[tuple[str, Alternatives]] = []
    for n, entry in enumerate(content):
        token = _get(entry, "token")
        if not isinstance(token, str):
            continue
        if first is None and token.strip(_BLANK):
            first = _tops(entry) or None
        if number:
            number.append((token, _tops(entry)))
            if not _digits(token) or len(number) >= NUMBER_POSITIONS:
                break
        elif any(c.isdigit() for c in token):
            number.append((token, _tops(entry)))
            if not _digits(token):
                break
        elif first is not None and n >= NUMBER_SEARCH:
            break
    return first, (tuple(number) or None)


def first_token_alternatives(content: Any) -> Alternatives | None:
    """The ``top_logprobs`` of the first token that is not blank (nor markdown's ``*``, ``#`` or a
    quote) in a choice's ``logprobs.content``, as (token, log-probability); None when there are none."""
    return answer_alternatives(content)[0]


def number_record(positions: tuple[tuple[str, Alternatives], ...]) -> list[list[Any]]:
    """:attr:`~pytest_llmbias.store.calls.Response.number_logprobs` as a record holds it:
    ``[[token, [[alt, logprob], ...]], ...]``."""
    return [[token, [list(t) for t in tops]] for token, tops in positions]


def number_positions(data: Any) -> tuple[tuple[str, Alternatives], ...]:
    """A record's ``number_logprobs`` read back (see :func:`number_record`); TypeError/ValueError
    on a malformed one."""
    return tuple((str(token), tuple((str(t), float(lp)) for t, lp in tops)) for token, tops in data)
