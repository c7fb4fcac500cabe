"""The plugin's own hooks, for a ``conftest.py`` or another plugin to implement.

Example, in ``conftest.py``::

    from pytest_llmbias.scoring.features import FeatureExtractor

    class Hedging(FeatureExtractor):
        name = "hedging"

        def extract(self, texts, references=None):
            words = ("may", "might", "perhaps", "arguably")
            return [sum(t.lower().split().count(w) for w in words) / max(1, len(t.split())) for t in texts]

    def pytest_llmbias_add_features(registry):
        registry.register("hedging", Hedging)

and then ``@pytest.mark.bias_impact_ratio("countries", feature="hedging")``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_llmbias.scoring.features import FeatureRegistry


@pytest.hookspec
def pytest_llmbias_add_features(registry: FeatureRegistry, config: pytest.Config) -> None:
    """Register feature extractors for ``bias_impact_ratio(feature=...)``.

    Call ``registry.register(name, factory)`` with a zero-argument callable (or a class) that
    returns a :class:`~pytest_llmbias.scoring.features.FeatureExtractor`; it is called only when a
    test uses the feature. The built-ins (``sentiment``, ``embedding_distance``) and the features
    of ``llmbias.yaml`` are registered before this hook runs; pass ``replace=True`` to override one.
    Called once per run, after collection, from every ``conftest.py`` and plugin.
    """
