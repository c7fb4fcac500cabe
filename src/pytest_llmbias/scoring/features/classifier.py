"""Features from Hugging Face text classifiers: ``classifier:<hub name or local path>``.

SAGED's classifier-based features (appendix A.3): a weighted sum of a text classifier's label
probabilities. torch and transformers are imported when a model is first loaded.
"""

from __future__ import annotations

import json
import math
import numbers
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import FeatureError
from pytest_llmbias.scoring.embedding_models import looks_like_path, tree_digest
from pytest_llmbias.scoring.features.extractor import FeatureExtractor

__all__ = ["CLASSIFIER_PREFIX", "ClassifierExtractor"]

CLASSIFIER_PREFIX = "classifier:"
"""Feature names ``classifier:<hub name or local path>`` resolve to a :class:`ClassifierExtractor`."""


def _check_installed(name: str) -> None:
    """That torch and transformers can be imported (without importing them): a feature is made when
    its gate is planned, so that a missing package stops the run before any call."""
    import importlib.util

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise FeatureError(
            f"the classifier feature {name!r} needs {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed. " + _TRANSFORMERS_HINT
        )


_TRANSFORMERS_HINT = (
    'Install them with: pip install transformers torch (or pip install "pytest-llmbias[embeddings]", '
    "which includes both; install torch==2.13.0 first to get the CPU build)"
)

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
    if looks_like_path(name):
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
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
        ):
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
        _check_installed(self.name)
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
                self._model_identity = f"local@sha256:{tree_digest(Path(self.resolved))}"
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
            from pytest_llmbias.scoring.embedding_models import quiet_loading

            local = self.kind == "local"
            try:
                with quiet_loading():
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
