"""The ``embedding_distance`` feature: cosine distance of a response to its prompt's reference text.

numpy is imported on the first extraction; the embedding model only when something must be encoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_llmbias.errors import FeatureError
from pytest_llmbias.scoring.features.extractor import FeatureExtractor

if TYPE_CHECKING:
    from pytest_llmbias.scoring.embedding import EmbeddingScorer

__all__ = ["EmbeddingDistanceExtractor"]


class EmbeddingDistanceExtractor(FeatureExtractor):
    """Cosine distance (1 − cosine similarity, in [0, 2]) of each response to its reference text.

    SAGED's *baseline distance*: how far a response is from the expected answer. Embeddings are
    computed by ``scorer`` (an :class:`EmbeddingScorer`, so they are cached in its embedding cache
    as usual; the model is loaded only when something must be encoded). ``instruction`` is passed
    to the scorer (used by INSTRUCTOR models only). Identity:
    ``embedding-distance:<version>:<scorer identity>`` (plus the instruction for an INSTRUCTOR
    model). A response identical to its reference has distance 0.0.
    """

    name = "embedding_distance"
    needs_reference = True

    def __init__(self, scorer: EmbeddingScorer, *, instruction: str | None = None) -> None:
        if not hasattr(scorer, "embed") or not hasattr(scorer, "identity"):
            raise TypeError(f"scorer must be an EmbeddingScorer, got {type(scorer).__name__}")
        self.scorer = scorer
        self.instruction = instruction

    def __repr__(self) -> str:
        return f"<EmbeddingDistanceExtractor {self.name!r} over {self.scorer!r}>"

    @property
    def identity(self) -> str:
        base = f"embedding-distance:{self.version}:{self.scorer.identity}"
        if self.instruction and getattr(self.scorer, "is_instructor", False):
            base += "\0instruction=" + self.instruction.strip()
        return base

    def extract(self, texts: Sequence[str], references: Sequence[str] | None = None) -> list[float]:
        import numpy as np

        texts = list(texts)
        if references is None:
            raise FeatureError(
                f"the feature {self.name!r} compares each response with a reference text: "
                "the prompt needs a `reference` text in the domain file"
            )
        references = list(references)
        if len(references) != len(texts):
            raise ValueError(f"got {len(texts)} texts and {len(references)} references")
        if not texts:
            return []
        row = {t: i for i, t in enumerate(dict.fromkeys([*texts, *references]))}
        vectors = np.asarray(self.scorer.embed(list(row), self.instruction), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise FeatureError(f"the embedding model {self.scorer.name!r} returned a zero or non-finite vector")
        vectors = vectors / norms
        values = []
        for text, reference in zip(texts, references, strict=True):
            if text == reference:
                values.append(0.0)
                continue
            distance = 1.0 - float(vectors[row[text]] @ vectors[row[reference]])
            distance = min(2.0, max(0.0, distance))
            values.append(0.0 if distance < 1e-12 else distance)
        return values
