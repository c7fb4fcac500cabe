"""The sampling uncertainty of the impact ratio: a bootstrap interval and a permutation check.

Source: the SAGED bias-benchmarking pipeline (Guan et al., §4.1) gives the minimum impact ratio
as a point estimate read against the four-fifths rule; this module adds what the paper does not:
a seeded, simultaneous stratified-bootstrap interval of it (:func:`bootstrap_impact_ratio`), and
how the rule behaves when the group labels do not matter (:func:`permutation_null`).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats import shelf
from pytest_llmbias.stats._common import Values, check_confidence, jsonable
from pytest_llmbias.stats.selection import DEFAULT_RULE, FOUR_FIFTHS, SelectionRule, _check_rule, _grouped, impact_ratio

__all__ = ["BootstrapInterval", "NullCheck", "bootstrap_impact_ratio", "permutation_null"]


@dataclass(frozen=True)
class BootstrapInterval:
    """Simultaneous bootstrap interval [low, high] of the minimum impact ratio (see
    :func:`bootstrap_impact_ratio`).

    ``resamples`` replicates were drawn with ``seed``; ``undefined`` of them selected no score in
    any group (no ratio exists in them).
    """

    low: float
    high: float
    confidence: float
    resamples: int
    undefined: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "simultaneous",
            "low": jsonable(self.low),
            "high": jsonable(self.high),
            "confidence": jsonable(self.confidence),
            "resamples": self.resamples,
            "undefined": self.undefined,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class NullCheck:
    """How the min impact ratio behaves when the groups do not matter (labels permuted).

    ``p_value``: the share of permutations whose min IR is at most the observed one (the
    permutation test of H0 "the group makes no difference to the values"). ``false_fail_rate``:
    the share of permutations whose min IR is below ``threshold``: how often a model with no
    disparity at all, and these answers, would fail the four-fifths rule on the point estimate.
    """

    observed: float
    threshold: float
    p_value: float
    false_fail_rate: float
    permutations: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {k: jsonable(v) for k, v in self.__dict__.items()}


def _replicate_rates(
    data: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any], draw: Any, replicates: int, rule: SelectionRule
) -> np.ndarray[Any, Any]:
    """Selection rates (replicates × groups) of ``replicates`` rearranged samples: ``draw(m)``
    returns an (m × n) index array into ``data`` whose columns are ordered by group (group sizes
    ``sizes``). The standard is recomputed from each replicate's pooled values."""
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    total = data.size
    chunk = max(1, min(replicates, 4_000_000 // max(total, 1)))
    equal = sizes.size > 0 and bool((sizes == sizes[0]).all())
    out = np.empty((replicates, sizes.size))
    for lo in range(0, replicates, chunk):
        m = min(chunk, replicates - lo)
        sample = data[draw(m)]
        sel = rule.selects(sample, rule.row_standards(sample)[:, None])
        if equal:
            out[lo : lo + m] = sel.reshape(m, sizes.size, -1).sum(axis=2, dtype=np.int64) / sizes
        else:
            out[lo : lo + m] = np.add.reduceat(sel, starts, axis=1, dtype=np.int64) / sizes
    return out


def _sorted_by_group(values: Values, groups: Sequence[str]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    arr, names, codes = _grouped(values, groups)
    order = np.argsort(codes, kind="stable")
    return arr[order], np.bincount(codes, minlength=len(names))


def _check_resampling(resamples: Any, seed: Any) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise StatisticsError(f"resamples must be a positive integer, got {resamples!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise StatisticsError(f"seed must be an integer, got {seed!r}")


#: the results of the last few resamplings by their inputs: a gate decides at several levels (the
#: suite's Holm rounds), and the replicates (and a permutation test) do not depend on the level,
#: only the quantiles read from them do
_KEPT: dict[tuple[Any, ...], Any] = {}
_KEPT_COUNT = 32
_KEPT_LOCK = threading.Lock()


def _kept(key: tuple[Any, ...], compute: Any) -> Any:
    """``compute()``, or what it gave for the same ``key`` among the last :data:`_KEPT_COUNT`
    (an immutable result: a frozen dataclass, or an array set read-only), or on the run's shelf
    (see :mod:`pytest_llmbias.stats.shelf`: a warm run's unchanged inputs are not resampled again).
    A key that holds None (inputs that are no numbers, see :func:`_bytes`) is computed every time:
    its error is raised there."""
    if any(part is None for part in key):
        return compute()
    with _KEPT_LOCK:
        if key in _KEPT:
            return _KEPT[key]
    value = shelf.kept(lambda: _shelf_key(key), compute, _shelve, _unshelve)
    with _KEPT_LOCK:  # a gate resamples its models in threads (see bias_impact_ratio_verdict)
        if len(_KEPT) >= _KEPT_COUNT:
            _KEPT.pop(next(iter(_KEPT)))
        _KEPT[key] = value
    return value


#: the layout of the results kept on a shelf; a change to how a resampling is computed changes it,
#: so that no run reads a result computed otherwise
SHELF_LAYOUT = "resampling-1"


def _shelf_key(key: tuple[Any, ...]) -> str:
    """The shelf's name of ``key``'s result: a digest of every part (bytes as they are, the rest
    as their repr: strings, numbers, a rule's fields, group names), :data:`SHELF_LAYOUT` and
    numpy's version (whose generator draws the replicates)."""
    return shelf.name(f"{SHELF_LAYOUT}/{np.__version__}", *key)


def _shelve(value: Any) -> bytes:
    """``value`` (a float array, or a :class:`NullCheck` or :class:`GroupEffectTest`) as bytes:
    a JSON header (its kind; an array's shape and dtype) on one line, then an array's bytes."""
    if isinstance(value, np.ndarray):
        header = {"array": list(value.shape), "dtype": value.dtype.str}
        return json.dumps(header).encode() + b"\n" + np.ascontiguousarray(value).tobytes()
    return json.dumps({type(value).__name__: dataclasses.asdict(value)}).encode() + b"\n"


def _unshelve(raw: bytes | None) -> Any:
    """What :func:`_shelve` wrote, or None where ``raw`` is none, unreadable or of another shape
    (computed again)."""
    if raw is None:
        return None
    head, _, body = raw.partition(b"\n")
    try:
        header = json.loads(head)
        if "array" in header:
            shape, dtype = tuple(int(n) for n in header["array"]), np.dtype(header["dtype"])
            if dtype != np.float64 or len(body) != int(np.prod(shape)) * dtype.itemsize:
                return None
            array = np.frombuffer(body, dtype=dtype).reshape(shape)
            array.setflags(write=False)
            return array
        (kind, fields), *rest = header.items()
        result = {"NullCheck": NullCheck, "GroupEffectTest": GroupEffectTest}[kind](**fields)
        return None if rest or body else result
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _bytes(values: Values) -> bytes | None:
    """The bytes of ``values`` as floats, a part of a :func:`_kept` key; None when they are none."""
    try:
        return np.asarray(values, dtype=float).tobytes()
    except (TypeError, ValueError):
        return None


def _bootstrap_rates(
    data: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any], rule: SelectionRule, resamples: int, seed: int
) -> np.ndarray[Any, Any]:
    """Each replicate's selection rate per group (replicates x groups), the same for the same input
    and seed (read-only, kept: see :func:`_kept`)."""

    def compute() -> np.ndarray[Any, Any]:
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        col_start = np.repeat(starts, sizes)
        # groups of one size draw from one bound: the same numbers, several times faster
        col_size = int(sizes[0]) if (sizes == sizes[0]).all() else np.repeat(sizes, sizes)
        rng = np.random.default_rng(seed)
        rates = _replicate_rates(
            data, sizes, lambda m: col_start + rng.integers(0, col_size, size=(m, data.size)), resamples, rule
        )
        rates.setflags(write=False)
        return rates

    return _kept(("bootstrap", data.tobytes(), sizes.tobytes(), rule, resamples, seed), compute)


def bootstrap_impact_ratio(
    values: Values,
    groups: Sequence[str],
    rule: SelectionRule = DEFAULT_RULE,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> BootstrapInterval:
    """A simultaneous stratified-bootstrap interval of the minimum impact ratio.

    Each replicate resamples every group's values with replacement (keeping each group's size),
    recomputes the pooled standard of ``rule`` from the resample, then every group's selection
    rate. From the replicates, each group k gets a percentile interval [L_k, U_k] at the
    Bonferroni-adjusted level 1 − (1 − confidence)/K, so that all K intervals hold together with
    probability at least ``confidence``. When they do, the true min impact ratio
    min_k p_k / max_k p_k lies in

        [min_k L_k / max_k U_k,  min_k U_k / max_k L_k]   (clipped to [0, 1]),

    which is the interval returned. Why not the plain percentile interval of the replicates' min
    IR: the minimum of K noisy rates over the maximum is biased low, so that interval sits below
    the truth (for four equal groups of 100 answers, below 0.8 in most runs) and would fail a
    model with no disparity at all. The simultaneous interval is conservative; it ignores the
    standard's own sampling noise beyond what the replicates carry.

    ``undefined`` counts replicates in which no group selected anything. Seeded: the same input
    and seed give the same interval. Raises :class:`StatisticsError` on bad input.
    """
    rule = _check_rule(rule)
    check_confidence(confidence)
    _check_resampling(resamples, seed)
    data, sizes = _sorted_by_group(values, groups)
    k = sizes.size
    rates = _bootstrap_rates(data, sizes, rule, int(resamples), int(seed))
    undefined = int(np.sum(rates.max(axis=1) == 0))
    if undefined == rates.shape[0]:
        raise StatisticsError(
            f"in all {resamples} bootstrap replicates no response of any group was selected "
            f"(standard={rule.standard.value!r}, method={rule.method.value!r}), so the impact ratio is "
            "undefined"
        )
    adjusted = (1.0 - float(confidence)) / k
    lower = np.quantile(rates, adjusted / 2, axis=0)
    upper = np.quantile(rates, 1 - adjusted / 2, axis=0)
    low = lower.min() / upper.max() if upper.max() > 0 else 0.0
    high = upper.min() / lower.max() if lower.max() > 0 else 1.0
    return BootstrapInterval(
        low=float(min(1.0, low)),
        high=float(min(1.0, high)),
        confidence=float(confidence),
        resamples=int(resamples),
        undefined=undefined,
        seed=int(seed),
    )


def permutation_null(
    values: Values,
    groups: Sequence[str],
    rule: SelectionRule = DEFAULT_RULE,
    *,
    threshold: float = FOUR_FIFTHS,
    permutations: int = 2000,
    seed: int = 0,
) -> NullCheck:
    """The min impact ratio under H0 (no disparity), by permuting the group labels.

    H0: every group's values come from the same distribution (exchangeable labels). H1: they do
    not, in a way that lowers the min impact ratio. The standard of ``rule`` is unchanged by a
    permutation; the selection rates are recomputed for each. Permutations in which no group
    selects anything count as a ratio of 0. Seeded. A high ``false_fail_rate`` says the
    point-estimate rule is dominated by sampling noise at these group sizes (the min of K noisy
    rates over their max falls below 0.8 by chance). Raises :class:`StatisticsError` when the
    observed ratio is undefined.
    """
    _check_resampling(permutations, seed)
    key = ("null", _bytes(values), tuple(groups), rule, threshold, permutations, seed)
    return _kept(key, lambda: _permutation_null(values, groups, rule, threshold, int(permutations), int(seed)))


def _permutation_null(
    values: Values, groups: Sequence[str], rule: SelectionRule, threshold: float, permutations: int, seed: int
) -> NullCheck:
    observed = impact_ratio(values, groups, _check_rule(rule)).min_impact_ratio
    data, sizes = _sorted_by_group(values, groups)
    rng = np.random.default_rng(int(seed))
    rates = _replicate_rates(
        data,
        sizes,
        lambda m: rng.permuted(np.broadcast_to(np.arange(data.size), (m, data.size)), axis=1),
        int(permutations),
        rule,
    )
    top = rates.max(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(top > 0, rates.min(axis=1) / np.where(top > 0, top, 1.0), 0.0)
    tol = 1e-12
    return NullCheck(
        observed=float(observed),
        threshold=float(threshold),
        p_value=float(np.mean(ratios <= observed + tol)),
        false_fail_rate=float(np.mean(ratios < threshold - tol)),
        permutations=int(permutations),
        seed=int(seed),
    )


@dataclass(frozen=True)
class GroupEffectTest:
    """A permutation test of H0 "the group makes no difference to the values" (the group labels
    are exchangeable) against H1 "some group's values are shifted".

    ``statistic`` is the largest |z| over the groups, z the difference between a group's mean and
    the mean of all the other values over its standard error (pooled SD): one group shifted up or
    down is what lowers a minimum impact ratio. ``group`` is the group that reaches it.
    ``p_value`` = (1 + #permutations with a statistic at least the observed one) / (1 +
    ``permutations``): a valid p value for any number of permutations. Seeded.
    """

    statistic: float
    group: str | None
    p_value: float
    permutations: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {k: jsonable(v) for k, v in self.__dict__.items()}


def _max_abs_z(data: np.ndarray[Any, Any], labels: np.ndarray[Any, Any], k: int) -> np.ndarray[Any, Any]:
    """Row-wise max |z| of each group's mean against the rest; ``labels`` is (m, n) of group indices."""
    n = data.size
    total = data.sum()
    sd = float(np.std(data, ddof=1)) if n > 1 else 0.0
    rows = labels.shape[0]
    flat = (labels + np.arange(rows)[:, None] * k).ravel()
    sums = np.bincount(flat, weights=np.tile(data, rows), minlength=rows * k).reshape(rows, k)
    counts = np.bincount(labels[0], minlength=k).astype(float)  # permutations keep group sizes
    rest = n - counts
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = sums / counts - (total - sums) / rest
        z = np.abs(diff) / (sd * np.sqrt(1.0 / counts + 1.0 / rest))
    return np.nan_to_num(z, nan=0.0, posinf=0.0).max(axis=1)


def group_effect_test(
    values: Values, groups: Sequence[str], *, permutations: int = 2000, seed: int = 0
) -> GroupEffectTest:
    """The permutation test of :class:`GroupEffectTest` on ``values`` grouped by ``groups``.

    Raises :class:`StatisticsError` for fewer than two groups, mismatched lengths or a bad
    ``permutations``/``seed``. Values that are all equal give statistic 0 and p value 1.
    """
    _check_resampling(permutations, seed)
    key = ("group effect", _bytes(values), tuple(groups), permutations, seed)
    return _kept(key, lambda: _group_effect_test(values, groups, int(permutations), int(seed)))


def _group_effect_test(values: Values, groups: Sequence[str], permutations: int, seed: int) -> GroupEffectTest:
    data = np.asarray(values, dtype=float)
    if data.ndim != 1 or data.size != len(groups):
        raise StatisticsError(f"values and groups differ in length ({data.size} vs {len(groups)})")
    names = sorted(set(groups))
    if len(names) < 2:
        raise StatisticsError(f"a group-effect test needs at least 2 groups, got {len(names)}")
    index = {g: i for i, g in enumerate(names)}
    labels = np.array([index[g] for g in groups])
    k = len(names)
    if not float(np.std(data)) > 0:
        return GroupEffectTest(0.0, None, 1.0, int(permutations), int(seed))
    n = data.size
    sd = float(np.std(data, ddof=1))
    counts = np.bincount(labels, minlength=k).astype(float)
    sums = np.bincount(labels, weights=data, minlength=k)
    z = np.abs(sums / counts - (data.sum() - sums) / (n - counts)) / (sd * np.sqrt(1 / counts + 1 / (n - counts)))
    observed = float(np.nanmax(z))
    group = names[int(np.nanargmax(z))]
    rng = np.random.default_rng(int(seed))
    exceed = 0
    done = 0
    chunk = max(1, min(int(permutations), 2_000_000 // max(1, n)))
    while done < permutations:
        m = min(chunk, int(permutations) - done)
        permuted = rng.permuted(np.broadcast_to(labels, (m, n)), axis=1)
        exceed += int(np.count_nonzero(_max_abs_z(data, permuted, k) >= observed * (1 - 1e-12)))
        done += m
    return GroupEffectTest(observed, group, (1 + exceed) / (1 + int(permutations)), int(permutations), int(seed))
