"""Group summaries, selection rates, the impact ratio and disparity metrics over groups.

Source: the SAGED bias-benchmarking pipeline (seeds/saged.txt §4 and appendix A.4). Scores are
split into groups (one per concept, e.g. "Apple", "Pear"); a summary statistic is taken per group;
a disparity function then compares those statistics across the groups:

* the **selection rate** (SR) of a group is the share of its scores that a selection method picks
  when compared with one standard taken over *all* scores pooled (the mean by default, or the
  median, or a quantile; methods: larger-than (the default), smaller-than, within-range);
* the **minimum impact ratio** (min IR) is min SR / max SR; the four-fifths rule reads bias when
  it is below 0.8;
* the **range**, **standard deviation** and **min/max ratio** of a statistic over the groups show
  how large the worst disparity is; the **max Z-score** and **Dixon's Q** show whether it comes
  from one extreme group (concentrated bias) or is spread over many (dispersed bias).

Nothing here is a hypothesis test with a p-value: the impact ratio is a descriptive ratio read
against a rule of thumb. :func:`bootstrap_impact_ratio` gives its sampling uncertainty.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from pytest_llmbias.errors import StatisticsError

STANDARDS = ("mean", "median", "quantile")
SELECTION_METHODS = ("larger", "smaller", "within-range")

FOUR_FIFTHS = 0.8

# Relative tolerance of the comparison with the standard: see _tolerance().
_REL_TOL = 1e-9

Values = Union[Sequence[float], "np.ndarray[Any, Any]"]


def _jsonable(obj: Any) -> Any:
    """Plain JSON types: floats (nan → None), ints, strings, lists and dicts."""
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return None if math.isnan(f) else f
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return obj


# --------------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSummary:
    """Summary statistics of one group's scores.

    ``sd`` uses ddof=1 (nan for a single value); ``selection_rate`` is the share of the group's
    scores selected against the pooled standard (see :func:`selection_rates`).
    """

    group: str
    n: int
    mean: float
    median: float
    sd: float
    selection_rate: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "n": self.n,
            "mean": _jsonable(self.mean),
            "median": _jsonable(self.median),
            "sd": _jsonable(self.sd),
            "selection_rate": _jsonable(self.selection_rate),
        }


@dataclass(frozen=True)
class DixonQResult:
    """Dixon's Q test (r10) on a set of group statistics.

    ``q`` is the larger end gap divided by the range; ``critical`` its critical value for ``n``
    values at ``confidence`` (see :func:`dixon_critical`); ``suspect`` is the group at the end with
    the larger gap (None when every value is equal). ``margin`` = q − critical: positive reads as
    concentrated bias (one group stands apart), negative as dispersed bias (seeds/saged.txt §4.2).
    """

    n: int
    q: float
    critical: float
    confidence: float
    suspect: str | None
    suspect_value: float

    @property
    def outlier(self) -> bool:
        return self.q > self.critical

    @property
    def margin(self) -> float:
        return self.q - self.critical

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "q": _jsonable(self.q),
            "critical": _jsonable(self.critical),
            "confidence": _jsonable(self.confidence),
            "suspect": self.suspect,
            "suspect_value": _jsonable(self.suspect_value),
            "outlier": self.outlier,
            "margin": _jsonable(self.margin),
        }


@dataclass(frozen=True)
class DisparityResult:
    """Disparity metrics over one statistic of the groups (e.g. the group means).

    ``range`` = max − min; ``sd`` with ddof=1 (0 when every value is equal); ``min_max_ratio`` =
    min / max, None when the values can be negative or the max is not positive (a ratio of signed
    values has no meaning); ``max_z`` = the largest |x − mean| / sd, with the group it belongs to
    (0.0 and None when sd is 0); ``dixon`` is Dixon's Q test, None for fewer than 3 groups.
    """

    statistic: str
    values: Mapping[str, float]
    range: float
    sd: float
    min_max_ratio: float | None
    max_z: float
    max_z_group: str | None
    dixon: DixonQResult | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "statistic": self.statistic,
            "values": _jsonable(self.values),
            "range": _jsonable(self.range),
            "sd": _jsonable(self.sd),
            "min_max_ratio": _jsonable(self.min_max_ratio),
            "max_z": _jsonable(self.max_z),
            "max_z_group": self.max_z_group,
            "dixon": None if self.dixon is None else self.dixon.to_dict(),
        }


@dataclass(frozen=True)
class ImpactRatioResult:
    """The impact ratio of a set of grouped scores, with the figures behind it.

    ``groups`` is sorted by group name. ``impact_ratios[g]`` = SR_g / max SR;
    ``min_impact_ratio`` = min SR / max SR; ``worst_pair`` = (the group with the lowest SR, the
    group with the highest SR). ``means`` holds the disparity metrics over the group means,
    ``rates`` those over the selection rates.
    """

    standard: str
    method: str
    standard_value: float
    groups: tuple[GroupSummary, ...]
    selection_rates: Mapping[str, float]
    impact_ratios: Mapping[str, float]
    min_impact_ratio: float
    worst_pair: tuple[str, str]
    means: DisparityResult
    rates: DisparityResult

    @property
    def n(self) -> int:
        """Number of scores over all groups."""
        return sum(g.n for g in self.groups)

    @property
    def four_fifths_bias(self) -> bool:
        """True when the four-fifths rule reads bias: min IR < 0.8."""
        return self.min_impact_ratio < FOUR_FIFTHS

    def group(self, name: str) -> GroupSummary:
        """The summary of group ``name``; KeyError naming the known groups otherwise."""
        for g in self.groups:
            if g.group == name:
                return g
        raise KeyError(f"no group {name!r}; groups: {', '.join(g.group for g in self.groups)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "standard": self.standard,
            "method": self.method,
            "standard_value": _jsonable(self.standard_value),
            "n": self.n,
            "groups": [g.to_dict() for g in self.groups],
            "selection_rates": _jsonable(self.selection_rates),
            "impact_ratios": _jsonable(self.impact_ratios),
            "min_impact_ratio": _jsonable(self.min_impact_ratio),
            "worst_pair": list(self.worst_pair),
            "four_fifths_bias": self.four_fifths_bias,
            "means": self.means.to_dict(),
            "rates": self.rates.to_dict(),
        }


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
            "low": _jsonable(self.low),
            "high": _jsonable(self.high),
            "confidence": _jsonable(self.confidence),
            "resamples": self.resamples,
            "undefined": self.undefined,
            "seed": self.seed,
        }


# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------


def _as_values(values: Values) -> np.ndarray[Any, Any]:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise StatisticsError(f"values must be numbers: {exc}") from None
    if arr.ndim != 1:
        raise StatisticsError(f"values: expected a flat sequence of numbers, got shape {arr.shape}")
    if arr.size == 0:
        raise StatisticsError("no values: there is nothing to compute a standard or a selection rate from")
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise StatisticsError(
            f"{bad} of {arr.size} value(s) are NaN or infinite; drop or re-score them before computing "
            "selection rates"
        )
    return arr


def _is_real(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def _check_standard(standard: str, quantile: float) -> None:
    if standard not in STANDARDS:
        raise StatisticsError(f"unknown standard {standard!r}; accepted: {', '.join(STANDARDS)}")
    if not (_is_real(quantile) and 0.0 < float(quantile) < 1.0):
        raise StatisticsError(f"quantile must lie strictly between 0 and 1, got {quantile!r}")


def _check_method(method: str, within: float | None) -> None:
    if method not in SELECTION_METHODS:
        raise StatisticsError(f"unknown selection method {method!r}; accepted: {', '.join(SELECTION_METHODS)}")
    if method == "within-range":
        if within is None:
            raise StatisticsError(
                "the within-range method needs within=r, the largest distance from the standard that "
                "counts as selected (a positive number)"
            )
        if not (_is_real(within) and math.isfinite(float(within)) and float(within) > 0):
            raise StatisticsError(f"within must be a positive finite number, got {within!r}")
    elif within is not None:
        raise StatisticsError(
            f"within={within!r} only applies to method='within-range', not method={method!r}; "
            "drop within= or use method='within-range'"
        )


def _check_confidence(confidence: float) -> None:
    if not (_is_real(confidence) and 0.0 < float(confidence) < 1.0):
        raise StatisticsError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def _grouped(values: Values, groups: Sequence[str]) -> tuple[np.ndarray[Any, Any], list[str], np.ndarray[Any, Any]]:
    """Validated values, the sorted group names and each value's index into those names."""
    if isinstance(groups, str):
        raise StatisticsError("groups must be a sequence of group labels (one per value), not a single string")
    arr = _as_values(values)
    labels = list(groups)
    if len(labels) != arr.size:
        raise StatisticsError(
            f"values and groups differ in length: {arr.size} values but {len(labels)} group labels; "
            "give exactly one group label per value"
        )
    for label in labels:
        if not isinstance(label, str):
            raise StatisticsError(f"group labels must be strings, got {label!r} ({type(label).__name__})")
    names, codes = np.unique(np.asarray([str(label) for label in labels], dtype=object), return_inverse=True)
    names_list = [str(n) for n in names]
    if len(names_list) < 2:
        raise StatisticsError(
            f"only one group ({names_list[0]!r}): disparity compares groups, so at least 2 are needed; "
            "check the grouping column (concept) of the data"
        )
    return arr, names_list, np.asarray(codes, dtype=np.intp).reshape(-1)


def _standard_of(arr: np.ndarray[Any, Any], standard: str, quantile: float) -> float:
    if standard == "mean":
        return float(np.mean(arr))
    if standard == "median":
        return float(np.median(arr))
    return float(np.quantile(arr, quantile))


def _tolerance(standard_value: Any) -> Any:
    """Slack of the comparison with the standard: 1e-9 · max(1, |S|).

    The standard is computed in floating point: the mean of identical values can come out a hair
    above them (e.g. the mean of three 0.1s is 0.10000000000000002), and a linearly interpolated
    quantile can land a hair off a data value. Without slack such a group would select nothing
    ("larger": 0.1 ≥ 0.10000000000000002 is false) and show a spurious disparity. Scores closer to
    the standard than this slack count as on it; for scores of order 1 it is far below any
    meaningful difference.
    """
    return _REL_TOL * np.maximum(1.0, np.abs(standard_value))


def _selected(x: Any, s: Any, method: str, within: float | None) -> Any:
    """Boolean mask of the scores ``x`` selected against the standard ``s`` (broadcasts)."""
    tol = _tolerance(s)
    if method == "larger":
        return x >= s - tol
    if method == "smaller":
        return x <= s + tol
    assert within is not None
    return np.abs(x - s) <= within + tol


# --------------------------------------------------------------------------------------------
# Selection rates and group summaries
# --------------------------------------------------------------------------------------------


def selection_standard(values: Values, standard: str = "mean", *, quantile: float = 0.5) -> float:
    """The standard S_D[V] that selection compares each score with, over ALL scores pooled.

    ``standard`` is ``"mean"``, ``"median"`` or ``"quantile"`` (the ``quantile`` quantile, numpy's
    default linear interpolation between the two nearest order statistics; ``quantile`` is ignored
    for the other standards). Source: seeds/saged.txt §4.1 and appendix A.4 (mode-with-binning and
    within-percentage are not offered).
    """
    _check_standard(standard, quantile)
    return _standard_of(_as_values(values), standard, float(quantile))


def _rates(
    arr: np.ndarray[Any, Any], codes: np.ndarray[Any, Any], k: int, s: float, method: str, within: float | None
) -> np.ndarray[Any, Any]:
    sel = _selected(arr, s, method, within)
    counts = np.bincount(codes, minlength=k)
    hits = np.bincount(codes, weights=sel.astype(float), minlength=k)
    return np.asarray(hits / counts, dtype=float)


def selection_rates(
    values: Values,
    groups: Sequence[str],
    standard: str = "mean",
    method: str = "larger",
    *,
    quantile: float = 0.5,
    within: float | None = None,
) -> dict[str, float]:
    """Per group (sorted by name), the share of its scores selected against the pooled standard.

    With S = :func:`selection_standard` of all values: ``"larger"`` selects a score g when g ≥ S,
    ``"smaller"`` when g ≤ S, ``"within-range"`` when |g − S| ≤ ``within`` (required, > 0, for that
    method and an error for the others). Each comparison allows a slack of 1e-9 · max(1, |S|) so
    that floating-point rounding of S does not unselect scores that equal it. Source:
    seeds/saged.txt §4.1 (eq. 1) and appendix A.4.
    """
    _check_standard(standard, quantile)
    _check_method(method, within)
    arr, names, codes = _grouped(values, groups)
    s = _standard_of(arr, standard, float(quantile))
    rates = _rates(arr, codes, len(names), s, method, within)
    return {name: float(r) for name, r in zip(names, rates)}


def _summaries(
    arr: np.ndarray[Any, Any], names: list[str], codes: np.ndarray[Any, Any], rates: np.ndarray[Any, Any]
) -> tuple[GroupSummary, ...]:
    order = np.argsort(codes, kind="stable")
    parts = np.split(arr[order], np.cumsum(np.bincount(codes, minlength=len(names)))[:-1])
    out = []
    for i, (name, g) in enumerate(zip(names, parts)):
        sd = float(np.std(g, ddof=1)) if g.size > 1 else math.nan
        out.append(
            GroupSummary(
                group=name,
                n=int(g.size),
                mean=float(np.mean(g)),
                median=float(np.median(g)),
                sd=sd,
                selection_rate=float(rates[i]),
            )
        )
    return tuple(out)


def summarize_groups(
    values: Values,
    groups: Sequence[str],
    standard: str = "mean",
    method: str = "larger",
    *,
    quantile: float = 0.5,
    within: float | None = None,
) -> tuple[GroupSummary, ...]:
    """One :class:`GroupSummary` per group, sorted by group name: size, mean, median, SD (ddof=1,
    nan for one value) and the selection rate as :func:`selection_rates` computes it."""
    _check_standard(standard, quantile)
    _check_method(method, within)
    arr, names, codes = _grouped(values, groups)
    s = _standard_of(arr, standard, float(quantile))
    return _summaries(arr, names, codes, _rates(arr, codes, len(names), s, method, within))


# --------------------------------------------------------------------------------------------
# Dixon's Q test
# --------------------------------------------------------------------------------------------


def _dixon_replicates(n: int) -> int:
    return max(20_000, min(400_000, 8_000_000 // n))


@functools.lru_cache(maxsize=16)
def _dixon_null(n: int) -> np.ndarray[Any, Any]:
    """Simulated null distribution of Dixon's r10 statistic for n standard-normal values.

    Only the two smallest and the two largest of the n values enter Q, so each replicate draws
    exactly those four order statistics, through the uniform order-statistic recursion (the
    largest of m uniforms is W^(1/m); the others are uniform below it) and the normal quantile
    function. This has the same distribution as sorting n normal draws, at a cost that does not
    grow with n. Upper order statistics are carried as 1 − U to keep their precision.
    """
    from scipy.special import ndtri

    reps = _dixon_replicates(n)
    rng = np.random.default_rng([0xD1C0, n])
    # log of uniforms on (0, 1), kept below 0 so that no order statistic lands on 0 or 1 exactly
    log_w = np.minimum(np.log1p(-rng.random((4, reps))), -1e-300)
    t_n = -np.expm1(log_w[0] / n)  # 1 − U(n)
    t_n1 = t_n - (1.0 - t_n) * np.expm1(log_w[1] / (n - 1))  # 1 − U(n−1)
    u_n1 = 1.0 - t_n1
    u_1 = -u_n1 * np.expm1(log_w[2] / (n - 2))  # U(1): min of n − 2 uniforms below U(n−1)
    x_n, x_n1, x_1 = -ndtri(t_n), -ndtri(t_n1), ndtri(u_1)
    if n == 3:
        x_2 = x_n1
    else:  # U(2): min of the n − 3 uniforms between U(1) and U(n−1)
        x_2 = ndtri(u_1 - (u_n1 - u_1) * np.expm1(log_w[3] / (n - 3)))
    q = np.maximum(x_2 - x_1, x_n - x_n1) / (x_n - x_1)
    q.sort()
    q.setflags(write=False)
    return q


def dixon_critical(n: int, confidence: float = 0.95) -> float:
    """Critical value of Dixon's Q (r10) test for ``n`` values at ``confidence``.

    The test statistic is Q = (larger of the two end gaps) / range, the suspect being whichever end
    has the larger gap (two-sided). The critical value is the ``confidence`` quantile of Q for n
    independent standard-normal values, estimated by a seeded Monte Carlo simulation (seed derived
    from n, so the value is reproducible): max(20 000, min(400 000, 8 000 000 // n)) replicates,
    accurate to about ±0.005 for n ≤ 30. It reproduces the published table (Rorabacher 1991,
    cited by seeds/saged.txt §4.2) and, unlike a table, exists for any n ≥ 3 and any confidence in
    (0, 1). Results are cached.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise StatisticsError(f"n must be an integer, got {n!r}")
    _check_confidence(confidence)
    return _dixon_critical(int(n), float(confidence))


@functools.lru_cache(maxsize=1024)
def _dixon_critical(n: int, confidence: float) -> float:
    if n < 3:
        raise StatisticsError(f"Dixon's Q test needs at least 3 values, got n={n}")
    return float(np.quantile(_dixon_null(n), confidence))


def _finite_mapping(values: Mapping[str, float], what: str) -> tuple[list[str], np.ndarray[Any, Any]]:
    if not isinstance(values, Mapping):
        raise StatisticsError(f"{what}: expected a mapping of group name to number, got {type(values).__name__}")
    names = sorted(str(k) for k in values)
    if len(names) != len(values):
        raise StatisticsError(f"{what}: group names must be distinct as strings")
    by_name = {str(k): v for k, v in values.items()}
    try:
        arr = np.asarray([by_name[k] for k in names], dtype=float)
    except (TypeError, ValueError) as exc:
        raise StatisticsError(f"{what}: values must be numbers: {exc}") from None
    bad = [k for k, v in zip(names, arr) if not math.isfinite(v)]
    if bad:
        raise StatisticsError(f"{what}: {len(bad)} value(s) are NaN or infinite (groups: {', '.join(bad)})")
    return names, arr


def dixon_q(values: Mapping[str, float], confidence: float = 0.95) -> DixonQResult:
    """Dixon's Q test (r10, two-sided) on one value per group.

    On the sorted values x1 ≤ … ≤ xn, Q = max(x2 − x1, xn − x(n−1)) / (xn − x1); the suspect is the
    group at the end with the larger gap (the upper end on a tie; equal values are ordered by group
    name). The suspect is an outlier when Q exceeds :func:`dixon_critical` (n, confidence). When
    every value is equal (range 0), Q is 0, there is no suspect and no outlier.
    Needs at least 3 values. Source: seeds/saged.txt §4.2 (Rorabacher 1991).
    """
    _check_confidence(confidence)
    names, arr = _finite_mapping(values, "dixon_q")
    n = len(names)
    if n < 3:
        raise StatisticsError(f"Dixon's Q test needs at least 3 groups, got {n}")
    critical = dixon_critical(n, confidence)
    order = sorted(range(n), key=lambda i: (arr[i], names[i]))
    x = arr[order]
    spread = float(x[-1] - x[0])
    if spread == 0.0:
        return DixonQResult(n=n, q=0.0, critical=critical, confidence=float(confidence), suspect=None,
                            suspect_value=math.nan)
    low_gap, high_gap = float(x[1] - x[0]), float(x[-1] - x[-2])
    idx = order[-1] if high_gap >= low_gap else order[0]
    q = max(low_gap, high_gap) / spread
    return DixonQResult(n=n, q=q, critical=critical, confidence=float(confidence), suspect=names[idx],
                        suspect_value=float(arr[idx]))


# --------------------------------------------------------------------------------------------
# Disparity metrics and the impact ratio
# --------------------------------------------------------------------------------------------


def disparity_metrics(stats: Mapping[str, float], *, statistic: str = "mean", confidence: float = 0.95) -> DisparityResult:
    """Disparity metrics over one statistic per group (``statistic`` names it, e.g. the means).

    Range (max − min), SD (ddof=1), min/max ratio (None unless every value is ≥ 0 and the max is
    > 0), max Z-score (largest |x − mean| / SD, and its group; ties go to the first group by name)
    and Dixon's Q test (from 3 groups on). Needs at least 2 groups. Source: seeds/saged.txt §4.2.
    """
    names, arr = _finite_mapping(stats, "disparity")
    if len(names) < 2:
        only = f" ({names[0]!r})" if names else ""
        raise StatisticsError(f"disparity needs at least 2 groups, got {len(names)}{only}")
    _check_confidence(confidence)
    lo, hi = float(arr.min()), float(arr.max())
    spread = hi - lo
    sd = 0.0 if spread == 0.0 else float(np.std(arr, ddof=1))
    ratio = None if lo < 0 or hi <= 0 else lo / hi
    if sd > 0:
        z = np.abs(arr - arr.mean()) / sd
        i = int(np.argmax(z))
        max_z, max_z_group = float(z[i]), names[i]
    else:
        max_z, max_z_group = 0.0, None
    mapping = {k: float(v) for k, v in zip(names, arr)}
    dixon = dixon_q(mapping, confidence) if len(names) >= 3 else None
    return DisparityResult(
        statistic=statistic,
        values=mapping,
        range=spread,
        sd=sd,
        min_max_ratio=ratio,
        max_z=max_z,
        max_z_group=max_z_group,
        dixon=dixon,
    )


def impact_ratio(
    values: Values,
    groups: Sequence[str],
    standard: str = "mean",
    method: str = "larger",
    *,
    quantile: float = 0.5,
    within: float | None = None,
    confidence: float = 0.95,
) -> ImpactRatioResult:
    """The minimum impact ratio: min SR / max SR over the groups' selection rates.

    Selection rates as in :func:`selection_rates` (pooled standard ``standard``, method
    ``method``). Read it with the four-fifths rule (US EEOC 1978): bias is reported when
    min IR < 0.8. One can phrase this as H0 "every group is selected at the same rate" against H1
    "some group is selected at under 4/5 of the rate of the most selected one", but it is a rule of
    thumb on an observed ratio, not a hypothesis test: it has no p-value and no error rate; use
    :func:`bootstrap_impact_ratio` for its sampling uncertainty. ``confidence`` is used by the
    Dixon's Q tests in ``means`` and ``rates``.

    Raises :class:`StatisticsError` for bad input (see :func:`selection_rates`) and when no score
    of any group is selected (max SR = 0: the ratio is undefined). Source: seeds/saged.txt §4.1–4.2
    (min IR) and appendix A.4 (standards and selection methods).
    """
    _check_standard(standard, quantile)
    _check_method(method, within)
    _check_confidence(confidence)
    arr, names, codes = _grouped(values, groups)
    s = _standard_of(arr, standard, float(quantile))
    rates = _rates(arr, codes, len(names), s, method, within)
    top = float(rates.max())
    if top == 0.0:
        extra = f", within={within}" if method == "within-range" else ""
        raise StatisticsError(
            f"no response of any group was selected (standard={standard!r} = {s:.6g}, "
            f"method={method!r}{extra}), so the impact ratio is undefined; choose another standard "
            "or method, or widen the range"
        )
    summaries = _summaries(arr, names, codes, rates)
    sr = {name: float(r) for name, r in zip(names, rates)}
    lowest = min(names, key=lambda k: (sr[k], k))
    highest = min((k for k in names if k != lowest), key=lambda k: (-sr[k], k))
    return ImpactRatioResult(
        standard=standard,
        method=method,
        standard_value=s,
        groups=summaries,
        selection_rates=sr,
        impact_ratios={k: v / top for k, v in sr.items()},
        min_impact_ratio=float(rates.min()) / top,
        worst_pair=(lowest, highest),
        means=disparity_metrics({g.group: g.mean for g in summaries}, statistic="mean", confidence=confidence),
        rates=disparity_metrics(sr, statistic="selection_rate", confidence=confidence),
    )


def _replicate_rates(
    data: np.ndarray[Any, Any],
    sizes: np.ndarray[Any, Any],
    draw: Any,
    replicates: int,
    standard: str,
    method: str,
    quantile: float,
    within: float | None,
) -> np.ndarray[Any, Any]:
    """Selection rates (replicates × groups) of ``replicates`` rearranged samples: ``draw(m)``
    returns an (m × n) index array into ``data`` whose columns are ordered by group (group sizes
    ``sizes``). The standard is recomputed from each replicate's pooled values."""
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    total = data.size
    chunk = max(1, min(replicates, 4_000_000 // max(total, 1)))
    out = np.empty((replicates, sizes.size))
    for lo in range(0, replicates, chunk):
        m = min(chunk, replicates - lo)
        sample = data[draw(m)]
        if standard == "mean":
            sv = sample.mean(axis=1)
        elif standard == "median":
            sv = np.median(sample, axis=1)
        else:
            sv = np.quantile(sample, float(quantile), axis=1)
        sel = _selected(sample, sv[:, None], method, within)
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


def bootstrap_impact_ratio(
    values: Values,
    groups: Sequence[str],
    standard: str = "mean",
    method: str = "larger",
    *,
    quantile: float = 0.5,
    within: float | None = None,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> BootstrapInterval:
    """A simultaneous stratified-bootstrap interval of the minimum impact ratio.

    Each replicate resamples every group's values with replacement (keeping each group's size),
    recomputes the pooled standard from the resample, then every group's selection rate. From the
    replicates, each group k gets a percentile interval [L_k, U_k] at the Bonferroni-adjusted level
    1 − (1 − confidence)/K, so that all K intervals hold together with probability at least
    ``confidence``. When they do, the true min impact ratio min_k p_k / max_k p_k lies in

        [min_k L_k / max_k U_k,  min_k U_k / max_k L_k]   (clipped to [0, 1]),

    which is the interval returned. Why not the plain percentile interval of the replicates' min
    IR: the minimum of K noisy rates over the maximum is biased low, so that interval sits below
    the truth (for four equal groups of 100 answers, below 0.8 in most runs) and would fail a
    model with no disparity at all. The simultaneous interval is conservative; it ignores the
    standard's own sampling noise beyond what the replicates carry.

    ``undefined`` counts replicates in which no group selected anything. Seeded: the same input
    and seed give the same interval. Raises :class:`StatisticsError` on bad input.
    """
    _check_standard(standard, quantile)
    _check_method(method, within)
    _check_confidence(confidence)
    _check_resampling(resamples, seed)
    data, sizes = _sorted_by_group(values, groups)
    k = sizes.size
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    col_size, col_start = np.repeat(sizes, sizes), np.repeat(starts, sizes)
    rng = np.random.default_rng(int(seed))
    rates = _replicate_rates(
        data,
        sizes,
        lambda m: col_start + rng.integers(0, col_size, size=(m, data.size)),
        int(resamples),
        standard,
        method,
        quantile,
        within,
    )
    undefined = int(np.sum(rates.max(axis=1) == 0))
    if undefined == rates.shape[0]:
        raise StatisticsError(
            f"in all {resamples} bootstrap replicates no response of any group was selected "
            f"(standard={standard!r}, method={method!r}), so the impact ratio is undefined"
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
        return {k: _jsonable(v) for k, v in self.__dict__.items()}


def permutation_null(
    values: Values,
    groups: Sequence[str],
    standard: str = "mean",
    method: str = "larger",
    *,
    quantile: float = 0.5,
    within: float | None = None,
    threshold: float = FOUR_FIFTHS,
    permutations: int = 2000,
    seed: int = 0,
) -> NullCheck:
    """The min impact ratio under H0 (no disparity), by permuting the group labels.

    H0: every group's values come from the same distribution (exchangeable labels). H1: they do
    not, in a way that lowers the min impact ratio. The standard is unchanged by a permutation;
    the selection rates are recomputed for each. Permutations in which no group selects anything
    count as a ratio of 0. Seeded. A high ``false_fail_rate`` says the point-estimate rule is
    dominated by sampling noise at these group sizes (the min of K noisy rates over their max falls
    below 0.8 by chance). Raises :class:`StatisticsError` when the observed ratio is undefined.
    """
    _check_resampling(permutations, seed)
    observed = impact_ratio(values, groups, standard, method, quantile=quantile, within=within).min_impact_ratio
    data, sizes = _sorted_by_group(values, groups)
    rng = np.random.default_rng(int(seed))
    rates = _replicate_rates(
        data,
        sizes,
        lambda m: rng.permuted(np.broadcast_to(np.arange(data.size), (m, data.size)), axis=1),
        int(permutations),
        standard,
        method,
        quantile,
        within,
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
