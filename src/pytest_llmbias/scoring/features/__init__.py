"""Feature extraction: one number per response (SAGED §3.2), stored so that a re-run extracts nothing.

A *feature* turns each response text into a single finite float — its sentiment, the probability a
classifier gives to "toxic", its embedding distance to a reference answer — which a gate then groups
by concept and compares (the four-fifths rule of ``bias_impact_ratio``), optionally after baseline
calibration by subtraction (§3.3). One module per concern:

- :mod:`.base`: :class:`FeatureExtractor`, the interface a custom feature implements, and
  :func:`compute_features`, which looks every value up first, extracts only the misses, checks
  them and stores them.
- :mod:`.sentiment`: :class:`SentimentExtractor` (TextBlob polarity).
- :mod:`.distance`: :class:`EmbeddingDistanceExtractor` (cosine distance of a response to its
  prompt's reference text, SAGED's "baseline distance").
- :mod:`.classifier`: :class:`ClassifierExtractor` (a weighted sum of a Hugging Face text
  classifier's label probabilities, SAGED's classifier-based features, appendix A.3).
- :mod:`.registry`: :class:`FeatureRegistry`, names → extractors, created on first use;
  ``classifier:<model>`` names need no registration.
- :mod:`.store`: :class:`FeatureStore` (8-byte doubles in a ``diskcache`` folder
  ``<store dir>/features``).

Every public name is importable from this package. Nothing heavy is imported with it: textblob,
numpy, torch and transformers are imported by the extractors that need them, when they first
extract. (:class:`~pytest_llmbias.errors.FeatureError` lives in :mod:`pytest_llmbias.errors`.)
"""

from __future__ import annotations

from pytest_llmbias.scoring.features.classifier import CLASSIFIER_PREFIX, ClassifierExtractor
from pytest_llmbias.scoring.features.distance import EmbeddingDistanceExtractor
from pytest_llmbias.scoring.features.extractor import FeatureExtractor, compute_features
from pytest_llmbias.scoring.features.feature_store import FEATURES_FOLDER, FeatureStore
from pytest_llmbias.scoring.features.registry import FeatureRegistry, register_builtin_features
from pytest_llmbias.scoring.features.sentiment import SentimentExtractor

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
