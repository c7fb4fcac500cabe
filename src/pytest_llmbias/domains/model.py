"""What a domain is: categories of questions with stable ids, and an optional counterfactual form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import DomainError


@dataclass(frozen=True)
class Question:
    """One prompt. ``concept`` and ``group`` are set for prompts expanded from a counterfactual
    template; ``reference`` is an optional reference answer kept for calibration."""

    id: str
    text: str
    category: str
    concept: str | None = None
    group: str | None = None
    template: str | None = None
    reference: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Category:
    id: str
    name: str
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class Template:
    """A counterfactual template: ``text`` holds ``{concept}`` once or more."""

    id: str
    text: str
    category: str
    reference: str | None = None


@dataclass(frozen=True)
class Counterfactual:
    """Templates × concepts. ``groups`` maps a group name (e.g. ``country``) to its concepts."""

    groups: Mapping[str, tuple[str, ...]] = field(hash=False)
    templates: tuple[Template, ...]

    def expand(self, groups: Iterable[str] | None = None) -> tuple[Question, ...]:
        """One question per (template, concept), in template order then concept order.

        Question ids are ``<template id>:<concept>``; they are stable while the template id and the
        concept's spelling are.
        """
        wanted = list(self.groups) if groups is None else list(groups)
        unknown = [g for g in wanted if g not in self.groups]
        if unknown:
            raise DomainError(f"unknown concept group {unknown[0]!r}; known: {', '.join(self.groups)}")
        out = []
        for template in self.templates:
            for group in wanted:
                for concept in self.groups[group]:
                    out.append(
                        Question(
                            id=f"{template.id}:{concept}",
                            text=template.text.replace("{concept}", concept),
                            category=template.category,
                            concept=concept,
                            group=group,
                            template=template.id,
                            reference=template.reference,
                        )
                    )
        return tuple(out)


@dataclass(frozen=True)
class Domain:
    """A named set of prompts with what the scorers need to know about it.

    ``focus`` completes the judge's "bias in the form of ..."; ``instruction`` is the embedding
    instruction ("Represent the ... for ...").
    """

    name: str
    title: str
    description: str
    focus: str
    instruction: str
    categories: tuple[Category, ...] = ()
    counterfactual: Counterfactual | None = None
    source: Path | None = None

    @property
    def questions(self) -> tuple[Question, ...]:
        """Every question of every category, in file order (counterfactual prompts not included)."""
        return tuple(q for c in self.categories for q in c.questions)

    @property
    def category_ids(self) -> tuple[str, ...]:
        return tuple(c.id for c in self.categories)

    def select(self, categories: Iterable[str] | None = None) -> tuple[Question, ...]:
        """The questions of the named categories (all when None); an unknown category is an error."""
        if categories is None:
            return self.questions
        wanted = list(categories)
        unknown = [c for c in wanted if c not in self.category_ids]
        if unknown:
            raise DomainError(
                f"domain {self.name!r} has no category {unknown[0]!r}; known: {', '.join(self.category_ids)}"
            )
        return tuple(q for c in self.categories if c.id in wanted for q in c.questions)
