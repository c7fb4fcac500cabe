"""``llmbias generate-domain``: a first draft of a question domain, written by a model of the
roster, for a person to review.

:func:`generate_domain` asks through the session's ordinary call path: one call per category and
sample (:func:`generation_calls`), made by the collector and kept in the response store like every
call, so asking again with the same arguments is served from the store (and works offline). The
answers are read and de-duplicated by :mod:`pytest_llmbias.domains.draft_questions` and written by
:mod:`pytest_llmbias.domains.draft_file`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec, Settings
from pytest_llmbias.domains.draft_file import GeneratedCategory, GeneratedDomain
from pytest_llmbias.domains.draft_questions import (
    DEDUP_INSTRUCTION,
    DEFAULT_SIMILARITY,
    DomainBrief,
    Selection,
    parse_questions,
    question_messages,
    select_distinct,
)
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.planning.collector import CollectionReport, PlannedCall
from pytest_llmbias.store.calls import ModelCall

if TYPE_CHECKING:
    import numpy as np

    from pytest_llmbias.domains.draft_pairs import PairBrief
    from pytest_llmbias.scoring.embedding import EmbeddingScorer
    from pytest_llmbias.session import BiasSession

_TOKENS_PER_QUESTION = 64


def generation_calls(
    brief: DomainBrief, spec: ModelSpec, generation: GenerationSettings, *, samples: int = 1
) -> list[PlannedCall]:
    """The calls that ask ``spec`` for the questions: per category, samples ``0 .. samples-1``
    (sample ``i`` is sent with seed ``generation.seed + i``), labelled ``<category id>#<sample>``.
    ``max_tokens`` is raised to leave room for the questions asked when the settings' is smaller."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ConfigError(f"samples must be a positive integer, got {samples!r}")
    room = _TOKENS_PER_QUESTION * (brief.questions + 1)
    params = {"max_tokens": room} if generation.max_tokens < room and "max_tokens" not in spec.params else None
    return [
        PlannedCall(
            alias=spec.alias,
            call=ModelCall.build(spec, question_messages(brief, category), generation, sample=s, params=params),
            domain=brief.name,
            question=f"{category.id}#{s}",
        )
        for category in brief.categories
        for s in range(samples)
    ]


def writer_model(settings: Settings, alias: str | None = None) -> ModelSpec:
    """The model that writes the questions: the one named ``alias`` (target, a baseline or the
    judge), else the judge when one is configured, else the target. Raises :class:`ConfigError`
    when there is none, or no model has that alias."""
    if alias is not None:
        judge = settings.judge
        if judge is not None and judge.alias == alias:
            return judge
        try:
            return settings.model(alias)
        except ConfigError:
            known = [s.alias for s in settings.roster] + ([judge.alias] if judge is not None else [])
            raise ConfigError(f"no model with alias {alias!r} (known: {', '.join(known) or 'none'})") from None
    if settings.judge is not None:
        return settings.judge
    if settings.target is not None:
        return settings.target
    where = f" in {settings.source}" if settings.source else ""
    raise ConfigError(
        f"no model to write the questions{where}: configure a 'judge' or a 'target' in llmbias.yaml, "
        "or name a model of the roster by its alias"
    )


def embed_and_select(
    scorer: EmbeddingScorer,
    groups: Sequence[Sequence[str]],
    *,
    threshold: float = DEFAULT_SIMILARITY,
    limit: int | None = None,
) -> tuple[Selection, ...]:
    """:func:`select_distinct` over the embeddings ``scorer`` gives the candidates (through its
    cache; one ``embed`` call; no model is loaded when there is nothing to embed)."""
    flat = [t for g in groups for t in g]
    vectors: np.ndarray | list[Any] = scorer.embed(flat, DEDUP_INSTRUCTION) if flat else []
    return select_distinct(groups, vectors, threshold=threshold, limit=limit)


def generate_domain(
    session: BiasSession,
    brief: DomainBrief,
    *,
    alias: str | None = None,
    samples: int = 1,
    threshold: float = DEFAULT_SIMILARITY,
) -> GeneratedDomain:
    """Ask the writer model (:func:`writer_model`) for the brief's questions, one call per
    category and sample, through the session's store and collector; parse each answer and keep
    at most ``brief.questions`` distinct questions per category (near-duplicates removed with the
    session's embedding model, over the whole domain).

    Raises :class:`ConfigError` for an unknown alias or a bad threshold, and
    :class:`~pytest_llmbias.errors.MissingResponsesError` when a call failed or, offline, is not
    stored. A category whose answers hold no question comes back empty (see
    :attr:`GeneratedDomain.empty`): the caller decides.
    """
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"the similarity threshold must be in (0, 1], got {threshold!r}")
    settings = session.settings
    spec = writer_model(settings, alias)
    planned = generation_calls(brief, spec, settings.generation, samples=samples)
    report: CollectionReport = session.collect(planned)
    answers = session.read_calls(
        [(p.alias, p.question or "", p.call) for p in planned], f"question list(s) for domain {brief.name!r}"
    )
    groups: list[list[str]] = []
    for category in brief.categories:
        texts: list[str] = []
        for p in planned:
            if p.question is not None and p.question.rsplit("#", 1)[0] == category.id:
                texts.extend(parse_questions(answers[p.call.key].text))
        groups.append(texts)
    selections = embed_and_select(session.embedding_scorer(), groups, threshold=threshold, limit=brief.questions)
    categories = tuple(
        GeneratedCategory(
            id=c.id,
            name=c.name,
            asked=brief.questions,
            parsed=len(g),
            questions=s.kept,
            dropped=s.dropped,
            surplus=s.surplus,
        )
        for c, g, s in zip(brief.categories, groups, selections, strict=True)
    )
    return GeneratedDomain(
        brief=brief,
        alias=spec.alias,
        model=spec.model,
        temperature=float(planned[0].call.params.get("temperature", settings.generation.temperature)),
        seed=settings.generation.seed,
        samples=samples,
        threshold=threshold,
        embedding_model=_shown_model(settings.embedding.model),
        categories=categories,
        fetched=report.fetched,
        from_store=report.from_store,
    )


def _shown_model(name: str) -> str:
    """How the file names the embedding model: its name, or the folder name of a local model
    (not the path, which belongs to one machine)."""
    path = Path(name).expanduser()
    return f"the local model {path.name!r}" if path.is_absolute() or path.is_dir() else name


def generate_pairs(session: BiasSession, brief: PairBrief, *, alias: str | None = None, samples: int = 1) -> PairDraft:
    """Ask the writer model (:func:`writer_model`) for ``brief.pairs`` paired prompts per subject
    (see :mod:`pytest_llmbias.domains.draft_pairs`), one call per subject and sample, through the
    session's store and collector; return the domain file's text and what each subject gave.
    Raises as :func:`generate_domain` does."""
    from pytest_llmbias.domains.draft_pairs import pair_messages, parse_pair_lines, render_pairs

    settings = session.settings
    spec = writer_model(settings, alias)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ConfigError(f"samples must be a positive integer, got {samples!r}")
    generation = settings.generation
    room = 2 * _TOKENS_PER_QUESTION * (brief.pairs + 1)
    params = {"max_tokens": room} if generation.max_tokens < room and "max_tokens" not in spec.params else None
    planned = [
        PlannedCall(
            spec.alias,
            ModelCall.build(spec, pair_messages(brief, subject), generation, sample=s, params=params),
            brief.name,
            f"{subject.category}#{s}",
        )
        for subject in brief.subjects
        for s in range(samples)
    ]
    report = session.collect(planned)
    answers = session.read_calls(
        [(p.alias, p.question or "", p.call) for p in planned], f"paired prompts for domain {brief.name!r}"
    )
    drafted: dict[str, list[tuple[str, str, str]]] = {}
    for p in planned:
        got = drafted.setdefault((p.question or "").rsplit("#", 1)[0], [])
        got.extend(x for x in parse_pair_lines(answers[p.call.key].text) if x not in got)
    text = render_pairs(brief, drafted, alias=spec.alias, model=spec.model, seed=generation.seed)
    kept = {s.category: min(len(drafted.get(s.category, [])), brief.pairs) for s in brief.subjects}
    return PairDraft(text, spec.alias, spec.model, kept, report.fetched, report.from_store)


@dataclass(frozen=True)
class PairDraft:
    """A drafted paired-prompt domain: the file's ``text``, who wrote it, the pairs ``kept`` per
    subject's category, and the calls fetched and served from the store."""

    text: str
    alias: str
    model: str
    kept: dict[str, int]
    fetched: int
    from_store: int
