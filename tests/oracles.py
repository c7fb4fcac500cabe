"""Independent references the statistics are checked against, called as cheaply as they allow."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import numpy as np


def statsmodels_holm(pvalues: Sequence[float], alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """statsmodels' Holm step-down: (reject, adjusted p-values). ``multipletests`` runs a full
    garbage collection at every call, a second or more in a test process that holds torch's and
    transformers' objects; it is skipped here (it changes no result)."""
    from statsmodels.stats.multitest import multipletests

    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0  # type: ignore[assignment]
    try:
        reject, adjusted, _, _ = multipletests(list(pvalues), alpha=alpha, method="holm")
    finally:
        gc.collect = collect
    return reject, adjusted
