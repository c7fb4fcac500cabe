"""Counterfactual branching: turning one written prompt into comparable prompts about other concepts.

A *branch* starts from a root prompt about an actual concept (and, optionally, a reference answer
about it) and derives one prompt per counterfactual concept by replacing words: the actual concept
by the counterfactual one, plus any extra replacements that concept needs (a chief executive's
name, a capital city, a pronoun).

Replacement rules (:func:`branch_text`):

* all replacements happen in one pass, so a replaced word is never replaced again and swaps such
  as ``{"he": "she", "she": "he"}`` work;
* where keys overlap at one position the longest key wins (``"New York City"`` before ``"New York"``);
  the text is scanned left to right, so the leftmost match is taken first;
* matching is on whole words: a key whose first (last) character is a word character only matches
  where a word boundary precedes (follows) it, so ``"Ann"`` leaves ``"Annual"`` alone while
  ``"Ann"`` in ``"Ann's"`` is replaced; keys starting or ending in punctuation match wherever that
  punctuation appears;
* matching is case-sensitive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

__all__ = ["branch_replacements", "branch_text", "mentions"]


_WORD = re.compile(r"\w")


def _word_char(ch: str) -> bool:
    return _WORD.match(ch) is not None


def _key_pattern(key: str) -> str:
    body = re.escape(key)
    if _word_char(key[0]):
        body = r"(?<!\w)" + body
    if _word_char(key[-1]):
        body = body + r"(?!\w)"
    return body


@lru_cache(maxsize=512)
def _compile(keys: tuple[str, ...]) -> re.Pattern[str]:
    # ``keys`` is already longest first: the regex alternation tries alternatives in order, so at a
    # given position the longest matching key is chosen.
    return re.compile("|".join(_key_pattern(k) for k in keys))


def _ordered_keys(keys: Iterable[str]) -> tuple[str, ...]:
    ordered = sorted(keys, key=lambda k: (-len(k), k))
    for key in ordered:
        if not isinstance(key, str) or not key:
            raise ValueError(f"replacement keys must be non-empty strings, got {key!r}")
    return tuple(ordered)


def branch_text(text: str, replacements: Mapping[str, str]) -> str:
    """``text`` with every whole-word occurrence of each key replaced by its value, all at once.

    See the module docstring for the rules. An empty mapping returns ``text`` unchanged; an empty
    key raises :class:`ValueError`.
    """
    if not replacements:
        return text
    pattern = _compile(_ordered_keys(replacements))
    return pattern.sub(lambda m: replacements[m.group(0)], text)


def mentions(text: str, term: str) -> bool:
    """Whether ``text`` holds ``term`` under the same whole-word, case-sensitive rule as
    :func:`branch_text` (so a branch replacing ``term`` would change ``text``)."""
    if not term:
        return False
    return _compile((term,)).search(text) is not None


def branch_replacements(actual: str, counterfactual: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The replacements that branch a prompt about ``actual`` to ``counterfactual``:
    ``{actual: counterfactual}`` plus ``extra``; an explicit entry in ``extra`` wins."""
    return {actual: counterfactual, **(extra or {})}
