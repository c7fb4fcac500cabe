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

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_llmbias.catalog import MarkerRegistry
    from pytest_llmbias.clients.python_target import ModelRegistry
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


@pytest.hookspec
def pytest_llmbias_add_models(registry: ModelRegistry, config: pytest.Config) -> None:
    """Register Python callables as models, for entries ``{python: NAME}`` of ``llmbias.yaml``
    (target, baselines or judge): ``registry.register(NAME, fn)`` (or ``registry[NAME] = fn``)
    with a callable ``fn(messages, **params)``, sync or async, that returns the answer's text (or
    a mapping with ``text`` and optionally ``usage``). For an application built in test code (a
    chain assembled from the project's objects) rather than importable as ``module:function``.
    Called once per run, when the first Python target is checked or called, from every
    ``conftest.py`` and plugin; a name registered twice is an error unless ``replace=True``.
    """


@pytest.hookspec
def pytest_llmbias_add_gates(registry: MarkerRegistry, config: pytest.Config) -> None:
    """Add gates: call ``registry.register(gate)`` with an object of the
    :class:`~pytest_llmbias.engine.protocol.Gate` protocol (``marker``, ``help``, ``signature()``,
    ``parse()``, ``plan()``, ``evaluate()``, ``figures()``); its marker is then declared with its
    signature and help, planned, evaluated and reported like a built-in gate's. Called once per
    run, when the plugin is configured: implement it in a plugin or in a ``conftest.py`` that
    pytest loads before collection (the rootdir's, or one beside the test paths given).
    """


@pytest.hookspec
def pytest_llmbias_json_generate(config: pytest.Config, gate: dict[str, Any]) -> None:
    """Extend one gate's entry of the JSON document (``--llmbias-json``) in place, before it is
    written: ``gate`` holds ``test``, ``gate``, ``domain``, ``outcome``, ``passed``, ``verdict`` and
    ``result``. Called once per gate, in the process that writes the document."""


@pytest.hookspec
def pytest_llmbias_json_update(config: pytest.Config, document: dict[str, Any]) -> None:
    """Extend or change the whole JSON document in place, just before it is written (after every
    gate's ``pytest_llmbias_json_generate``). The document must still match the shipped schema."""
