"""How far several judges agree on the same answers: Krippendorff's alpha and the ICC(2,1).

Sources: Krippendorff, *Content Analysis* (2004), §11.3 (alpha for any number of coders, missing
values, the interval metric δ² = (a − b)²); Shrout & Fleiss (1979), ICC(2,1) — McGraw & Wong's
ICC(A,1): a two-way random-effects model, absolute agreement, one rater. Alpha uses every item two
or more judges scored; the ICC needs every judge's score, so it uses the items all of them scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats._common import check_confidence, jsonable

__all__ = ["Agreement", "judge_agreement", "krippendorff_alpha", "icc_2_1"]


@dataclass(frozen=True)
class Agreement:
    """The judges' agreement: Krippendorff's ``alpha`` (interval level) with its bootstrap
    ``interval`` over items at ``confidence``, the ``icc`` (ICC(2,1); None with fewer than two
    items every judge scored), ``n_items`` (items two or more judges scored) and ``n_judges``."""

    alpha: float
    interval: tuple[float, float]
    icc: float | None
    n_items: int
    n_judges: int
    confidence: float
    resamples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": jsonable(self.alpha),
            "interval": [jsonable(x) for x in self.interval],
            "icc": jsonable(self.icc),
            "n_items": self.n_items,
            "n_judges": self.n_judges,
            "confidence": self.confidence,
            "resamples": self.resamples,
            "seed": self.seed,
        }


def _matrix(scores: Mapping[str, Mapping[str, float]]) -> np.ndarray[Any, Any]:
    """judges × items, NaN where a judge gave no score; items in sorted order."""
    if len(scores) < 2:
        raise StatisticsError(f"agreement needs at least two judges, got {len(scores)}")
    items = sorted({i for per in scores.values() for i in per})
    out = np.full((len(scores), len(items)), np.nan)
    index = {item: k for k, item in enumerate(items)}
    for j, per in enumerate(scores.values()):
        for item, value in per.items():
            if value is None:
                continue
            if isinstance(value, bool) or not np.isfinite(float(value)):
                raise StatisticsError(f"a score must be a finite number, got {value!r} for item {item!r}")
            out[j, index[item]] = float(value)
    return out


def krippendorff_alpha(data: np.ndarray[Any, Any]) -> float:
    """Krippendorff's alpha, interval level, of a judges × items matrix (NaN: no score). Items
    with fewer than two scores are not pairable and are left out. α = 1 − D_o / D_e, with D_o the
    mean squared difference within items (each item's pairs weighted 1 / (m_u − 1)) and D_e the
    mean squared difference between all pairable values. Raises :class:`StatisticsError` when no
    item has two scores or every pairable score is the same (α is then undefined)."""
    per_item = _item_sums(np.asarray(data, dtype=float))
    if not per_item.size:
        raise StatisticsError("no item was scored by two judges or more: their agreement cannot be measured")
    alpha = _alpha(*per_item.sum(axis=0))
    if math.isnan(alpha):
        raise StatisticsError("every score is the same: the judges' agreement is undefined (no variation to agree on)")
    return float(alpha)


def _item_sums(arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Per pairable item (scored m ≥ 2 times; the others are left out) of a judges × items matrix
    (NaN: no score): the sum over its ordered pairs of squared differences over m − 1, m, Σv and
    Σv² (items × 4). The sum over ordered pairs of m values is 2m·Σv² − 2(Σv)²."""
    scored = ~np.isnan(arr)
    m = scored.sum(axis=0)
    pairable = m >= 2
    values = np.where(scored, arr, 0.0)[:, pairable]
    m = m[pairable].astype(float)
    s1, s2 = values.sum(axis=0), (values**2).sum(axis=0)
    return np.stack([(2 * m * s2 - 2 * s1**2) / (m - 1), m, s1, s2], axis=1)


def _alpha(within: Any, n: Any, s1: Any, s2: Any) -> Any:
    """Alpha from the totals of :func:`_item_sums` (arrays of them too): 1 − D_o / D_e, with D_o =
    ``within`` / n and D_e the sum over all ordered pairs of the n values over n(n − 1); NaN where
    every value is the same (D_e is 0)."""
    between = 2 * n * s2 - 2 * s1**2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(between > 0, 1.0 - (within / n) / (between / (n * (n - 1))), np.nan)


def icc_2_1(data: np.ndarray[Any, Any]) -> float | None:
    """ICC(2,1) of a judges × items matrix on the items every judge scored (None with fewer than
    two such items): (MSR − MSE) / (MSR + (k − 1)·MSE + k·(MSC − MSE) / n), from the two-way
    ANOVA of n items (rows) × k judges (columns). Raises :class:`StatisticsError` when the scores
    do not vary at all."""
    arr = np.asarray(data, dtype=float)
    complete = arr[:, ~np.isnan(arr).any(axis=0)].T  # items × judges
    n, k = complete.shape
    if n < 2:
        return None
    grand = complete.mean()
    ss_rows = k * float(((complete.mean(axis=1) - grand) ** 2).sum())
    ss_cols = n * float(((complete.mean(axis=0) - grand) ** 2).sum())
    ss_total = float(((complete - grand) ** 2).sum())
    if ss_total <= 0:
        raise StatisticsError("every score is the same: the ICC is undefined (no variation to agree on)")
    ss_error = ss_total - ss_rows - ss_cols
    msr, msc, mse = ss_rows / (n - 1), ss_cols / (k - 1), ss_error / ((n - 1) * (k - 1))
    return float((msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n))


def judge_agreement(
    scores: Mapping[str, Mapping[str, float]], *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> Agreement:
    """How far the judges agree: ``scores`` maps each judge's alias to item id -> score (an item a
    judge did not score is simply absent, or None). Returns Krippendorff's alpha (interval level)
    with a percentile bootstrap interval over items (``resamples`` resamples of the items, seeded),
    and the ICC(2,1) on the items every judge scored. α = 1: perfect agreement; 0: no more than
    chance; below 0: systematic disagreement. Raises :class:`StatisticsError` with fewer than two
    judges, no item two of them scored, or no variation in the scores."""
    check_confidence(confidence)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise StatisticsError(f"resamples must be a positive integer, got {resamples!r}")
    data = _matrix(scores)
    alpha = krippendorff_alpha(data)
    pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    replicates = _bootstrap_alpha(pairable, resamples, np.random.default_rng(seed))
    tail = (1 - confidence) / 2
    low, high = (
        (float(np.quantile(replicates, tail)), float(np.quantile(replicates, 1 - tail)))
        if replicates.size
        else (float("nan"), float("nan"))
    )
    return Agreement(
        alpha=alpha,
        interval=(low, high),
        icc=icc_2_1(data),
        n_items=int(pairable.shape[1]),
        n_judges=len(scores),
        confidence=float(confidence),
        resamples=resamples,
        seed=seed,
    )


def _bootstrap_alpha(pairable: np.ndarray[Any, Any], resamples: int, rng: np.random.Generator) -> np.ndarray[Any, Any]:
    """Alpha of ``resamples`` resamples of the items (columns) of ``pairable`` (every item scored
    twice or more), each drawn as ``rng.integers(0, items, items)``; a resample with no variation
    has no alpha and is left out. Alpha is a function of per-item sums (:func:`_item_sums`), so a
    resample is its items' counts times those sums."""
    per_item = _item_sums(pairable)
    items = pairable.shape[1]
    out = []
    chunk = max(1, 2_000_000 // max(items * items, 1))
    for lo in range(0, resamples, chunk):
        rows = min(chunk, resamples - lo)
        draws = rng.integers(0, items, (rows, items))
        counts = np.bincount((draws + np.arange(rows)[:, None] * items).ravel(), minlength=rows * items)
        alphas = _alpha(*(counts.reshape(rows, items).astype(float) @ per_item).T)
        out.append(alphas[~np.isnan(alphas)])
    return np.concatenate(out) if out else np.empty(0)
