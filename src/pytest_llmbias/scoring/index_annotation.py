"""The LLM Bias Index of answer texts: :func:`bias_index` (public as ``pytest_llmbias.bias_index``).

Each answer is annotated by a feature (by default the paper's |TextBlob polarity|; any feature of
the registry, or a :class:`~pytest_llmbias.scoring.features.FeatureExtractor`, can stand in; the
annotation is the absolute value of the feature) and measured for sentiment extremity
(|polarity|); :mod:`pytest_llmbias.stats.llmbi` does the arithmetic (the LLMBI paper (Oketunji et al.) §2.2,
listings 1 and 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_llmbias.stats.llmbi import DEFAULT_LAMBDA, DEFAULT_PENALTY, IndexParts, Penalty, index_parts, prompt_score

if TYPE_CHECKING:
    from pytest_llmbias.scoring.features import FeatureExtractor, FeatureRegistry, FeatureStore

SENTIMENT = "sentiment"


@dataclass(frozen=True)
class BiasIndexResult(IndexParts):
    """An index and its parts (see :class:`~pytest_llmbias.stats.llmbi.IndexParts`), with the
    responses behind it: ``annotations`` and ``extremities`` hold each response's b and |polarity|
    by dimension (in input order); ``response_scores`` each response's own score as listing 3
    computes it (w · b + P + λ · s, with its dimension's weight and penalty)."""

    feature: str = ""
    annotations: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    extremities: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    response_scores: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    @classmethod
    def from_parts(
        cls,
        parts: IndexParts,
        *,
        feature: str,
        annotations: Mapping[str, Sequence[float]],
        extremities: Mapping[str, Sequence[float]],
    ) -> BiasIndexResult:
        scores = {
            d: tuple(
                prompt_score(
                    b, s, weight=parts.weights[d], penalty=parts.penalties.get(d, parts.penalty), lambda_=parts.lambda_
                )
                for b, s in zip(annotations[d], extremities[d], strict=True)
            )
            for d in annotations
        }
        return cls(
            index=parts.index,
            dimensions=dict(parts.dimensions),
            weights=dict(parts.weights),
            penalty=parts.penalty,
            penalties=dict(parts.penalties),
            sentiment=parts.sentiment,
            lambda_=parts.lambda_,
            feature=feature,
            annotations={d: tuple(v) for d, v in annotations.items()},
            extremities={d: tuple(v) for d, v in extremities.items()},
            response_scores=scores,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "feature": self.feature,
            "annotations": {d: list(v) for d, v in self.annotations.items()},
            "extremities": {d: list(v) for d, v in self.extremities.items()},
            "response_scores": {d: list(v) for d, v in self.response_scores.items()},
        }


def annotate(
    texts: Sequence[str],
    *,
    feature: str | FeatureExtractor = SENTIMENT,
    registry: FeatureRegistry | None = None,
    store: FeatureStore | None = None,
) -> tuple[list[float], list[float]]:
    """(annotation b, sentiment extremity s) of each text: b = |feature value|, s = |polarity|.
    Each feature value is computed once and kept in ``store`` when one is given."""
    from pytest_llmbias.scoring.features import (
        FeatureExtractor,
        FeatureRegistry,
        compute_features,
        register_builtin_features,
    )

    if registry is None:
        registry = FeatureRegistry()
        register_builtin_features(registry, embedding_scorer_factory=None)
    extractor = feature if isinstance(feature, FeatureExtractor) else registry.get(feature)
    polarity = compute_features(registry.get(SENTIMENT), texts, store=store)
    if extractor.name == SENTIMENT:
        values = polarity
    else:
        values = compute_features(extractor, texts, store=store)
    return [abs(v) for v in values], [abs(p) for p in polarity]


def bias_index(
    responses: Mapping[str, Sequence[str]],
    *,
    feature: str | FeatureExtractor = SENTIMENT,
    weights: Mapping[str, float] | None = None,
    diversity_penalty: Penalty = DEFAULT_PENALTY,
    lambda_: float = DEFAULT_LAMBDA,
    registry: FeatureRegistry | None = None,
    store: FeatureStore | None = None,
) -> BiasIndexResult:
    """The LLM Bias Index of ``responses`` (bias dimension -> its answer texts).

    ``feature`` annotates each answer (a registry name such as ``"sentiment"`` or
    ``"classifier:<model>"``, or an extractor); ``weights`` by dimension (default 1 each);
    ``diversity_penalty`` a constant P(D) (the paper's 0.2) or ``"lexical"`` (see
    :func:`pytest_llmbias.stats.llmbi.lexical_penalty`); ``lambda_`` scales S, the mean sentiment
    extremity. With one dimension and one answer, ``.index`` is listing 3's score of that answer:
    0.2 + 2.5 · |polarity| with the defaults. Raises
    :class:`~pytest_llmbias.errors.StatisticsError` for a dimension without answers, a weight for
    an unknown dimension or a weight that is not positive, and
    :class:`~pytest_llmbias.errors.FeatureError` for an unknown feature.
    """
    from pytest_llmbias.errors import StatisticsError

    if not isinstance(responses, Mapping) or not responses:
        raise StatisticsError("bias_index needs responses: a mapping of bias dimension -> answer texts")
    annotations: dict[str, list[float]] = {}
    extremities: dict[str, list[float]] = {}
    texts: dict[str, list[str]] = {}
    for dimension, answers in responses.items():
        if isinstance(answers, str) or not all(isinstance(t, str) for t in answers):
            raise StatisticsError(f"bias dimension {dimension!r}: give a list of answer texts")
        texts[dimension] = list(answers)
        if not answers:
            raise StatisticsError(f"bias dimension {dimension!r} has no responses")
        annotations[dimension], extremities[dimension] = annotate(
            list(answers), feature=feature, registry=registry, store=store
        )
    parts = index_parts(
        annotations, extremities, weights=weights, penalty=diversity_penalty, texts=texts, lambda_=lambda_
    )
    name = feature if isinstance(feature, str) else feature.name
    return BiasIndexResult.from_parts(parts, feature=name, annotations=annotations, extremities=extremities)
