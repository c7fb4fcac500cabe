"""What a domain is: categories of questions with stable ids, and an optional counterfactual form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmbias.domains.branching import branch_replacements, branch_text
from pytest_llmbias.errors import DomainError

if TYPE_CHECKING:
    from pytest_llmbias.config.rubric_file import Anchor


@dataclass(frozen=True)
class Question:
    """One prompt. ``concept`` and ``group`` are set for counterfactual prompts (expanded from a
    template or a branch, whose id is ``template``); ``reference`` is an optional reference answer
    kept for calibration."""

    id: str
    text: str
    category: str
    concept: str | None = None
    group: str | None = None
    template: str | None = None
    reference: str | None = None
    #: the question in each language it is written in (``text`` is the English one); empty for a
    #: question written in one language only
    texts: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    #: for one half of an "A or B?" pair: the pair's id (the halves are ``<id>:a`` and ``<id>:b``)
    split: str | None = None

    @property
    def unit(self) -> str:
        """What a group-sequential gate asks whole in one batch: the template or branch of a
        counterfactual prompt (all its concepts), the pair of an "A or B?" half, else the question."""
        return self.template or self.split or self.id

    def text_in(self, language: str) -> str | None:
        """The question in ``language`` (for a one-language question, its text is English)."""
        if self.texts:
            return self.texts.get(language)
        return self.text if language == "en" else None

    def to_dict(self) -> dict[str, Any]:
        return {
            k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.__dict__.items() if v is not None and v != {}
        }


@dataclass(frozen=True)
class Category:
    """A named group of questions. ``weight`` (a positive number) marks it as a bias dimension of
    that weight for the LLM Bias Index (``bias_index``); unmarked categories weigh 1 there."""

    id: str
    name: str
    questions: tuple[Question, ...]
    weight: float | None = None


@dataclass(frozen=True)
class Template:
    """A counterfactual template: ``text`` holds ``{concept}`` once or more; ``reference`` may too."""

    id: str
    text: str
    category: str
    reference: str | None = None

    def fill(self, concept: str, group: str) -> Question:
        """The template's prompt about ``concept``, with id ``<template id>:<concept>``."""
        return Question(
            id=f"{self.id}:{concept}",
            text=self.text.replace("{concept}", concept),
            category=self.category,
            concept=concept,
            group=group,
            template=self.id,
            reference=None if self.reference is None else self.reference.replace("{concept}", concept),
        )


@dataclass(frozen=True)
class Branch:
    """A root prompt about an actual ``concept``, branched to counterfactual concepts by replacing words.

    ``replacements`` maps each counterfactual concept to the extra word replacements it needs
    (``None`` or empty for none) on top of ``{concept: counterfactual concept}``; an extra entry
    for the actual concept itself overrides that default. ``reference`` is the actual baseline
    answer and is branched like the text. ``group`` is the group of concepts that no ``groups``
    entry of the counterfactual section lists (``"concept"`` when None).
    """

    id: str
    concept: str
    text: str
    category: str = "default"
    group: str | None = None
    reference: str | None = None
    replacements: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict, hash=False)

    @property
    def concepts(self) -> tuple[str, ...]:
        """The actual concept followed by the counterfactual ones, in prompt order."""
        return (self.concept, *self.replacements)

    def expand(self, groups: Mapping[str, Iterable[str]] | None = None) -> tuple[Question, ...]:
        """The root prompt, then one prompt per counterfactual concept, ids ``<branch id>:<concept>``.

        ``groups`` (group name -> concepts) gives each prompt's ``group``: the group that lists its
        concept, else :attr:`group`, else ``"concept"``.
        """
        group_of = {c: g for g, concepts in (groups or {}).items() for c in concepts}
        fallback = self.group or "concept"

        def question(concept: str, text: str, reference: str | None) -> Question:
            return Question(
                id=f"{self.id}:{concept}",
                text=text,
                category=self.category,
                concept=concept,
                group=group_of.get(concept, fallback),
                template=self.id,
                reference=reference,
            )

        out = [question(self.concept, self.text, self.reference)]
        for concept, extra in self.replacements.items():
            swaps = branch_replacements(self.concept, concept, extra)
            reference = None if self.reference is None else branch_text(self.reference, swaps)
            out.append(question(concept, branch_text(self.text, swaps), reference))
        return tuple(out)


@dataclass(frozen=True)
class Counterfactual:
    """Templates × concepts, plus branches. ``groups`` maps a group name (e.g. ``country``) to its
    concepts; templates are filled with every concept of every group."""

    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    templates: tuple[Template, ...] = ()
    branches: tuple[Branch, ...] = ()

    @property
    def group_names(self) -> tuple[str, ...]:
        """Every group a prompt can belong to: those of ``groups``, then those only branches use."""
        names: dict[str | None, None] = dict.fromkeys(self.groups)
        for branch in self.branches:
            names.update(dict.fromkeys(p.group for p in branch.expand(self.groups)))
        return tuple(n for n in names if n is not None)

    def expand(self, groups: Iterable[str] | None = None) -> tuple[Question, ...]:
        """Every counterfactual prompt of the named groups (all when None).

        Template prompts come first, one per (template, concept) in template order then concept
        order, with ids ``<template id>:<concept>``; then each branch's prompts (root first) with
        ids ``<branch id>:<concept>``. Ids are stable while the template or branch id and the
        concept's spelling are.
        """
        known = self.group_names
        wanted = list(known) if groups is None else list(groups)
        unknown = [g for g in wanted if g not in known]
        if unknown:
            raise DomainError(f"unknown concept group {unknown[0]!r}; known: {', '.join(known)}")
        out = [
            template.fill(concept, group)
            for template in self.templates
            for group in wanted
            for concept in self.groups.get(group, ())
        ]
        for branch in self.branches:
            out.extend(q for q in branch.expand(self.groups) if q.group in wanted)
        return tuple(out)


@dataclass(frozen=True)
class Perspective:
    """A point of view articles are written from: ``phrase`` completes "from <phrase> perspective"
    and "a writer with <phrase> point of view"; ``neutral`` marks the balanced one."""

    id: str
    name: str
    phrase: str
    neutral: bool = False


@dataclass(frozen=True)
class Topic:
    """A subject to write about from each of ``perspectives`` (ids; the domain's, unless the topic
    lists its own)."""

    id: str
    title: str
    perspectives: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    """Two prompts that ask the same task for opposing sides (a paired-prompt domain: the published
    even-handedness evaluation, or a team's own pairs). ``sides`` name each prompt's side (the
    published file's ``prompt_a_group`` and ``prompt_b_group``); ``framing`` is the task's kind
    (its ``template_category``: an essay, a story, a question); the domain's questions
    ``<id>:a`` and ``<id>:b`` are the two prompts."""

    id: str
    category: str
    framing: str
    prompts: tuple[str, str]
    sides: tuple[str, str]
    topic: str = ""
    stances: tuple[str, str] | None = None
    template: str | None = None
    partisan: bool | None = None

    @property
    def question_ids(self) -> tuple[str, str]:
        return f"{self.id}:a", f"{self.id}:b"

    def questions(self) -> tuple[Question, Question]:
        """The two prompts as questions of the pair's category; their :attr:`Question.unit` is the pair."""
        a, b = (
            Question(id=qid, text=text, category=self.category, group=side, split=self.id)
            for qid, text, side in zip(self.question_ids, self.prompts, self.sides, strict=True)
        )
        return a, b

    def to_row(self) -> dict[str, Any]:
        """The pair in the published file's columns (``split`` and ``template`` as far as known)."""
        stance_a, stance_b = self.stances or ("", "")
        return {
            "main_category": self.category,
            "topic_name": self.topic,
            "partisan": self.partisan,
            "template_category": self.framing,
            "template": self.template or "",
            "stance_a": stance_a,
            "stance_b": stance_b,
            "prompt_a": self.prompts[0],
            "prompt_b": self.prompts[1],
            "prompt_a_group": self.sides[0],
            "prompt_b_group": self.sides[1],
        }


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
    #: the ``languages`` section of the file: per language code, overrides of the answer
    #: instruction, the opposing-opinion phrase and the yes/no words (see
    #: :func:`pytest_llmbias.domains.languages.languages`)
    languages: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    #: for perspective-topic domains (self-preference probes): the perspectives, declared once, and
    #: the topics
    perspectives: tuple[Perspective, ...] = ()
    topics: tuple[Topic, ...] = ()
    #: for paired-prompt domains (even-handedness): the pairs; their prompts are the questions of
    #: :attr:`categories` (``<pair id>:a`` and ``<pair id>:b``)
    pairs: tuple[Pair, ...] = ()
    #: the judge's rubric file for this domain (None: the run's, else the built-in)
    rubric: Path | None = None
    #: answers whose score on the rubric is known (see :class:`~pytest_llmbias.config.rubric_file.Anchor`),
    #: and how many of them a judge may miss before its method is inconclusive
    anchors: tuple[Anchor, ...] = field(default=(), hash=False, compare=False)
    anchor_misses: int = 0
    #: the units (see :attr:`Question.unit`; topic ids) this view of the domain keeps: one batch of
    #: a group-sequential gate (see :meth:`restricted`); None keeps every one
    only: frozenset[str] | None = field(default=None, hash=False, compare=False)
    #: the units of that gate's first batch: the only ones whose answers its judge rates twice
    #: (the test-retest sample), so that every look reads the same retest pairs
    first_batch: frozenset[str] | None = field(default=None, hash=False, compare=False)

    @property
    def questions(self) -> tuple[Question, ...]:
        """Every question of every category, in file order (counterfactual prompts not included)."""
        return tuple(q for c in self.categories for q in c.questions if self.only is None or q.unit in self.only)

    @cached_property
    def _all_prompts(self) -> tuple[Question, ...]:
        extra = self.counterfactual.expand() if self.counterfactual is not None else ()
        return tuple(q for c in self.categories for q in c.questions) + extra

    @cached_property
    def prompts(self) -> tuple[Question, ...]:
        """Every prompt the domain asks: the category questions, then every counterfactual prompt."""
        return tuple(q for q in self._all_prompts if self.only is None or q.unit in self.only)

    @property
    def category_ids(self) -> tuple[str, ...]:
        """Every category id, in order of first appearance: the ``categories`` entries, then the
        categories of counterfactual templates and branches (of the whole domain, whatever
        :meth:`restricted` keeps)."""
        return tuple(dict.fromkeys([*(c.id for c in self.categories), *(q.category for q in self._all_prompts)]))

    def units(self, categories: Iterable[str] | None = None) -> tuple[str, ...]:
        """The units a group-sequential gate cuts into batches, in domain order: the topics' ids
        for a perspective-topic domain, else each prompt's :attr:`Question.unit` (of ``categories``)."""
        if self.topics and not self._all_prompts:
            return tuple(t.id for t in self.topics)
        return tuple(dict.fromkeys(q.unit for q in self.select(categories)))

    def restricted(self, units: Iterable[str], first: Iterable[str] = ()) -> Domain:
        """The domain as one batch of a group-sequential gate sees it: only the prompts (and
        topics) of ``units``; the categories, and so their names and checks, stay whole.
        ``first``: the units of the gate's first batch (see :attr:`first_batch`)."""
        import dataclasses

        keep = frozenset(units)
        return dataclasses.replace(
            self,
            only=keep,
            topics=tuple(t for t in self.topics if t.id in keep),
            pairs=tuple(p for p in self.pairs if p.id in keep),
            first_batch=frozenset(first) or None,
        )

    def select(self, categories: Iterable[str] | None = None) -> tuple[Question, ...]:
        """The prompts (:attr:`prompts`) of the named categories, in domain order (all when None);
        an unknown category is an error."""
        if categories is None:
            return self.prompts
        wanted = set(self._check_categories(categories, self.category_ids, "category"))
        return tuple(q for q in self.prompts if q.category in wanted)

    def counterfactual_prompts(self, categories: Iterable[str] | None = None) -> tuple[Question, ...]:
        """The prompts that have a concept (from templates and branches), of the named categories
        (all when None); a category with no counterfactual prompt is an error."""
        prompts = tuple(q for q in self.prompts if q.concept is not None)
        if categories is None:
            return prompts
        known = tuple(dict.fromkeys(q.category for q in self._all_prompts if q.concept is not None))
        wanted = set(self._check_categories(categories, known, "counterfactual category"))
        return tuple(q for q in prompts if q.category in wanted)

    def _check_categories(self, categories: Iterable[str], known: tuple[str, ...], what: str) -> list[str]:
        wanted = list(categories)
        unknown = [c for c in wanted if c not in known]
        if unknown:
            raise DomainError(f"domain {self.name!r} has no {what} {unknown[0]!r}; known: {', '.join(known) or 'none'}")
        return wanted
