"""Feature names → extractors: :class:`FeatureRegistry` and the built-in features."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_llmbias.errors import FeatureError, LLMBiasError
from pytest_llmbias.scoring.features.classifier import CLASSIFIER_PREFIX, ClassifierExtractor
from pytest_llmbias.scoring.features.distance import EmbeddingDistanceExtractor
from pytest_llmbias.scoring.features.extractor import FeatureExtractor
from pytest_llmbias.scoring.features.sentiment import SentimentExtractor

if TYPE_CHECKING:
    from pytest_llmbias.scoring.embedding import EmbeddingScorer

__all__ = ["Factory", "FeatureRegistry", "register_builtin_features"]

Factory = Callable[[], FeatureExtractor] | FeatureExtractor


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
                    raise FeatureError(f"the factory of feature {name!r} failed ({type(exc).__name__}: {exc})") from exc
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
    registry: FeatureRegistry, *, embedding_scorer_factory: Callable[[], EmbeddingScorer] | None
) -> None:
    """Register ``sentiment`` (:class:`SentimentExtractor`) and ``embedding_distance``
    (:class:`EmbeddingDistanceExtractor` over ``embedding_scorer_factory()``, called on the first
    ``get("embedding_distance")`` only; with None, ``embedding_distance`` is not registered)."""
    registry.register("sentiment", SentimentExtractor)
    if embedding_scorer_factory is not None:
        make_scorer = embedding_scorer_factory
        registry.register("embedding_distance", lambda: EmbeddingDistanceExtractor(make_scorer()))
