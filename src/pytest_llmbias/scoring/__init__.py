"""Scorers that turn model responses into per-question bias scores.

:mod:`pytest_llmbias.scoring.judge`: the judge rubric, prompt and D_LLM;
:mod:`pytest_llmbias.scoring.judge_answers`: reading a score from a judge's answer;
:mod:`pytest_llmbias.scoring.judge_calls`: the judge's calls, re-asks and their reading back.
:mod:`pytest_llmbias.scoring.embedding`: the embedding deviation score of the relative-bias method
(cosine distance of each model's responses to the other models' responses). Importing this package
imports neither numpy nor torch nor sentence-transformers.
"""

from __future__ import annotations

from pytest_llmbias.scoring.embedding import (
    BUNDLED_MODEL_NAME,
    BlobCache,
    EmbeddingScorer,
    bundled_model_path,
    deviation_scores,
    embedding_deviations,
    resolve_model,
)

__all__ = [
    "BUNDLED_MODEL_NAME",
    "BlobCache",
    "EmbeddingScorer",
    "bundled_model_path",
    "deviation_scores",
    "embedding_deviations",
    "resolve_model",
]
