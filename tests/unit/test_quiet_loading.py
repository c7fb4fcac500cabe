"""Loading a model inside a run prints no progress bar of its own, and leaves the bars as it found them."""

from __future__ import annotations

import pytest

pytest.importorskip("sentence_transformers")


def test_loading_the_bundled_model_prints_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    from huggingface_hub.utils import are_progress_bars_disabled
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    from pytest_llmbias.scoring.embedding import bundled_model_path
    from pytest_llmbias.scoring.embedding_models import quiet_loading

    before = (are_progress_bars_disabled(), hf_logging.is_progress_bar_enabled())
    with quiet_loading():
        SentenceTransformer(str(bundled_model_path()), local_files_only=True)
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err and "it/s" not in err
    assert (are_progress_bars_disabled(), hf_logging.is_progress_bar_enabled()) == before
    SentenceTransformer(str(bundled_model_path()), local_files_only=True)  # outside it: the library's own bar
    assert "Loading weights" in "".join(capfd.readouterr())
