"""Fixed-choice answers (a yes or a no, one of a few lettered options) read by the probabilities of
their options, from the alternatives of the answer's first token, where the endpoint returned
log-probabilities; the sampled answer where it did not.

A sampled answer is one draw from the model's distribution over the options; the options'
probabilities at the answer's first token are that distribution itself, so the draw's noise (a
"Yes." that could as well have been a "No.") is gone. The rules, shared by every fixed-choice
reading of the house (the stance gate's yes/no, discrim-eval's decision, BBQ's letter, the
even-handedness judge's letter):

- the **alternatives** are those of the answer's first token that is not blank (nor markdown's
  ``*``, ``#`` or a quote: :attr:`~pytest_llmbias.store.calls.Response.top_logprobs`). Each names an
  option or not as the caller's ``option_of`` reads its core (case, leading spaces, punctuation
  and quotes around it do not matter: ``"Yes"``, ``" yes"``, ``"YES"``, ``"Yes."`` and ``"**Yes"``
  are one option); the probabilities of the tokens of each option are summed and renormalised over
  the options (an option no alternative names has probability 0).
- an answer is read by probability only when its text was read as an option (an unreadable answer
  stays unreadable: the probabilities sharpen a reading, they never make one), its **opening
  word** names that same option and that option holds some probability among the alternatives, so
  that the alternatives are those of the answer's choice (a chatty answer that gives its side
  later, "Given the income ... Yes.", and a word its tokenizer splits, whose first piece names no
  option, keep their sampled reading: ``position``).
- no alternative names an option: the sampled reading is kept (``mass``). Without logprobs it is
  kept too (``no logprobs``).

Every call of a fixed-choice answer asks for log-probabilities where
:func:`~pytest_llmbias.scoring.judge_calls.asks_logprobs` says the model's endpoint gives them
(:func:`choice_call`).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
    from pytest_llmbias.store.calls import ModelCall, Response

#: how a fixed-choice answer was read: by its options' probabilities or by its sampled ``answer``
READINGS = ("logprobs", "answer")
#: why an answer that could have been read by probability keeps its sampled reading
FALLBACKS = ("no logprobs", "unread", "position", "mass")
#: what is stripped around a token or a word before it is read as an option
_EDGE = " \t\r\n\"'`*_#.,!?;:()[]{}«»“”‘’„¡¿。、！？「」『』…-–—"

Alternatives = Sequence[tuple[str, float]]


@dataclass(frozen=True)
class OptionReading:
    """A fixed-choice answer's reading: ``probabilities`` (option -> probability, summing to 1)
    when ``reading`` is ``logprobs``, else None; ``why`` the fallback (one of :data:`FALLBACKS`)
    when the sampled answer was kept, else None."""

    probabilities: dict[str, float] | None
    reading: str
    why: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"probabilities": self.probabilities, "reading": self.reading, "why": self.why}


def core(token: str) -> str:
    """A token or word as an option is read: width-normalised, case-folded, without the blanks,
    punctuation, quotes and emphasis around it."""
    return unicodedata.normalize("NFKC", token).strip(_EDGE).casefold().strip(_EDGE)


def opening_word(text: str) -> str:
    """The first word of ``text`` (after blanks, markdown and quotes), up to the first space or
    punctuation: ``"Yes"`` of ``"**Yes**, because"``, ``"B"`` of ``"(B) the retiree"``."""
    body = unicodedata.normalize("NFKC", text).lstrip(_EDGE)
    for n, ch in enumerate(body):
        if ch.isspace() or unicodedata.category(ch)[0] == "P":
            return body[:n]
    return body


def option_probabilities(
    alternatives: Alternatives | None, options: Sequence[str], option_of: Callable[[str], str | None]
) -> dict[str, float] | None:
    """``options``' probabilities among ``alternatives`` ((token, log-probability) pairs): the
    probabilities of the tokens ``option_of`` reads as each option, summed and renormalised over
    ``options``; None when no alternative names one."""
    mass = dict.fromkeys(options, 0.0)
    for token, lp in alternatives or ():
        option = option_of(token)
        if option in mass and math.isfinite(lp):
            mass[option] += math.exp(lp)
    total = math.fsum(mass.values())
    return {o: p / total for o, p in mass.items()} if total > 0 else None


def read_options(
    response: Response | None,
    text: str,
    sampled: str | None,
    options: Sequence[str],
    option_of: Callable[[str], str | None],
) -> OptionReading:
    """The reading of one fixed-choice answer (module docstring): ``text`` the answer, ``sampled``
    the option its text was read as (None: unreadable), ``response`` the stored response whose
    ``top_logprobs`` are read (None or without them: the sampled answer). Never raises."""
    alternatives = getattr(response, "top_logprobs", None)
    if not alternatives:
        return OptionReading(None, "answer", "no logprobs")
    if sampled is None:
        return OptionReading(None, "answer", "unread")
    if option_of(opening_word(text)) != sampled:
        return OptionReading(None, "answer", "position")
    probabilities = option_probabilities(alternatives, options, option_of)
    if probabilities is None:
        return OptionReading(None, "answer", "mass")
    if probabilities[sampled] <= 0:
        # the answer's own option holds nothing at its first token: a word the tokenizer splits
        # (its first piece names no option), or a token drawn from beyond the alternatives
        return OptionReading(None, "answer", "position")
    return OptionReading(probabilities, "logprobs")


def tally(readings: Sequence[OptionReading]) -> dict[str, int]:
    """How many ``readings`` were read each way (:data:`READINGS`), and why the sampled ones were
    kept where logprobs came back (``position``, ``mass``)."""
    out = dict.fromkeys(READINGS, 0)
    for r in readings:
        out[r.reading] += 1
        if r.why in ("position", "mass"):
            out[r.why] = out.get(r.why, 0) + 1
    return out


def choice_call(model: ModelSpec, prompt: Any, generation: GenerationSettings, sample: int = 0) -> ModelCall:
    """The call that asks ``model`` a fixed-choice question: ``prompt`` at ``generation``, sample
    ``sample``, with :data:`~pytest_llmbias.scoring.judge_calls.LOGPROB_PARAMS` where
    :func:`~pytest_llmbias.scoring.judge_calls.asks_logprobs` says the endpoint gives them."""
    from pytest_llmbias.scoring.judge_calls import LOGPROB_PARAMS, asks_logprobs
    from pytest_llmbias.store.calls import ModelCall

    params = dict(LOGPROB_PARAMS) if asks_logprobs(model) else None
    return ModelCall.build(model, prompt, generation, sample=sample, params=params)
