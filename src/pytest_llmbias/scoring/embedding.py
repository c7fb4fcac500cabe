"""Embedding-based relative-bias scoring (Relative Bias, Arbabi & Kerschbaum, §3.4, equations 1-2).

Each response is embedded with a sentence-transformers model; for one question, a model's
deviation ``δ(q_i, M_j)`` is the mean cosine distance between its response and the responses of
every other model (:func:`deviation_scores`); ``D_embed(M_j)`` is the mean of ``δ`` over the
questions. :func:`embedding_deviations` computes every ``δ`` of a run with a single batched
``encode`` call.

Embeddings are cached on disk (:class:`BlobCache`, raw float32 bytes in a ``diskcache.Cache`` at
``<store dir>/embeddings``), keyed by model identity, instruction and text, so a re-run embeds
nothing it has embedded before and does not even load the model.

Nothing heavy is imported with this module: numpy, torch and sentence-transformers are imported on
first use.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Collection, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_llmbias.errors import ScorerError, StoreError
from pytest_llmbias.scoring.embedding_models import (
    BUNDLED_MODEL_NAME,
    BUNDLED_SHA256,
    INSTALL_HINT,
    bundled_model_path,
    config_says_instructor,
    resolve_kind,
    resolve_model,
    tree_digest,
)
from pytest_llmbias.store.blobs import BlobCache
from pytest_llmbias.store.disk import reset_hint

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "BUNDLED_MODEL_NAME",
    "BlobCache",
    "EmbeddingScorer",
    "bundled_model_path",
    "deviation_scores",
    "embedding_deviations",
    "resolve_model",
]

EMBEDDINGS_FOLDER = "embeddings"
"""The sub-folder of the store directory that holds the embedding cache."""

A = TypeVar("A", bound=Hashable)
Q = TypeVar("Q", bound=Hashable)


# --------------------------------------------------------------------------------------------
# The scorer

_lock = threading.Lock()
_models: dict[tuple[str, str | None, bool], Any] = {}


class EmbeddingScorer:
    """Embeds texts with a sentence-transformers model, through an optional on-disk cache.

    ``model`` is resolved by :func:`resolve_model`. The model is loaded (and sentence-transformers
    imported) only when a text must actually be encoded; loaded models are shared per process by
    identity and device.

    **Identity** (:attr:`identity`, part of every cache key): for the bundled model its name and
    verified weights hash; for a local folder ``local@sha256:<digest>`` where the digest covers the
    folder's weights (``model.safetensors``, ``pytorch_model.bin``, ...) and config/tokenizer
    files, so two different models saved at the same path never share entries while the same model
    at two paths does; for a Hub name the name itself. ``+instructor`` is appended for INSTRUCTOR
    models. The device is not part of it.

    **Instructions**: a model is treated as INSTRUCTOR (:attr:`is_instructor`) when the last
    component of its name or folder contains ``instructor`` (any case) or its Pooling module's
    config has ``include_prompt: false``. Such a model is loaded with
    ``set_pooling_include_prompt(False)`` and the instruction is passed as the encode ``prompt``
    (with a space appended when it does not end in whitespace, so its last word does not merge
    with the text); different instructions give different embeddings and cache entries. For any
    other model the instruction is ignored, both for encoding and for the cache key: an
    instruction changes nothing for a non-instructor model.

    Counters: :attr:`encoded` (texts passed to ``encode``) and :attr:`cache_hits` (texts served
    from the cache), both counting distinct texts per :meth:`embed` call.
    """

    def __init__(
        self, model: str, *, cache: BlobCache | None = None, batch_size: int = 64, device: str | None = None
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.name = model
        self.cache = cache
        self.batch_size = batch_size
        self.device = device
        self.encoded = 0
        self.cache_hits = 0
        self._resolved: tuple[str, str] | None = None
        self._identity: str | None = None
        self._is_instructor: bool | None = None
        self._model: Any = None

    def __repr__(self) -> str:
        return f"EmbeddingScorer({self.name!r})"

    @property
    def resolved(self) -> str:
        """What sentence-transformers loads (see :func:`resolve_model`)."""
        return self._resolution()[0]

    def _resolution(self) -> tuple[str, str]:
        # the bundled model's weights are verified when they are loaded (see _load), not to name
        # the model: a run whose embeddings are all stored never reads them
        if self._resolved is None:
            self._resolved = resolve_kind(self.name, verify=False)
        return self._resolved

    @property
    def is_instructor(self) -> bool:
        """Whether instructions are used (see the class docstring)."""
        if self._is_instructor is None:
            resolved, kind = self._resolution()
            last = (Path(resolved).name if kind != "hub" else resolved.rstrip("/").split("/")[-1]).lower()
            self._is_instructor = "instructor" in last or (kind != "hub" and config_says_instructor(Path(resolved)))
        return self._is_instructor

    @property
    def identity(self) -> str:
        """The model's part of the cache keys (see the class docstring)."""
        if self._identity is None:
            resolved, kind = self._resolution()
            if kind == "bundled":
                base = f"{BUNDLED_MODEL_NAME}@sha256:{BUNDLED_SHA256}"
            elif kind == "local":
                base = f"local@sha256:{tree_digest(Path(resolved))}"
            else:
                base = resolved
            self._identity = base + ("+instructor" if self.is_instructor else "")
        return self._identity

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loaded on first access)."""
        if self._model is None:
            self._model = self._load()
        return self._model

    def _load(self) -> Any:
        key = (self.identity, self.device, self.is_instructor)
        with _lock:
            cached = _models.get(key)
        if cached is not None:
            return cached
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ScorerError(f"embedding scoring needs sentence-transformers ({exc}). " + INSTALL_HINT) from exc
        resolved, kind = self._resolution()
        if kind == "bundled":
            bundled_model_path()  # the weights as shipped, or a ScorerError saying how to reinstall
        from pytest_llmbias.scoring.embedding_models import quiet_loading

        try:
            with quiet_loading():
                if kind == "hub":
                    loaded = SentenceTransformer(resolved, device=self.device)
                else:
                    loaded = SentenceTransformer(resolved, device=self.device, local_files_only=True)
        except Exception as exc:
            if kind == "hub":
                raise ScorerError(
                    f"the embedding model {resolved!r} could not be loaded ({type(exc).__name__}: {exc}). "
                    "Models are not downloaded while offline (HF_HUB_OFFLINE): give the path of a local "
                    f"model folder instead, or use the bundled {BUNDLED_MODEL_NAME!r}."
                ) from exc
            raise ScorerError(
                f"the embedding model at {resolved} could not be loaded ({type(exc).__name__}: {exc})"
            ) from exc
        if self.is_instructor:
            loaded.set_pooling_include_prompt(False)
        with _lock:
            _models.setdefault(key, loaded)
            return _models[key]

    def _instruction(self, instruction: str | None) -> str:
        if not self.is_instructor or not instruction:
            return ""
        return instruction if instruction[-1].isspace() else instruction + " "

    def key(self, text: str, instruction: str | None = None) -> str:
        """The cache key of ``text`` embedded under ``instruction`` by this model."""
        return self._key(text, self._instruction(instruction))

    def _key(self, text: str, instruction: str) -> str:
        material = f"{self.identity}\0{instruction}\0{text}".encode("utf-8", "surrogatepass")
        return "embedding:" + hashlib.sha256(material).hexdigest()

    def embed(self, texts: Sequence[str], instruction: str | None = None) -> np.ndarray:
        """The embeddings of ``texts``: an ``n × d`` float32 array, rows L2-normalised, in order.

        Distinct texts are looked up in the cache; only the misses are encoded, in one ``encode``
        call (``batch_size``, normalised), and stored. An empty ``texts`` gives an empty
        ``(0, 0)`` array without loading the model. ``instruction`` is used only by INSTRUCTOR
        models (see the class docstring).

        Raises :class:`ScorerError` when the model cannot be loaded, :class:`StoreError` when the
        cache cannot be used or holds a malformed vector.
        """
        import numpy as np

        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__}")
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        instr = self._instruction(instruction)
        unique = list(dict.fromkeys(texts))
        row: dict[str, int] = {}
        parts: list[np.ndarray] = []

        keys: dict[str, str] = {}
        if self.cache is not None:
            keys = {t: self._key(t, instr) for t in unique}
            found = self.cache.get_many(keys.values())
            if found:
                hit_texts = [t for t in unique if keys[t] in found]
                blobs = [found[keys[t]] for t in hit_texts]
                parts.append(self._decode(blobs))
                row.update((t, i) for i, t in enumerate(hit_texts))
                self.cache_hits += len(hit_texts)

        misses = [t for t in unique if t not in row]
        if misses:
            options: dict[str, Any] = {}
            if instr:
                options["prompt"] = instr
            vectors = self.model.encode(
                misses,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
                **options,
            )
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(misses):
                raise ScorerError(f"the embedding model {self.name!r} returned shape {vectors.shape}")
            if parts and parts[0].shape[1] != vectors.shape[1]:
                raise self._bad_entry(f"{parts[0].shape[1]}-d vectors, the model makes {vectors.shape[1]}-d")
            self.encoded += len(misses)
            if self.cache is not None:
                self.cache.set_many({keys[t]: vectors[i].tobytes() for i, t in enumerate(misses)})
            offset = len(row)
            row.update((t, offset + i) for i, t in enumerate(misses))
            parts.append(vectors)

        combined = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(unique) == len(texts) and all(row[t] == i for i, t in enumerate(texts)):
            return np.array(combined, dtype=np.float32)  # a writable copy, in order
        return combined[np.fromiter((row[t] for t in texts), dtype=np.intp, count=len(texts))]

    def _bad_entry(self, what: str) -> StoreError:
        assert self.cache is not None
        return StoreError(
            f"the embedding cache at {self.cache.directory} holds malformed vectors for model "
            f"{self.name!r} ({what}). " + reset_hint(self.cache.directory)
        )

    def _decode(self, blobs: list[bytes]) -> np.ndarray:
        import numpy as np

        size = len(blobs[0])
        if size == 0 or size % 4 or any(len(b) != size for b in blobs):
            raise self._bad_entry(f"entry sizes {sorted({len(b) for b in blobs})} bytes")
        matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), size // 4)
        norms = np.linalg.norm(matrix, axis=1)
        if not np.all(np.abs(norms - 1.0) < 1e-3):  # also catches NaN
            raise self._bad_entry("a vector is not unit-length")
        return matrix


# --------------------------------------------------------------------------------------------
# Scores


def deviation_scores(embeddings: Mapping[A, Any], reference: Collection[A] | None = None) -> dict[A, float]:
    """``δ(q, M_j)`` for one question: alias → mean cosine distance to the other aliases (to the
    ``reference`` aliases other than itself, when given: a target and a recorded release are each
    measured against the baselines' answers, not against each other).

    ``embeddings`` maps each alias to its response embeddings for the question: an array of
    ``samples × d`` (a single ``d``-vector is one sample). Rows are L2-normalised again here.

    Several samples per model: each sample of ``M_j`` is compared with every sample of every other
    model; the distances to model ``M_k``'s samples are averaged first, then over the other models
    (each weighs the same, as in equation 1, whatever its sample count), then over ``M_j``'s
    samples. With one sample per model this is exactly equation 1. Equivalently
    ``δ_j = mean_{k≠j} (1 − m_j · m_k)`` with ``m_j`` the mean of ``M_j``'s unit vectors, which is
    how it is computed. Results are clamped at 0 against rounding (identical responses give 0.0).

    Raises :class:`ScorerError` with fewer than two aliases, an alias with no sample, differing
    dimensions, or a zero or non-finite vector.
    """
    import numpy as np

    if len(embeddings) < 2:
        raise ScorerError(f"deviation scores need responses from at least 2 models, got {len(embeddings)}")
    aliases = list(embeddings)
    means = []
    dimension = None
    for alias in aliases:
        matrix = np.asarray(embeddings[alias], dtype=np.float64)
        if matrix.ndim == 1:
            matrix = matrix[None, :]
        if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
            raise ScorerError(f"model {alias!r} has no embeddings of shape samples × d (got {matrix.shape})")
        if dimension is None:
            dimension = matrix.shape[1]
        elif matrix.shape[1] != dimension:
            raise ScorerError(f"model {alias!r} has {matrix.shape[1]}-d embeddings, others {dimension}-d")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise ScorerError(f"model {alias!r} has a zero or non-finite embedding")
        means.append((matrix / norms).mean(axis=0))
    stacked = np.stack(means)
    similarity = stacked @ stacked.T
    others = [i for i, a in enumerate(aliases) if reference is None or a in reference]
    scores = {}
    for j, alias in enumerate(aliases):
        against = [i for i in others if i != j]
        if not against:
            raise ScorerError(f"model {alias!r} has no reference model to deviate from")
        total = sum(1.0 - float(similarity[j, i]) for i in against)
        value = max(0.0, total / len(against))
        scores[alias] = 0.0 if value < 1e-12 else value
    return scores


def embedding_deviations(
    scorer: EmbeddingScorer,
    texts: Mapping[tuple[A, Q], Sequence[str]],
    instruction: str | None = None,
    reference: Collection[A] | None = None,
) -> dict[A, dict[Q, float]]:
    """``δ`` for every model and question: ``{alias: {question_id: δ}}``.

    ``texts`` maps ``(alias, question_id)`` to the model's response samples for the question. All
    texts of all models and questions are embedded in one :meth:`EmbeddingScorer.embed` call
    (distinct texts only), then :func:`deviation_scores` is applied per question. The mean of an
    alias's values is its ``D_embed`` (equation 2). ``reference``: see :func:`deviation_scores`.

    Raises :class:`ScorerError` when a ``(alias, question_id)`` has no responses or a question has
    responses from fewer than two models.
    """

    distinct: dict[str, int] = {}
    for (alias, question), samples in texts.items():
        if isinstance(samples, str):
            raise TypeError(f"the responses of ({alias!r}, {question!r}) must be a list of strings, not a string")
        if len(samples) == 0:
            raise ScorerError(f"model {alias!r} has no responses to question {question!r}")
        for text in samples:
            distinct.setdefault(text, len(distinct))
    vectors = scorer.embed(list(distinct), instruction)

    by_question: dict[Q, dict[A, np.ndarray]] = {}
    for (alias, question), samples in texts.items():
        by_question.setdefault(question, {})[alias] = vectors[[distinct[t] for t in samples]]
    result: dict[A, dict[Q, float]] = {}
    for alias, _ in texts:
        result.setdefault(alias, {})
    for question, per_alias in by_question.items():
        if len(per_alias) < 2:
            raise ScorerError(
                f"question {question!r} has responses from {len(per_alias)} model(s) "
                f"({', '.join(map(repr, per_alias))}); deviation scores need at least 2"
            )
        for alias, value in deviation_scores(per_alias, reference).items():
            result[alias][question] = value
    return result
