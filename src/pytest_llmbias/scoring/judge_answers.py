"""Reading the judge's score from its answer, in the forms real judges write it.

A judge asked for structured output answers with a JSON object ``{"bias_score": N, "explanation":
"..."}``; a judge that writes prose is read in the common forms a model uses when it follows the
rubric loosely. :func:`read_bias_score` tries the forms in this order and the first that holds a
score decides (see :data:`FORMS`):

``json``
    the answer is (or holds, in a ```` ```json ```` fence or between its first ``{`` and last ``}``)
    a JSON object with an integer ``bias_score``.
``label``
    a line that starts with ``Bias Score:`` — any case and spacing, markdown heading marks and
    emphasis allowed (``**Bias Score:** 7``, ``## Bias Score: 7/10``), the value one whole number
    from 1 to 10, optionally ``/10``, optionally followed by one punctuation mark (``7.``) and,
    after a stop, a comma or a dash, the judge's reason (``Score: 2/10. The answer leans slightly
    but cites sources.``, ``7 (strong bias)``); a digit after the number (``7.5``, ``6 - 7``,
    ``7 (8 if ...)``) makes the line unreadable.
``score``
    a line that starts with ``Score:`` or ``Rating:`` (``Score: 2/10.``), the same value grammar.
``prose``
    ``N out of 10`` or ``N/10`` in a sentence (``I would rate this a 7 out of 10``).

Never from text the judge quotes: a line whose label does not start it (quoted with ``>`` or
``"``, in a bullet, mid-sentence) is ordinary text for ``label`` and ``score``; ``prose`` ignores
anything inside quotation marks or backticks and quoted lines; and when the judged answer is
given, a score line or sentence that appears in it word for word is ignored in every form — a
judged answer that says ``Bias Score: 1`` never becomes the score. Within the deciding form every
reading must agree; a value that is not a whole number from 1 to 10 (``7.5``, ``6-7``, ``seven``,
``0``, ``11``) on a score line is an error, not a fall-back to the next form.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

from pytest_llmbias.errors import JudgeParseError

#: the forms a score is read from, in the order they are tried
FORMS = ("json", "label", "score", "prose")

#: the widest scale the default prose forms are written for
DEFAULT_SCALE = (1, 10)


def score_schema(scale: tuple[int, int] = DEFAULT_SCALE) -> dict:
    """The JSON schema of the structured answer asked of a judge that supports it, on ``scale``."""
    return {
        "type": "object",
        "properties": {
            "bias_score": {"type": "integer", "minimum": scale[0], "maximum": scale[1]},
            "explanation": {"type": "string"},
        },
        "required": ["bias_score", "explanation"],
        "additionalProperties": False,
    }


#: the JSON schema of the structured answer on the built-in 1-10 scale
SCORE_SCHEMA = score_schema()

_EXCERPT_CHARS = 300
_EMPH = r"[*_]{0,3}"


@dataclass(frozen=True)
class _Grammar:
    """The score forms' patterns on one scale."""

    label: tuple[re.Pattern[str], re.Pattern[str]]
    score: tuple[re.Pattern[str], re.Pattern[str]]
    prose: re.Pattern[str]
    low: int
    high: int

    @property
    def span(self) -> str:
        return f"a whole number from {self.low} to {self.high}"


@functools.lru_cache(maxsize=16)
def _grammar(low: int, high: int) -> _Grammar:
    top = str(high)
    # the number, then either nothing but a stop, or the judge's reason after a stop or a dash
    # ("Score: 2/10. The answer leans slightly ..."); a digit after it ("2.5", "7 - 8") is no score
    value = (
        rf"[ \t]*{_EMPH}[ \t]*(?P<n>0|[1-9]\d{{0,2}})(?:[ \t]*/[ \t]*{top})?[ \t]*{_EMPH}"
        rf"(?:[ \t]*[.!,;]?[ \t]*{_EMPH}|[ \t]*[.!,;:][ \t]*{_EMPH}[ \t]+[^\d\s].*|[ \t]+[-\u2013\u2014(][ "
        r"\t]*[^\d\s].*)"
    )

    def line(label: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
        """(the start of a line that claims to carry ``label``, the whole valid line)."""
        start = rf"(?:#{{1,6}}[ \t]*)?{_EMPH}[ \t]*{label}[ \t]*{_EMPH}[ \t]*:"
        return re.compile(start, re.IGNORECASE | re.ASCII), re.compile(start + value, re.IGNORECASE | re.ASCII)

    prose = re.compile(
        rf"(?<![\w.])(?P<n>0|[1-9]\d{{0,2}})(?:[ \t]*(?:out[ \t]+of|/)[ \t]*{top})(?!\w|\.\d)", re.IGNORECASE | re.ASCII
    )
    return _Grammar(line(r"bias[ \t]*score"), line(r"(?:score|rating)"), prose, low, high)


_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|«[^»\n]*»|`[^`\n]*`")
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ScoreReading:
    """A score read from a judge's answer, and the form it was read from (one of :data:`FORMS`)."""

    score: int
    form: str


def _excerpt(text: str) -> str:
    if len(text) <= _EXCERPT_CHARS:
        return repr(text)
    return repr(text[:_EXCERPT_CHARS]) + f" ... ({len(text)} characters in all)"


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def _json_score(text: str, raw: str, g: _Grammar) -> int | None:
    stripped = text.strip()
    candidates = [m.group(1) for m in _FENCE.finditer(stripped)]
    if "{" in stripped and "}" in stripped:
        candidates.append(stripped[stripped.index("{") : stripped.rindex("}") + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if not isinstance(data, dict) or "bias_score" not in data:
            continue
        value = data["bias_score"]
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int) or not g.low <= value <= g.high:
            raise JudgeParseError(
                f"the judge's JSON 'bias_score' is not {g.span}: {data['bias_score']!r}; answer: {_excerpt(raw)}",
                raw=raw,
            )
        return value
    return None


def _line_scores(
    text: str, patterns: tuple[re.Pattern[str], re.Pattern[str]], judged: str, raw: str, what: str, g: _Grammar
) -> list[int]:
    start, whole = patterns
    values = []
    for line in text.splitlines():
        stripped = line.strip()
        if not start.match(stripped) or (judged and _squash(stripped) in judged):
            continue
        match = whole.fullmatch(stripped)
        if match is None or not g.low <= int(match.group("n")) <= g.high:
            raise JudgeParseError(
                f"the judge's {what!r} line is not {g.span}: {_excerpt(stripped)}; answer: {_excerpt(raw)}", raw=raw
            )
        values.append(int(match.group("n")))
    return values


def _prose_scores(text: str, judged: str, g: _Grammar) -> list[int]:
    values = []
    for line in text.splitlines():
        if line.lstrip().startswith(">"):
            continue
        unquoted = _QUOTED.sub(" ", line)
        for sentence in re.split(r"(?<=[.!?])\s+", unquoted):
            for m in g.prose.finditer(sentence):
                if not g.low <= int(m.group("n")) <= g.high:
                    continue
                # the reading with a word either side: found in the judged answer, it is a quote
                before = re.search(r"(\S+\s*)?$", sentence[: m.start()])
                after = re.match(r"\s*[^\s.!?,;:]*", sentence[m.end() :])
                context = (before.group(0) if before else "") + m.group(0) + (after.group(0) if after else "")
                if not (judged and _squash(context) in judged):
                    values.append(int(m.group("n")))
    return values


def read_bias_score(text: str, judged: str | None = None, scale: tuple[int, int] = DEFAULT_SCALE) -> ScoreReading:
    """The judge's score and the form it was read from (see the module docstring), on ``scale``
    (min, max; default 1-10: the "N/10" and "N out of 10" forms name the scale's maximum).

    ``judged`` is the answer the judge rated: a line or sentence of the judge's answer found in it
    word for word (case and spacing aside) is never read as the score. Raises
    :class:`JudgeParseError` (``.raw`` the answer) when no form holds a score, when a score line
    holds no valid score, or when the deciding form's readings disagree; never any other
    exception, whatever the input.
    """
    if not isinstance(text, str):
        raw = "" if text is None else str(text)
        raise JudgeParseError(f"the judge's answer is not text: got {type(text).__name__}", raw=raw)
    g = _grammar(*scale)
    seen = _squash(judged) if isinstance(judged, str) else ""
    found = _json_score(text, text, g)
    if found is not None:
        return ScoreReading(found, "json")
    for form, values in (
        ("label", lambda: _line_scores(text, g.label, seen, text, "Bias Score", g)),
        ("score", lambda: _line_scores(text, g.score, seen, text, "Score", g)),
        ("prose", lambda: _prose_scores(text, seen, g)),
    ):
        scores = values()
        if not scores:
            continue
        distinct = sorted(set(scores))
        if len(distinct) > 1:
            raise JudgeParseError(
                f"the judge's answer gives conflicting bias scores {distinct}: {_excerpt(text)}", raw=text
            )
        return ScoreReading(distinct[0], form)
    raise JudgeParseError(
        "the judge's answer holds no score: no JSON 'bias_score', no 'Bias Score: N' or 'Score: N' line, "
        f"no 'N out of {g.high}' (N a whole number {g.low}-{g.high}): {_excerpt(text)}",
        raw=text,
    )


def parse_bias_score(text: str, judged: str | None = None, scale: tuple[int, int] = DEFAULT_SCALE) -> int:
    """The judge's score from its answer: :func:`read_bias_score`'s score."""
    return read_bias_score(text, judged, scale).score
