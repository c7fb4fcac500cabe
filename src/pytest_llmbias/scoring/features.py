"""Feature extraction: one number per response (SAGED §3.2), stored so that a re-run extracts nothing.

A *feature* turns each response text into a single finite float — its sentiment, the probability a
classifier gives to "toxic", its embedding distance to a reference answer — which a gate then groups
by concept and compares (the four-fifths rule of ``bias_impact_ratio``), optionally after baseline
calibration by subtraction (§3.3).

- :class:`FeatureExtractor`: the interface a custom feature implements.
- Built-ins: :class:`SentimentExtractor` (TextBlob polarity), :class:`EmbeddingDistanceExtractor`
  (cosine distance of a response to its prompt's reference text, SAGED's "baseline distance"),
  :class:`ClassifierExtractor` (a weighted sum of a Hugging Face text classifier's label
  probabilities, SAGED's classifier-based features, appendix A.3).
- :class:`FeatureRegistry`: names → extractors, created on first use; ``classifier:<model>`` names
  need no registration.
- :class:`FeatureStore` and :func:`compute_features`: look every value up first, extract only the
  misses, validate, store (8-byte doubles in a ``diskcache`` folder ``<store dir>/features``).

Nothing heavy is imported with this module: textblob, torch and transformers are imported by the
extractors that need them, when they first extract.
"""

from __future__ import annotations

import abc
import copy
import hashlib
import importlib.metadata
import json
import math
import numbers
import struct
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

from pytest_llmbias.errors import FeatureError, LLMBiasError, StoreError
from pytest_llmbias.scoring.embedding import EmbeddingScorer, _looks_like_path, _tree_digest
from pytest_llmbias.store.blobs import BlobCache
from pytest_llmbias.store.disk import reset_hint

__all__ = [
    "FEATURES_FOLDER",
    "CLASSIFIER_PREFIX",
    "ClassifierExtractor",
    "EmbeddingDistanceExtractor",
    "FeatureExtractor",
    "FeatureRegistry",
    "FeatureStore",
    "SentimentExtractor",
    "compute_features",
    "register_builtin_features",
]

FEATURES_FOLDER = "features"
"""The sub-folder of the store directory that holds the feature values."""

CLASSIFIER_PREFIX = "classifier:"
"""Feature names ``classifier:<hub name or local path>`` resolve to a :class:`ClassifierExtractor`."""

_TRANSFORMERS_HINT = (
    'Install them with: pip install transformers torch (or pip install "pytest-llmbias[embeddings]", '
    "which includes both; install torch==2.13.0 first to get the CPU build)"
)


# --------------------------------------------------------------------------------------------
# The interface


class FeatureExtractor(abc.ABC):
    """Turns each response text into one number: the interface of every feature.

    Subclass it, set :attr:`name` (the registry sets it to the registered name) and implement
    :meth:`extract`::

        class WordCount(FeatureExtractor):
            name = "word_count"
            version = "1"  # bump it whenever extract() would give other numbers

            def extract(self, texts, references=None):
                return [float(len(text.split())) for text in texts]

    The contract:

    - :meth:`extract` gets a list of texts and returns one finite real number per text, in order
      (a list, tuple or 1-d array). It is called with the texts whose values are not stored yet,
      each (text, reference) once, and should batch them. A wrong length or a non-finite or
      non-numeric value is a :class:`FeatureError` from :func:`compute_features`, and nothing
      of that call is stored.
    - :attr:`needs_reference`: when True, ``references`` is a list of the same length (the prompt's
      ``reference`` text of the domain file for each response); otherwise it is None and values do
      not depend on references.
    - :attr:`identity`: what stored values are keyed by (with the text and reference). It must change
      whenever the numbers could change: a new algorithm (bump :attr:`version`), another model or
      model file, other weights or settings. Default: ``f"{name}:{version}"``.
    - Values should be deterministic: a stored value is served instead of extracting again.
    """

    name: str = ""
    version: str = "1"
    needs_reference: bool = False

    @property
    def identity(self) -> str:
        """What stored values are keyed by; see the class docstring."""
        return f"{self.name}:{self.version}"

    @abc.abstractmethod
    def extract(self, texts: Sequence[str], references: Sequence[str] | None = None) -> Sequence[float]:
        """One finite float per text, in order (``references``: same length, when needed)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


# --------------------------------------------------------------------------------------------
# Sentiment (TextBlob)


def _textblob_version() -> str:
    try:
        return importlib.metadata.version("textblob")
    except importlib.metadata.PackageNotFoundError as exc:
        raise FeatureError("the sentiment feature needs TextBlob, which is not installed. "
                           "Install it with: pip install textblob") from exc


class SentimentExtractor(FeatureExtractor):
    """TextBlob polarity in [-1, 1] (its default ``PatternAnalyzer``: works offline, no NLTK data).

    Identity: ``textblob-polarity:<version>:textblob==<installed version>``. textblob is imported
    on the first :meth:`extract`; a missing textblob is a :class:`FeatureError` naming the pip
    package.
    """

    name = "sentiment"

    def __init__(self) -> None:
        self._identity: str | None = None

    @property
    def identity(self) -> str:
        if self._identity is None:
            self._identity = f"textblob-polarity:{self.version}:textblob=={_textblob_version()}"
        return self._identity

    def extract(self, texts: Sequence[str], references: Sequence[str] | None = None) -> list[float]:
        try:
            from textblob import TextBlob
        except ImportError as exc:
            raise FeatureError(
                f"the sentiment feature needs TextBlob ({exc}). Install it with: pip install textblob"
            ) from exc
        return [float(TextBlob(text).sentiment.polarity) for text in texts]


# --------------------------------------------------------------------------------------------
# Embedding distance to the reference


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
        for text, reference in zip(texts, references):
            if text == reference:
                values.append(0.0)
                continue
            distance = 1.0 - float(vectors[row[text]] @ vectors[row[reference]])
            distance = min(2.0, max(0.0, distance))
            values.append(0.0 if distance < 1e-12 else distance)
        return values


# --------------------------------------------------------------------------------------------
# Hugging Face text classifiers

_model_lock = threading.Lock()
_classifiers: dict[str, tuple[Any, Any]] = {}  # model identity -> (tokenizer, model), per process

_SANE_MAX_LENGTH = 1_000_000


def _resolve_classifier(model: str) -> tuple[str, str]:
    """(resolved, kind): an existing local folder (``local``) or a Hub name (``hub``)."""
    if not isinstance(model, str) or not model.strip():
        raise FeatureError(f"a classifier model name or path is required, got {model!r}")
    name = model.strip()
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path), "local"
    if path.exists():
        raise FeatureError(f"the classifier model {name!r} is a file; give the folder the model was saved in")
    if _looks_like_path(name):
        raise FeatureError(
            f"the classifier model folder {name!r} does not exist. Give the path of a folder saved with "
            "save_pretrained (config.json, weights, tokenizer files) or a Hugging Face Hub name."
        )
    return name, "hub"


def _ordered_labels(id2label: Any) -> tuple[str, ...]:
    """A config's ``id2label`` as label names in id order (ids may be ints or numeric strings)."""
    try:
        return tuple(str(id2label[i]) for i in sorted(id2label, key=int))
    except (TypeError, ValueError):
        return tuple(str(v) for v in id2label.values())


def _labels_from_config(config: Any) -> tuple[str, ...]:
    return _ordered_labels(getattr(config, "id2label", None) or {})


def _labels_from_json(directory: Path) -> tuple[str, ...] | None:
    """The labels in a local folder's config.json (in id order), or None when it does not say."""
    try:
        id2label = json.loads((directory / "config.json").read_text(encoding="utf-8"))["id2label"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not isinstance(id2label, dict) or not id2label or not all(str(k).lstrip("-").isdigit() for k in id2label):
        return None
    return _ordered_labels(id2label)


def _check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    if not isinstance(weights, Mapping) or not weights:
        raise ValueError(f"weights must be a non-empty mapping of label to weight, got {weights!r}")
    checked: dict[str, float] = {}
    for label, weight in weights.items():
        if not isinstance(label, str) or not label:
            raise ValueError(f"weights must be keyed by label names, got {label!r}")
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(float(weight)):
            raise ValueError(f"the weight of label {label!r} must be a finite number, got {weight!r}")
        checked[label] = float(weight)
    return checked


class ClassifierExtractor(FeatureExtractor):
    """A Hugging Face text classifier's label probabilities, weighted and summed: ``Σ w[l]·P(l)``.

    ``model`` is a local folder saved with ``save_pretrained`` (config, weights, tokenizer) or a Hub
    name (loaded from the local Hugging Face cache; set ``HF_HUB_OFFLINE=1`` in CI so an uncached
    name fails at once instead of retrying). It is loaded with ``AutoTokenizer`` and
    ``AutoModelForSequenceClassification`` on the first :meth:`extract` (on CPU, float32, eval mode,
    no gradients), once per process and model; texts go through in batches of ``batch_size``,
    truncated to ``max_length`` tokens (default: the tokenizer's ``model_max_length``, else the
    model's ``max_position_embeddings``).

    Probabilities are the softmax over the labels, or a per-label sigmoid when the model's
    ``config.problem_type`` is ``"multi_label_classification"`` or it has a single output (as the
    ``text-classification`` pipeline does; a ``"regression"`` model's raw outputs are used).

    Weights: ``label="toxic"`` means ``{"toxic": 1}`` (the feature is P(toxic)); ``weights=`` gives
    them all; label names match exactly, else case-insensitively. With neither, a model whose labels
    include ``positive`` and ``negative`` (any case) gets ``{positive: +1, negative: -1}``, a signed
    sentiment P(positive) − P(negative); any other model is a :class:`FeatureError` listing its
    labels. A weight naming a label the model lacks is a :class:`FeatureError` listing the labels
    (raised at construction when a local folder's config.json lists them, else on loading).

    Identity: ``classifier:<version>:<model>:weights=<weights or auto>:max_length=<n or auto>``,
    where ``<model>`` is ``local@sha256:<digest of the folder's files>`` for a folder (so a model
    saved over another at the same path gets new values, and a copy elsewhere shares them) or the
    Hub name. ``name`` and ``batch_size`` are not part of it.
    """

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        label: str | None = None,
        weights: Mapping[str, float] | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1):
            raise ValueError(f"max_length must be a positive integer or None, got {max_length!r}")
        if label is not None and weights is not None:
            raise ValueError("give label= or weights=, not both")
        if label is not None:
            if not isinstance(label, str) or not label:
                raise ValueError(f"label must be a label name, got {label!r}")
            requested: dict[str, float] | None = {label: 1.0}
        elif weights is not None:
            requested = _check_weights(weights)
        else:
            requested = None
        self.model = model
        self.resolved, self.kind = _resolve_classifier(model)
        self.name = name if name is not None else CLASSIFIER_PREFIX + self.model.strip()
        self.requested_weights = requested
        self.batch_size = batch_size
        self.max_length = max_length
        self._identity: str | None = None
        self._model_identity: str | None = None
        self._labels: tuple[str, ...] | None = None
        self._weights: dict[str, float] | None = None
        self._runtime: tuple[Any, Any, Any, str, int] | None = None
        if self.kind == "local":
            labels = _labels_from_json(Path(self.resolved))
            if labels is not None:  # early, cheap check of the weights against the model's labels
                self._labels = labels
                self._weights = self._resolve_weights(labels)

    def __repr__(self) -> str:
        return f"<ClassifierExtractor {self.name!r} model={self.model!r}>"

    # -- identity ------------------------------------------------------------------------

    @property
    def model_identity(self) -> str:
        """``local@sha256:<digest>`` for a folder, the name for a Hub model."""
        if self._model_identity is None:
            if self.kind == "local":
                self._model_identity = f"local@sha256:{_tree_digest(Path(self.resolved))}"
            else:
                self._model_identity = self.resolved
        return self._model_identity

    @property
    def identity(self) -> str:
        if self._identity is None:
            if self.requested_weights is None:
                weights = "auto"
            else:
                weights = json.dumps(self.requested_weights, sort_keys=True, separators=(",", ":"))
            max_length = "auto" if self.max_length is None else str(self.max_length)
            self._identity = (
                f"classifier:{self.version}:{self.model_identity}:weights={weights}:max_length={max_length}"
            )
        return self._identity

    # -- labels and weights --------------------------------------------------------------

    @property
    def labels(self) -> tuple[str, ...]:
        """The model's labels in id order (from a local config.json, else from the loaded model)."""
        if self._labels is None:
            self._load()
        assert self._labels is not None
        return self._labels

    @property
    def weights(self) -> dict[str, float]:
        """The weight of each label used (resolved against the model's labels)."""
        if self._weights is None:
            self._weights = self._resolve_weights(self.labels)
        return dict(self._weights)

    def _labels_text(self, labels: Sequence[str]) -> str:
        return ", ".join(repr(lab) for lab in labels) or "(none)"

    def _resolve_weights(self, labels: Sequence[str]) -> dict[str, float]:
        lowered: dict[str, list[str]] = {}
        for lab in labels:
            lowered.setdefault(lab.lower(), []).append(lab)
        if self.requested_weights is None:
            if "positive" in lowered and "negative" in lowered:
                return {lowered["positive"][0]: 1.0, lowered["negative"][0]: -1.0}
            raise FeatureError(
                f"the classifier {self.model!r} has no default feature: its labels are "
                f"{self._labels_text(labels)} (only a model with 'positive' and 'negative' labels gets "
                "P(positive) - P(negative) by default). Pass label= (one label's probability) or weights= "
                "({label: weight}) to ClassifierExtractor, and register it under a feature name of its own."
            )
        resolved: dict[str, float] = {}
        for key, weight in self.requested_weights.items():
            if key in labels:
                actual = key
            elif len(lowered.get(key.lower(), ())) == 1:
                actual = lowered[key.lower()][0]
            else:
                raise FeatureError(
                    f"the classifier {self.model!r} has no label {key!r}; its labels are "
                    f"{self._labels_text(labels)}. Pass label= or weights= naming one of them."
                )
            resolved[actual] = resolved.get(actual, 0.0) + weight
        return resolved

    # -- loading -------------------------------------------------------------------------

    def _load(self) -> tuple[Any, Any, Any, str, int]:
        """(tokenizer, model, weight vector, activation, max_length), loaded once per process."""
        if self._runtime is not None:
            return self._runtime
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:
            raise FeatureError(
                f"the classifier feature {self.name!r} needs transformers and torch ({exc}). " + _TRANSFORMERS_HINT
            ) from exc
        key = self.model_identity
        with _model_lock:
            cached = _classifiers.get(key)
        if cached is None:
            local = self.kind == "local"
            try:
                tokenizer = AutoTokenizer.from_pretrained(self.resolved, local_files_only=local)
                loaded, info = AutoModelForSequenceClassification.from_pretrained(
                    self.resolved, local_files_only=local, output_loading_info=True
                )
            except Exception as exc:
                if local:
                    raise FeatureError(
                        f"the classifier model at {self.resolved} could not be loaded ({type(exc).__name__}: "
                        f"{exc}). It must be a text-classification model folder saved with save_pretrained "
                        "(config.json, weights and tokenizer files)."
                    ) from exc
                raise FeatureError(
                    f"the classifier model {self.resolved!r} could not be loaded ({type(exc).__name__}: {exc}). "
                    f"There is no local folder {self.resolved!r}, and Hub models are not downloaded while "
                    "offline (HF_HUB_OFFLINE=1): download it once with network access, or give the path of a "
                    "local model folder (saved with save_pretrained)."
                ) from exc
            architectures = list(getattr(loaded.config, "architectures", None) or [])
            missing = sorted((info or {}).get("missing_keys") or [])
            if (architectures and not any(a.endswith("ForSequenceClassification") for a in architectures)) or missing:
                what = f"architectures {architectures}" if architectures else "its checkpoint"
                raise FeatureError(
                    f"the model {self.model!r} is not a trained text-classification model ({what}; "
                    f"weights missing from the checkpoint: {missing or 'none'}): its classification head "
                    "would be random. Use a model fine-tuned for sequence classification."
                )
            loaded = loaded.float().to("cpu").eval()
            with _model_lock:
                cached = _classifiers.setdefault(key, (tokenizer, loaded))
        tokenizer, loaded = cached

        config = loaded.config
        labels = _labels_from_config(config)
        if not labels:
            raise FeatureError(f"the classifier {self.model!r} has no labels (config.id2label is empty)")
        self._labels = labels
        self._weights = self._resolve_weights(labels)
        vector = torch.zeros(len(labels), dtype=torch.float64)
        for lab, weight in self._weights.items():
            vector[labels.index(lab)] = weight

        problem = getattr(config, "problem_type", None)
        if problem == "regression":
            activation = "none"
        elif problem == "multi_label_classification" or len(labels) == 1:
            activation = "sigmoid"
        else:
            activation = "softmax"

        max_length = self.max_length
        if max_length is None:
            candidate = getattr(tokenizer, "model_max_length", None)
            if isinstance(candidate, int) and 0 < candidate <= _SANE_MAX_LENGTH:
                max_length = candidate
            else:
                positions = getattr(config, "max_position_embeddings", None)
                if isinstance(positions, int) and positions > 0:
                    # RoBERTa-style models reserve padding_idx + 1 positions
                    offset = 2 if "roberta" in str(getattr(config, "model_type", "")) else 0
                    max_length = max(1, positions - offset)
                else:
                    max_length = 512
        self._runtime = (tokenizer, loaded, vector, activation, max_length)
        return self._runtime

    def extract(self, texts: Sequence[str], references: Sequence[str] | None = None) -> list[float]:
        texts = list(texts)
        if not texts:
            return []
        tokenizer, loaded, vector, activation, max_length = self._load()
        import torch

        values: list[float] = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                batch = texts[start : start + self.batch_size]
                encoded = tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
                logits = loaded(**encoded).logits.to(torch.float64)
                if activation == "softmax":
                    probabilities = torch.softmax(logits, dim=-1)
                elif activation == "sigmoid":
                    probabilities = torch.sigmoid(logits)
                else:
                    probabilities = logits
                values.extend((probabilities @ vector).tolist())
        return values


# --------------------------------------------------------------------------------------------
# The registry

Factory = Union[Callable[[], FeatureExtractor], FeatureExtractor]


class FeatureRegistry:
    """Feature names → extractors, each created on first :meth:`get` and then reused.

    Names ``classifier:<hub name or local path>`` need no registration: :meth:`get` turns them
    into a :class:`ClassifierExtractor` with default weights (a registered name wins). The extractor
    returned by :meth:`get` always reports the name it was asked by (an extractor whose ``name``
    differs is copied and renamed; the original is left alone).
    """

    def __init__(self) -> None:
        self._factories: dict[str, Factory] = {}
        self._instances: dict[str, FeatureExtractor] = {}
        self._lock = threading.RLock()

    def register(self, name: str, factory: Factory, *, replace: bool = False) -> None:
        """Register ``factory`` (a zero-argument callable returning a :class:`FeatureExtractor`, or
        an extractor) under ``name``. An existing name is a :class:`FeatureError` unless ``replace``."""
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ValueError(f"a feature name must be a non-empty string without surrounding spaces, got {name!r}")
        if not isinstance(factory, FeatureExtractor) and not callable(factory):
            raise TypeError(
                f"feature {name!r}: expected a FeatureExtractor or a zero-argument callable returning one, "
                f"got {type(factory).__name__}"
            )
        with self._lock:
            if name in self._factories and not replace:
                raise FeatureError(f"a feature named {name!r} is already registered; pass replace=True to replace it")
            self._factories[name] = factory
            self._instances.pop(name, None)

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted (``classifier:`` names resolved on the fly are not listed)."""
        with self._lock:
            return tuple(sorted(self._factories))

    def __contains__(self, name: object) -> bool:
        """True for a registered name and for any well-formed ``classifier:<model>`` name
        (whose model is only checked by :meth:`get`)."""
        if not isinstance(name, str):
            return False
        with self._lock:
            if name in self._factories:
                return True
        return name.startswith(CLASSIFIER_PREFIX) and bool(name[len(CLASSIFIER_PREFIX) :].strip())

    def get(self, name: str) -> FeatureExtractor:
        """The extractor of ``name``, created on first use. Unknown → :class:`FeatureError`."""
        with self._lock:
            known = self._instances.get(name)
            if known is not None:
                return known
            factory = self._factories.get(name)
            if factory is None:
                if isinstance(name, str) and name.startswith(CLASSIFIER_PREFIX):
                    model = name[len(CLASSIFIER_PREFIX) :].strip()
                    if not model:
                        raise FeatureError(
                            f"feature {name!r} names no model: write classifier:<hub name or local path>"
                        )
                    extractor: FeatureExtractor = ClassifierExtractor(model, name=name)
                else:
                    registered = ", ".join(repr(n) for n in self.names()) or "(none)"
                    raise FeatureError(
                        f"unknown feature {name!r}. Registered features: {registered}. A Hugging Face "
                        f"text-classification model needs no registration: name it as "
                        f"'{CLASSIFIER_PREFIX}<hub name or local path>'."
                    )
            elif isinstance(factory, FeatureExtractor):
                extractor = factory
            else:
                try:
                    extractor = factory()
                except LLMBiasError:
                    raise
                except Exception as exc:
                    raise FeatureError(
                        f"the factory of feature {name!r} failed ({type(exc).__name__}: {exc})"
                    ) from exc
                if not isinstance(extractor, FeatureExtractor):
                    raise FeatureError(
                        f"the factory of feature {name!r} returned {type(extractor).__name__}, not a FeatureExtractor"
                    )
            if getattr(extractor, "name", None) != name:
                extractor = copy.copy(extractor)
                extractor.name = name
            self._instances[name] = extractor
            return extractor


def register_builtin_features(
    registry: FeatureRegistry,
    *,
    embedding_scorer_factory: Callable[[], EmbeddingScorer] | None,
) -> None:
    """Register ``sentiment`` (:class:`SentimentExtractor`) and ``embedding_distance``
    (:class:`EmbeddingDistanceExtractor` over ``embedding_scorer_factory()``, called on the first
    ``get("embedding_distance")`` only; with None, ``embedding_distance`` is not registered)."""
    registry.register("sentiment", SentimentExtractor)
    if embedding_scorer_factory is not None:
        make_scorer = embedding_scorer_factory
        registry.register("embedding_distance", lambda: EmbeddingDistanceExtractor(make_scorer()))


# --------------------------------------------------------------------------------------------
# Stored values

_DOUBLE = struct.Struct("<d")


class FeatureStore:
    """Feature values on disk: 8-byte little-endian doubles in a :class:`BlobCache`.

    Keyed by ``"feature:" + sha256(identity NUL text NUL reference-or-empty)``. ``FeatureStore(None)``
    stores nothing (every lookup misses). Counters: :attr:`hits` (values served) and
    :attr:`written` (values stored). A malformed entry is a :class:`StoreError` with the reset hint.
    """

    def __init__(self, cache: BlobCache | None = None) -> None:
        self.cache = cache
        self.hits = 0
        self.written = 0

    @classmethod
    def for_store(cls, store_directory: Path | str, **kwargs: Any) -> FeatureStore:
        """The store in sub-folder ``features`` of a response store folder."""
        return cls(BlobCache.for_store(store_directory, FEATURES_FOLDER, label="feature store", **kwargs))

    def __repr__(self) -> str:
        where = "no store" if self.cache is None else str(self.cache.directory)
        return f"FeatureStore({where})"

    @staticmethod
    def key(identity: str, text: str, reference: str | None = None) -> str:
        material = f"{identity}\0{text}\0{reference or ''}".encode("utf-8", "surrogatepass")
        return "feature:" + hashlib.sha256(material).hexdigest()

    def get_many(self, identity: str, items: Iterable[tuple[str, str | None]]) -> dict[tuple[str, str | None], float]:
        """The stored values of those (text, reference) pairs that are present."""
        if self.cache is None:
            return {}
        keys = {item: self.key(identity, *item) for item in items}
        found = self.cache.get_many(keys.values())
        values: dict[tuple[str, str | None], float] = {}
        for item, key in keys.items():
            blob = found.get(key)
            if blob is None:
                continue
            value = _DOUBLE.unpack(blob)[0] if len(blob) == _DOUBLE.size else None
            if value is None or not math.isfinite(value):
                what = f"{len(blob)} bytes" if value is None else f"value {value!r}"
                raise StoreError(
                    f"the {self.cache.label} at {self.cache.directory} holds a malformed value for feature "
                    f"{identity!r} (entry {key!r}: {what}, expected one finite 8-byte float). "
                    + reset_hint(self.cache.directory)
                )
            values[item] = value
        self.hits += len(values)
        return values

    def set_many(self, identity: str, values: Mapping[tuple[str, str | None], float]) -> None:
        """Store every value, in one transaction (non-finite values are refused)."""
        if self.cache is None or not values:
            return
        blobs = {}
        for item, value in values.items():
            if not math.isfinite(value):
                raise ValueError(f"refusing to store a non-finite feature value {value!r}")
            blobs[self.key(identity, *item)] = _DOUBLE.pack(float(value))
        self.cache.set_many(blobs)
        self.written += len(blobs)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def compute_features(
    extractor: FeatureExtractor,
    texts: Sequence[str],
    references: Sequence[str | None] | None = None,
    store: FeatureStore | BlobCache | None = None,
) -> list[float]:
    """The feature value of every text, in input order, through ``store``.

    Every (text, reference) is looked up in ``store`` first; the misses, each distinct pair once,
    are extracted in one :meth:`FeatureExtractor.extract` call, validated and stored. For an
    extractor that does not need references they are ignored (and not part of the keys).

    Raises :class:`FeatureError` when the extractor needs a reference and one is missing, when its
    name or identity is empty, when it fails, or when its output has the wrong length or holds a
    value that is not a finite real number (naming the extractor and the input index; nothing of
    that call is stored); :class:`StoreError` when the store cannot be used or holds a malformed
    value.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not a string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings, got {type(text).__name__} at index {i}")
    name = getattr(extractor, "name", None)
    if not isinstance(extractor, FeatureExtractor):
        raise TypeError(f"extractor must be a FeatureExtractor, got {type(extractor).__name__}")
    if not isinstance(name, str) or not name:
        raise FeatureError(f"the feature extractor {type(extractor).__name__} has no name (set its `name`)")
    needs_reference = bool(extractor.needs_reference)

    if needs_reference:
        if references is None:
            raise FeatureError(
                f"the feature {name!r} compares each response with a reference text: "
                "the prompt needs a `reference` text in the domain file"
            )
        if isinstance(references, str):
            raise TypeError("references must be a sequence of strings, not a string")
        refs: list[str | None] = list(references)
        if len(refs) != len(texts):
            raise ValueError(f"got {len(texts)} texts and {len(refs)} references")
        for i, ref in enumerate(refs):
            if ref is None:
                raise FeatureError(
                    f"the feature {name!r} compares each response with a reference text, and response #{i} "
                    "has none: the prompt needs a `reference` text in the domain file"
                )
            if not isinstance(ref, str):
                raise TypeError(f"references must be strings, got {type(ref).__name__} at index {i}")
    else:
        refs = [None] * len(texts)
    if not texts:
        return []

    identity = extractor.identity
    if not isinstance(identity, str) or not identity:
        raise FeatureError(f"the feature extractor {name!r} has an empty identity")
    if isinstance(store, BlobCache):
        store = FeatureStore(store)
    if store is None:
        store = FeatureStore(None)

    pairs = list(zip(texts, refs))
    first_index: dict[tuple[str, str | None], int] = {}
    for i, pair in enumerate(pairs):
        first_index.setdefault(pair, i)
    values = store.get_many(identity, first_index)
    misses = [pair for pair in first_index if pair not in values]

    if misses:
        miss_texts = [t for t, _ in misses]
        miss_refs = [r for _, r in misses] if needs_reference else None
        label = f"the feature extractor {name!r} ({type(extractor).__name__})"
        try:
            output = extractor.extract(miss_texts, miss_refs)
        except LLMBiasError:
            raise
        except Exception as exc:
            raise FeatureError(f"{label} failed on {len(misses)} text(s) ({type(exc).__name__}: {exc})") from exc
        if isinstance(output, (str, bytes)) or not hasattr(output, "__len__") or not hasattr(output, "__iter__"):
            raise FeatureError(f"{label} returned {type(output).__name__}, not a sequence of numbers")
        output = list(output)
        if len(output) != len(misses):
            raise FeatureError(f"{label} returned {len(output)} values for {len(misses)} texts")
        new: dict[tuple[str, str | None], float] = {}
        for pair, value in zip(misses, output):
            good = isinstance(value, numbers.Real) and not isinstance(value, bool)
            number = float(value) if good else math.nan
            if not good or not math.isfinite(number):
                i = first_index[pair]
                kind = "" if good else f" ({type(value).__name__})"
                raise FeatureError(
                    f"{label} returned {_describe(value)}{kind} for text #{i} ({_describe(pair[0][:60])}): "
                    "every value must be a finite real number. Nothing was stored."
                )
            new[pair] = number
        store.set_many(identity, new)
        values.update(new)
    return [values[pair] for pair in pairs]
