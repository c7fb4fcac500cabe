"""The judge's rubric as a file: the levels of its scale, which end is more biased, the answer
format, and anchor answers with known scores.

A rubric file is YAML::

    name: bias-1-10                # how reports name it
    scale: {min: 1, max: 10, biased: max}   # whole numbers; ``biased``: the end that is more biased
    answer: auto                   # auto | lines | json (see ANSWER_FORMATS)
    levels:                        # one description per score of the scale, every score once
      1: Neutral and factual. ...
      ...
    guidance:                      # optional: further rules for the judge, one per item
      - Count a refusal as ...
    anchors:                       # optional: answers whose score is known (see Anchor)
      - {question: ..., answer: ..., score: 1, tolerance: 1}

The built-in rubric (:data:`BUILTIN_RUBRIC`) is shipped in this format. A domain file may carry
``anchors:`` too, in the same form (:func:`parse_anchors`). Every error names the file and line.
A rubric's whole content is in the judge's prompt, so a changed rubric is a different call: its
answers are asked again, and a snapshot made with another rubric is never served for it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard, cast

from pytest_llmbias.errors import ConfigError

__all__ = [
    "ANSWER_FORMATS",
    "Anchor",
    "BUILTIN_RUBRIC_PATH",
    "Rubric",
    "anchors_on",
    "builtin_rubric",
    "load_rubric",
    "parse_anchors",
    "parse_rubric",
    "rubric_for",
]

BUILTIN_RUBRIC_PATH = Path(__file__).parents[1] / "rubrics" / "bias_1_10.yaml"
#: ``auto``: a JSON object where the judge takes a JSON schema, else the two lines; ``lines``:
#: always the "Bias Score: N" and "Explanation: ..." lines; ``json``: always the JSON object
ANSWER_FORMATS = ("auto", "lines", "json")
_KEYS = ("name", "scale", "answer", "levels", "guidance", "anchors")
_SCALE_KEYS = ("min", "max", "biased")
_ANCHOR_KEYS = ("question", "answer", "score", "tolerance")
#: the widest scale accepted: a judge asked to pick one of more levels than this does not
#: tell them apart
MAX_LEVELS = 101


@dataclass(frozen=True)
class Anchor:
    """An answer to ``question`` whose score on the rubric is known: a judge whose rating of it is
    more than ``tolerance`` from ``score`` has missed it."""

    question: str
    answer: str
    score: int
    tolerance: float = 1.0
    #: the file and line it was written at, for error messages
    where: str = field(default="", compare=False)

    def missed(self, rating: float) -> bool:
        return abs(rating - self.score) > self.tolerance

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "score": self.score, "tolerance": self.tolerance}


@dataclass(frozen=True)
class Rubric:
    """A judge rubric: ``levels[i]`` describes score ``low + i``; ``biased`` is the end of the
    scale ("max" or "min") that is more biased."""

    name: str
    low: int
    high: int
    levels: tuple[str, ...]
    biased: str = "max"
    answer: str = "auto"
    guidance: tuple[str, ...] = ()
    anchors: tuple[Anchor, ...] = ()
    source: Path | None = None

    @property
    def scale(self) -> tuple[int, int]:
        return self.low, self.high

    def oriented(self, score: float) -> float:
        """``score`` on a scale where higher always means more biased (the gates' convention)."""
        return score if self.biased == "max" else self.low + self.high - score

    @functools.cached_property
    def digest(self) -> str:
        """The first 12 hex digits of the sha256 of everything that shapes the judge's reading."""
        body = json.dumps(
            [self.low, self.high, self.biased, self.answer, list(self.levels), list(self.guidance)], ensure_ascii=False
        )
        return hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]

    def describe(self) -> dict[str, Any]:
        """What a report says of the rubric: name, scale, biased end, digest and file."""
        return {
            "name": self.name,
            "min": self.low,
            "max": self.high,
            "biased": self.biased,
            "digest": self.digest,
            "source": str(self.source) if self.source else None,
        }


def _where(label: str, lines: Mapping[str, int]) -> Callable[[str], str]:
    def where(key: str) -> str:
        while key:
            if key in lines:
                return f"{label}:{lines[key]}"
            key = key.rpartition(".")[0] if "." in key else ""
        return label

    return where


def _whole(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_anchors(
    raw: Any,
    *,
    key: str,
    where: Callable[[str], str],
    scale: tuple[int, int] | None,
    error: type[Exception] = ConfigError,
) -> tuple[Anchor, ...]:
    """A list of anchors (``question``, ``answer``, ``score``, optional ``tolerance``, default 1);
    ``scale`` (min, max), when known, bounds each score. Raises ``error`` naming the place."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise error(
            f"{where(key)}: '{key}' must be a non-empty list of anchors, each with keys {', '.join(_ANCHOR_KEYS)}"
        )
    out = []
    for i, item in enumerate(raw):
        at = f"{key}[{i}]"
        if not isinstance(item, Mapping):
            raise error(f"{where(at)}: each anchor must be a mapping with keys {', '.join(_ANCHOR_KEYS)}")
        unknown = [k for k in item if k not in _ANCHOR_KEYS]
        if unknown:
            raise error(
                f"{where(f'{at}.{unknown[0]}')}: unknown key {unknown[0]!r} in an anchor; accepted keys: "
                f"{', '.join(_ANCHOR_KEYS)}"
            )
        for name in ("question", "answer"):
            if not isinstance(item.get(name), str) or not item[name].strip():
                raise error(f"{where(f'{at}.{name}')}: '{at}.{name}' must be a non-empty string")
        score, tolerance = item.get("score"), item.get("tolerance", 1)
        if not _whole(score):
            raise error(f"{where(f'{at}.score')}: '{at}.score' must be a whole number, got {score!r}")
        if scale is not None and not scale[0] <= score <= scale[1]:
            raise error(
                f"{where(f'{at}.score')}: '{at}.score' {score} lies outside the rubric's scale {scale[0]}-{scale[1]}"
            )
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
            raise error(f"{where(f'{at}.tolerance')}: '{at}.tolerance' must be a number >= 0, got {tolerance!r}")
        out.append(Anchor(item["question"].strip(), item["answer"], score, float(tolerance), where(f"{at}.score")))
    return tuple(out)


def anchors_on(rubric: Rubric, anchors: tuple[Anchor, ...]) -> tuple[Anchor, ...]:
    """``rubric``'s anchors, then ``anchors`` (a domain's), each checked against the rubric's
    scale; :class:`ConfigError` naming the anchor's file and line."""
    for anchor in anchors:
        if not rubric.low <= anchor.score <= rubric.high:
            raise ConfigError(
                f"{anchor.where or 'anchor'}: anchor score {anchor.score} lies outside the scale "
                f"{rubric.low}-{rubric.high} of the rubric {rubric.name!r}"
                + (f" ({rubric.source})" if rubric.source else "")
            )
    return (*rubric.anchors, *anchors)


def rubric_for(domain_rubric: Path | None, run_rubric: Path | None) -> Rubric:
    """The rubric a domain is judged on: its own file, else the run's, else the built-in."""
    path = domain_rubric or run_rubric
    if path is None:
        return builtin_rubric()
    path = Path(path)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        raise ConfigError(f"{path}: no rubric file there") from None
    return _load_cached(str(path.resolve()), stamp)


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, stamp: int) -> Rubric:
    return load_rubric(path)


def parse_rubric(
    data: Any, *, label: str = "<rubric>", lines: Mapping[str, int] | None = None, source: Path | None = None
) -> Rubric:
    """Validate parsed YAML into a :class:`Rubric`; :class:`ConfigError` naming ``label`` and the
    line for a missing scale, a level missing or outside the scale, an unknown key, an anchor
    outside the scale."""
    where = _where(label, lines or {})
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{label}: a rubric file must be a mapping with keys {', '.join(_KEYS)}, "
            f"got {type(data).__name__ if data is not None else 'an empty file'}"
        )
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise ConfigError(f"{where(str(unknown[0]))}: unknown key {unknown[0]!r}; accepted keys: {', '.join(_KEYS)}")
    name = data.get("name", source.stem if source else "rubric")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where('name')}: 'name' must be a non-empty string")
    scale = data.get("scale")
    if not isinstance(scale, Mapping):
        raise ConfigError(f"{where('scale')}: the rubric has no scale: give 'scale: {{min: 1, max: 10, biased: max}}'")
    bad = [k for k in scale if k not in _SCALE_KEYS]
    if bad:
        raise ConfigError(
            f"{where(f'scale.{bad[0]}')}: unknown key 'scale.{bad[0]}'; accepted keys: {', '.join(_SCALE_KEYS)}"
        )
    low, high, biased = scale.get("min"), scale.get("max"), scale.get("biased", "max")
    for key, value in (("min", low), ("max", high)):
        if not _whole(value) or value < 0:
            raise ConfigError(f"{where(f'scale.{key}')}: 'scale.{key}' must be a whole number >= 0, got {value!r}")
    low, high = cast(int, low), cast(int, high)  # whole numbers, checked above
    if not low < high or high - low + 1 > MAX_LEVELS:
        raise ConfigError(f"{where('scale')}: the scale {low}-{high} must have 2 to {MAX_LEVELS} levels (min < max)")
    if biased not in ("max", "min"):
        raise ConfigError(
            f"{where('scale.biased')}: 'scale.biased' names the more biased end: 'max' or 'min', got {biased!r}"
        )
    answer = data.get("answer", "auto")
    if answer not in ANSWER_FORMATS:
        raise ConfigError(f"{where('answer')}: 'answer' must be one of {' | '.join(ANSWER_FORMATS)}, got {answer!r}")
    raw_levels = data.get("levels")
    if not isinstance(raw_levels, Mapping) or not raw_levels:
        raise ConfigError(f"{where('levels')}: 'levels' must map each score from {low} to {high} to what it means")
    levels: dict[int, str] = {}
    for score, text in raw_levels.items():
        at = f"levels.{score}"
        if not _whole(score) or not low <= score <= high:
            raise ConfigError(f"{where(at)}: level {score!r} is not a whole number of the scale {low}-{high}")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{where(at)}: level {score} must be described by a non-empty string")
        levels[score] = " ".join(text.split())
    missing = [s for s in range(low, high + 1) if s not in levels]
    if missing:
        raise ConfigError(
            f"{where('levels')}: 'levels' must describe every score of the scale {low}-{high}; "
            f"missing {', '.join(map(str, missing))}"
        )
    guidance = data.get("guidance", [])
    if not isinstance(guidance, list) or not all(isinstance(g, str) and g.strip() for g in guidance):
        raise ConfigError(f"{where('guidance')}: 'guidance' must be a list of non-empty strings")
    anchors = parse_anchors(data.get("anchors"), key="anchors", where=where, scale=(low, high))
    return Rubric(
        name=name.strip(),
        low=low,
        high=high,
        levels=tuple(levels[s] for s in range(low, high + 1)),
        biased=biased,
        answer=answer,
        guidance=tuple(" ".join(g.split()) for g in guidance),
        anchors=anchors,
        source=source,
    )


def load_rubric(path: Path | str) -> Rubric:
    """The rubric in the YAML file ``path``; :class:`ConfigError` with the file and line."""
    from pytest_llmbias.config.yamlutil import load_yaml_with_lines

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no rubric file there")
    data, lines = load_yaml_with_lines(path, error=ConfigError)
    return parse_rubric(data, label=str(path), lines=lines, source=path)


@functools.lru_cache(maxsize=1)
def builtin_rubric() -> Rubric:
    """The default rubric, read from the file shipped with the package."""
    return load_rubric(BUILTIN_RUBRIC_PATH)
