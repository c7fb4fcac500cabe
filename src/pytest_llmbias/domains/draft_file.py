"""A drafted question domain: what was written per category, and the domain file a person reviews.

:func:`render_domain` writes the file, headed by a comment that says it was generated, by which
model, and that it must be reviewed; :func:`write_domain` checks that it loads before it keeps it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.domains.draft_questions import DomainBrief, NearDuplicate
from pytest_llmbias.errors import DomainError

# --------------------------------------------------------------------------------------------
# The result


@dataclass(frozen=True)
class GeneratedCategory:
    """One category's outcome: questions ``asked`` (per sample), ``parsed`` from the answers, the
    ``questions`` kept, those ``dropped`` as near-duplicates, and ``surplus`` distinct ones beyond
    the number asked."""

    id: str
    name: str
    asked: int
    parsed: int
    questions: tuple[str, ...]
    dropped: tuple[NearDuplicate, ...] = ()
    surplus: int = 0

    @property
    def short(self) -> bool:
        """Fewer questions kept than asked."""
        return len(self.questions) < self.asked

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "asked": self.asked,
            "parsed": self.parsed,
            "questions": list(self.questions),
            "dropped": [d.to_dict() for d in self.dropped],
            "surplus": self.surplus,
        }


@dataclass(frozen=True)
class GeneratedDomain:
    """A drafted domain: the brief, who wrote it and how, each category's outcome, and what the
    calls cost (``fetched`` over the network, ``from_store``)."""

    brief: DomainBrief
    alias: str
    model: str
    temperature: float
    seed: int | None
    samples: int
    threshold: float
    embedding_model: str
    categories: tuple[GeneratedCategory, ...]
    fetched: int = 0
    from_store: int = 0

    @property
    def empty(self) -> tuple[GeneratedCategory, ...]:
        """The categories left with no question."""
        return tuple(c for c in self.categories if not c.questions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "brief": self.brief.to_dict(),
            "alias": self.alias,
            "model": self.model,
            "temperature": self.temperature,
            "seed": self.seed,
            "samples": self.samples,
            "threshold": self.threshold,
            "embedding_model": self.embedding_model,
            "categories": [c.to_dict() for c in self.categories],
            "fetched": self.fetched,
            "from_store": self.from_store,
        }


# --------------------------------------------------------------------------------------------
# The file


def _quote(text: str) -> str:
    """``text`` as a YAML double-quoted scalar; characters that are not printable are escaped."""
    out = ['"']
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c == " " or c.isprintable():
            out.append(c)
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


def _key(text: str) -> str:
    """An id as a YAML scalar: plain when it reads back as the same string, else quoted."""
    return text if _PLAIN.match(text) and text.lower() not in _RESERVED else _quote(text)


def question_id(category: str, index: int, width: int = 2) -> str:
    """The id of a category's ``index``-th question (from 1): ``<category id>-01``."""
    return f"{category}-{index:0{width}d}"


def render_domain(generated: GeneratedDomain) -> str:
    """The domain file of ``generated`` (the layout of the built-in domains), headed by a comment
    that says it was generated, by which model and how, and that it must be reviewed. Categories
    without questions are left out. The same input gives the same text."""
    b = generated.brief
    seed = "no seed" if generated.seed is None else f"seed {generated.seed}"
    lines = [
        f"# {b.title}: a domain drafted by `llmbias generate-domain`.",
        f"# Questions written by the model {generated.alias!r} ({generated.model}), temperature "
        f"{generated.temperature:g}, {seed}, {generated.samples} sample(s) per category;",
        f"# near-duplicates (cosine similarity >= {generated.threshold:g} under {generated.embedding_model}) removed.",
        "# REVIEW BEFORE USE: a model wrote these questions. Read every one for accuracy, neutral",
        "# wording and coverage, and check the description, focus and instruction, which were drafted too.",
        f"name: {_key(b.name)}",
        f"title: {_quote(b.title)}",
        f"description: {_quote(b.description)}",
        f"focus: {_quote(b.focus)}",
        f"instruction: {_quote(b.instruction)}",
        "categories:",
    ]
    for category in generated.categories:
        if not category.questions:
            continue
        width = max(2, len(str(len(category.questions))))
        lines += [f"  - id: {_key(category.id)}", f"    name: {_quote(category.name)}", "    questions:"]
        for i, text in enumerate(category.questions, 1):
            lines += [f"      - id: {_key(question_id(category.id, i, width))}", f"        text: {_quote(text)}"]
    return "\n".join(lines) + "\n"


def write_domain(generated: GeneratedDomain, path: Path, *, force: bool = False) -> Path:
    """Write the domain file of ``generated`` to ``path`` and load it back with the domain
    loader. Raises :class:`DomainError` when the file's name is not the domain's name, when it
    exists and ``force`` is not set, or when the loader refuses what was written."""
    from pytest_llmbias.domains.loader import load_domain, parse_domain

    path = Path(path)
    check_output(path, generated.brief.name, force=force)
    text = render_domain(generated)
    from pytest_llmbias.config.yamlutil import load_yaml_text

    data, lines = load_yaml_text(text, source=str(path), error=DomainError)
    parse_domain(data, path=path, lines=lines)  # refuse before writing anything the loader would
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    load_domain(path)
    return path


def check_output(path: Path, name: str, *, force: bool = False) -> None:
    """Raise :class:`DomainError` unless a domain named ``name`` may be written to ``path``: the
    loader needs the file named after the domain (``<name>.yaml`` or ``.yml``), and an existing
    file is only replaced with ``force``."""
    if path.suffix not in (".yaml", ".yml") or path.stem != name:
        raise DomainError(f"{path}: a domain file must be named after its domain: {name}.yaml")
    if path.exists() and not force:
        raise DomainError(f"{path} exists and is not replaced without force")
    if path.exists() and not path.is_file():
        raise DomainError(f"{path} exists and is not a file")
