"""The even-handedness judge: a pair judge that sees both conversations of a pair at once, and two
per-answer ratings (did the assistant decline; does it acknowledge opposing views).

Each judgement is a choice among a rubric's lettered options (:class:`ChoiceRubric`, a YAML file
under ``rubrics/``, replaceable): the pair rubric's meanings are ``first``, ``second`` and
``alike``; an answer rubric's ``yes`` and ``no``. The judge is asked for the letter alone, at
temperature 0, with ``logprobs`` and ``top_logprobs``: where the endpoint returns them, the
options' probabilities are the first answer token's probabilities of each letter, renormalised
over the letters (:func:`option_probabilities`); otherwise the sampled letter counts as
probability 1 (a vote). A judge whose entry says ``structured: true`` is asked instead for a JSON
object ``{"choice": letter}`` through ``response_format`` (:func:`choice_format`), read as a
vote. An answer that names no option is unreadable: it is counted and quoted, never guessed.

Order: a pair shown as (first, second) = (prompt a, prompt b) or (b, a). :func:`pair_orders`
shows every pair in both orders (``both``: the judge's position preference cancels within each
pair) or half the pairs in each order (``half``: balanced exactly, which pairs by a hash of the
seed and the pair's id, so it cancels across pairs at half the calls).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.store.calls import ModelCall, Response

RUBRICS = Path(__file__).resolve().parent.parent / "rubrics"
#: the built-in rubric of each judgement
BUILTIN = {
    "pair": RUBRICS / "evenhanded_pair.yaml",
    "refusal": RUBRICS / "evenhanded_refusal.yaml",
    "opposing": RUBRICS / "evenhanded_opposing.yaml",
}
#: each rubric kind's meanings and placeholders
KINDS = {
    "pair": (("first", "second", "alike"), ("{request_1}", "{answer_1}", "{request_2}", "{answer_2}")),
    "answer": (("yes", "no"), ("{request}", "{answer}")),
}
ORDERS = ("both", "half")
#: ``a`` shown first, or ``b``
AB, BA = ("a", "b"), ("b", "a")
#: the judge's calls: greedy, a letter, with the first token's alternatives where the endpoint gives them
JUDGE_GENERATION = GenerationSettings(temperature=0.0, max_tokens=8, samples=1, seed=0)
LOGPROB_PARAMS = {"logprobs": True, "top_logprobs": 10}
#: a structured judgement's room: ``{"choice": "A"}`` and a little whitespace
STRUCTURED_TOKENS = 24
_STRIP = " \n\t*#\"'`().:[]"


@dataclass(frozen=True)
class ChoiceRubric:
    """A lettered-choice rubric: its ``name``, ``kind`` (``pair`` or ``answer``), the ``prompt``
    with its placeholders, and ``options`` (letter -> meaning)."""

    name: str
    kind: str
    prompt: str
    options: Mapping[str, str]
    path: Path | None = None

    @property
    def digest(self) -> str:
        body = self.prompt + "\0" + "".join(f"{k}={v};" for k, v in sorted(self.options.items()))
        return hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "options": dict(self.options),
            "digest": self.digest,
            "path": None if self.path is None else str(self.path),
        }

    def fill(self, **parts: str) -> str:
        """The prompt with each ``{placeholder}`` replaced (braces inside the answers are kept)."""
        text = self.prompt
        marks = {f"{{{k}}}": f"\0{k}\0" for k in parts}
        for mark, token in marks.items():
            text = text.replace(mark, token)
        for k, v in parts.items():
            text = text.replace(f"\0{k}\0", v)
        return text


@functools.lru_cache(maxsize=32)
def load_choice_rubric(path: Path, kind: str) -> ChoiceRubric:
    """The rubric file at ``path``, checked for ``kind``; ConfigError naming the file and the key."""
    from pytest_llmbias.config.yamlutil import load_yaml_with_lines

    data, lines = load_yaml_with_lines(Path(path), error=ConfigError)

    def fail(key: str, message: str) -> ConfigError:
        line = lines.get(key)
        return ConfigError(f"{path}{':' + str(line) if line else ''}: {message}")

    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: a choice rubric is a mapping with name, kind, options, prompt")
    unknown = [k for k in data if k not in ("name", "kind", "options", "prompt")]
    if unknown:
        raise fail(str(unknown[0]), f"unknown key {unknown[0]!r}; accepted keys: name, kind, options, prompt")
    if data.get("kind") != kind:
        raise fail("kind", f"the rubric's kind must be {kind!r} here, got {data.get('kind')!r}")
    meanings, marks = KINDS[kind]
    options = data.get("options")
    if (
        not isinstance(options, Mapping)
        or sorted(map(str, options.values())) != sorted(meanings)
        or not all(isinstance(k, str) and len(k) == 1 and k.isalpha() and k.isupper() for k in options)
    ):
        raise fail("options", f"'options' maps one capital letter to each of {', '.join(meanings)}, got {options!r}")
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not all(m in prompt for m in marks):
        raise fail("prompt", f"'prompt' must be a text holding {', '.join(marks)}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("name", "'name' must be a non-empty string")
    return ChoiceRubric(name.strip(), kind, prompt, {str(k): str(v) for k, v in options.items()}, Path(path))


def rubrics(given: Mapping[str, str | Path] | None = None, base: Path | None = None) -> dict[str, ChoiceRubric]:
    """The three rubrics (``pair``, ``refusal``, ``opposing``): ``given`` replaces any of them by a
    file (relative to ``base``), the others built in."""
    out = {}
    for what, default in BUILTIN.items():
        path = Path((given or {}).get(what) or default)
        if not path.is_absolute() and base is not None:
            path = base / path
        out[what] = load_choice_rubric(path, "pair" if what == "pair" else "answer")
    return out


def structured(judge: ModelSpec) -> bool:
    """Whether ``judge`` is asked for a JSON answer (``{"choice": letter}``, the letters its
    rubric's) through ``response_format``: only when its entry says ``structured: true``. A letter
    read with its log-probabilities is the published method and gives the options' probabilities,
    where a JSON answer's first token is a brace and gives only a vote, so ``auto`` keeps letters."""
    return judge.structured is True


def choice_format(rubric: ChoiceRubric) -> dict[str, Any]:
    """The ``response_format`` of a structured judgement on ``rubric``: a JSON schema whose one
    property, ``choice``, is one of the rubric's letters."""
    schema = {
        "type": "object",
        "properties": {"choice": {"type": "string", "enum": sorted(rubric.options)}},
        "required": ["choice"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": f"{rubric.kind}_choice", "schema": schema, "strict": True}}


def judge_call(judge: ModelSpec, prompt: str, rubric: ChoiceRubric, draw: int = 0) -> ModelCall:
    """The judge's call on one filled ``rubric`` prompt: greedy, short, with log-probabilities
    asked (unless the judge's entry says ``logprobs: false``), or, for a judge asked for structured
    output (:func:`structured`), with the JSON schema of the rubric's letters as
    ``response_format`` and room for the object; ``draw`` > 0 is an independent draw (seed
    ``draw``: a test-retest's second rating)."""
    generation = JUDGE_GENERATION if draw == 0 else dataclasses.replace(JUDGE_GENERATION, seed=draw)
    if structured(judge):
        generation = dataclasses.replace(generation, max_tokens=STRUCTURED_TOKENS)
        return ModelCall.build(judge, prompt, generation, params={"response_format": choice_format(rubric)})
    return ModelCall.build(judge, prompt, generation, params=LOGPROB_PARAMS if judge.logprobs is not False else None)


def pair_prompt(rubric: ChoiceRubric, requests: Sequence[str], answers: Sequence[str], order: Sequence[str]) -> str:
    """The pair rubric on a pair's two conversations (``requests``, ``answers`` as a, b) shown in ``order``."""
    i, j = (0 if s == "a" else 1 for s in order)
    return rubric.fill(request_1=requests[i], answer_1=answers[i], request_2=requests[j], answer_2=answers[j])


def answer_prompt(rubric: ChoiceRubric, request: str, answer: str) -> str:
    return rubric.fill(request=request, answer=answer)


def pair_orders(pair_ids: Sequence[str], mode: str, seed: int = 0) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each pair's orders: both (``mode="both"``), or one, ``a`` first for exactly half of them
    (the first half in the order of sha256(seed, id); the odd one out ``a`` first)."""
    if mode not in ORDERS:
        raise ConfigError(f"orders must be one of {', '.join(ORDERS)}, got {mode!r}")
    if mode == "both":
        return {p: (AB, BA) for p in pair_ids}
    ranked = sorted(pair_ids, key=lambda p: hashlib.sha256(f"{seed}\0{p}".encode()).hexdigest())
    return {p: ((AB,) if k % 2 == 0 else (BA,)) for k, p in enumerate(ranked)}


def _letter(token: str) -> str:
    return token.strip(_STRIP).upper()


def option_probabilities(response: Response, rubric: ChoiceRubric) -> tuple[dict[str, float], str] | None:
    """The rubric's meanings' probabilities in the judge's answer, and where they came from
    (``logprobs``: the first answer token's alternatives, renormalised over the letters; ``vote``:
    the letter answered, probability 1); None when the answer names no option."""
    from pytest_llmbias.scoring.option_logprobs import option_probabilities as shares

    letters = rubric.options
    if response.top_logprobs:
        mass = shares(response.top_logprobs, list(letters.values()), lambda token: letters.get(_letter(token)))
        if mass is not None:
            return mass, "logprobs"
    picked = read_letter(response.text, letters)
    if picked is None:
        return None
    return {m: float(m == letters[picked]) for m in letters.values()}, "vote"


def read_letter(text: str, letters: Mapping[str, str]) -> str | None:
    """The option letter of an answer: the answer is the letter alone (bold, quoted or with a
    full stop), a JSON object ``{"choice": X}`` (a structured judgement), or says ``Answer: X``;
    None otherwise."""
    alone = _letter(text)
    if alone in letters:
        return alone
    chosen = _json_choice(text)
    if chosen is not None:
        return chosen if chosen in letters else None
    found = re.findall(r"(?i)\banswer\s*(?:is)?\s*[:=]?\s*\**\(?([A-Z])\)?\**(?![A-Za-z])", text)
    if found and found[-1].upper() in letters:
        return found[-1].upper()
    return None


def _json_choice(text: str) -> str | None:
    """The ``choice`` of a JSON object answer (in a code fence or not), upper-cased; None when the
    text is no such object."""
    import json

    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    if not body.startswith("{"):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    choice = data.get("choice") if isinstance(data, dict) else None
    return choice.strip().upper() if isinstance(choice, str) else None
