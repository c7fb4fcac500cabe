"""The scorers a session loads once and shares among its gates: the feature extractors and their
store, the embedding model with its on-disk cache, and the background embedding of answers as they
arrive. :class:`~pytest_llmbias.session.BiasSession` owns one and closes it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmbias.config.settings import Settings

if TYPE_CHECKING:
    from pytest_llmbias.planning.collector import FollowUp
    from pytest_llmbias.scoring.embedding import EmbeddingScorer
    from pytest_llmbias.scoring.features import FeatureRegistry, FeatureStore
    from pytest_llmbias.scoring.prefetch import EmbeddingPrefetcher


class SessionScorers:
    """Each scorer made on first use, from the settings; :meth:`close` releases their caches."""

    def __init__(self, settings: Settings, add_features: Callable[[FeatureRegistry], None] | None = None) -> None:
        self.settings, self.add_features = settings, add_features
        self._embedders: dict[str, Any] = {}
        self._checked: set[str] = set()
        self._prefetcher: EmbeddingPrefetcher | None = None
        self._features: FeatureRegistry | None = None
        self._feature_store: FeatureStore | None = None

    @property
    def features(self) -> FeatureRegistry:
        """The feature extractors: the built-ins, the ``features`` of the settings file, then
        whatever ``add_features`` (the plugin's ``pytest_llmbias_add_features`` hook) registers."""
        if self._features is None:
            from pytest_llmbias.scoring.features import ClassifierExtractor, FeatureRegistry, register_builtin_features

            registry = FeatureRegistry()
            register_builtin_features(registry, embedding_scorer_factory=self.embedding_scorer)
            for f in self.settings.features:
                extractor = functools.partial(
                    ClassifierExtractor,
                    f.classifier,
                    name=f.name,
                    label=f.label,
                    weights=f.weights,
                    batch_size=f.batch_size,
                    max_length=f.max_length,
                )
                registry.register(f.name, extractor, replace=True)
            if self.add_features is not None:
                self.add_features(registry)
            self._features = registry
        return self._features

    @property
    def feature_store(self) -> FeatureStore:
        """Feature values, stored like embeddings under ``<store dir>/features``."""
        if self._feature_store is None:
            from pytest_llmbias.scoring.features import FeatureStore

            off = self.settings.store.cache == "off"
            self._feature_store = FeatureStore() if off else FeatureStore.for_store(self.settings.store.dir)
        return self._feature_store

    def embedding_scorer(self) -> EmbeddingScorer:
        """The configured embedding model, loaded once per session, with its on-disk cache; a
        :class:`~pytest_llmbias.errors.ScorerError` when what it needs is not installed."""
        from pytest_llmbias.scoring.embedding import EmbeddingScorer
        from pytest_llmbias.store.blobs import BlobCache

        e = self.settings.embedding
        if e.model not in self._embedders:
            self.check_embedding()
            cache = None if self.settings.store.cache == "off" else BlobCache.for_store(self.settings.store.dir)
            self._embedders[e.model] = EmbeddingScorer(e.model, cache=cache, batch_size=e.batch_size)
        return self._embedders[e.model]

    def check_embedding(self) -> None:
        """That the configured embedding model and the packages it needs are installed (see
        :func:`~pytest_llmbias.scoring.embedding_models.check_installed`), checked once: a gate
        that embeds calls it when it is planned, so that a missing extra stops the run before any call."""
        if self.settings.embedding.model not in self._checked:
            from pytest_llmbias.scoring.embedding_models import check_installed

            check_installed(self.settings.embedding.model)
            self._checked.add(self.settings.embedding.model)

    def prefetch_embeddings(self, instruction: str | None) -> FollowUp:
        """A follow-up that embeds each answer in the background as it arrives (see
        :mod:`pytest_llmbias.scoring.prefetch`); one prefetch thread per session. Asked for when a
        gate that embeds is planned, it checks first that the embedding model can be loaded."""
        from pytest_llmbias.scoring.prefetch import EmbeddingPrefetcher, EmbedFollowUp

        self.check_embedding()
        if self._prefetcher is None:
            self._prefetcher = EmbeddingPrefetcher(self.embedding_scorer, batch=self.settings.embedding.batch_size)
        return EmbedFollowUp(self._prefetcher, instruction)

    def feature_values(
        self, feature: str, texts: Sequence[str], references: Sequence[str | None] | None = None
    ) -> list[float]:
        """The feature's value of each text, through the feature store."""
        from pytest_llmbias.scoring.features import compute_features

        extractor = self.features.get(feature)
        return compute_features(extractor, texts, references, store=self.feature_store)

    def drain(self) -> None:
        """Wait until every answer handed to the background embedding is embedded."""
        if self._prefetcher is not None:
            self._prefetcher.drain()

    def stop_prefetching(self) -> None:
        """Stop the background embedding (before the session's loop and store close)."""
        if self._prefetcher is not None:
            self._prefetcher.close()

    def close(self) -> None:
        """Close the embedding caches and the feature store."""
        for scorer in self._embedders.values():
            if scorer.cache is not None:
                scorer.cache.close()
        if self._feature_store is not None:
            self._feature_store.close()
