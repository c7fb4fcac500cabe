"""Whether a disparity comes from one extreme group: Dixon's Q, max Z and the disparity metrics.

Source: the SAGED bias-benchmarking pipeline (Guan et al., §4.2). A statistic is taken per group
(e.g. each group's mean score); the **range**, **standard deviation** and **min/max ratio** of it
over the groups show how large the worst disparity is; the **max Z-score** and **Dixon's Q** show
whether it comes from one extreme group (concentrated bias) or is spread over many (dispersed bias).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats._common import check_confidence, jsonable, rounding_tolerance

__all__ = ["DisparityResult", "DixonQResult", "disparity_metrics", "dixon_critical", "dixon_q"]


@dataclass(frozen=True)
class DixonQResult:
    """Dixon's Q test (r10) on a set of group statistics.

    ``q`` is the larger end gap divided by the range; ``critical`` its critical value for ``n``
    values at ``confidence`` (see :func:`dixon_critical`); ``suspect`` is the group at the end with
    the larger gap (None when every value is equal). ``margin`` = q − critical: positive reads as
    concentrated bias (one group stands apart), negative as dispersed bias (SAGED, Guan et al., §4.2).
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
            "q": jsonable(self.q),
            "critical": jsonable(self.critical),
            "confidence": jsonable(self.confidence),
            "suspect": self.suspect,
            "suspect_value": jsonable(self.suspect_value),
            "outlier": self.outlier,
            "margin": jsonable(self.margin),
        }


@dataclass(frozen=True)
class DisparityResult:
    """Disparity metrics over one statistic of the groups (e.g. the group means).

    ``range`` = max − min; ``sd`` with ddof=1 (0 when every value is equal, up to floating-point
    rounding: see :func:`disparity_metrics`); ``min_max_ratio`` = min / max, None when the values
    can be negative or the max is not positive (a ratio of signed values has no meaning);
    ``max_z`` = the largest |x − mean| / sd, with the group it belongs to (0.0 and None when sd
    is 0); ``dixon`` is Dixon's Q test, None for fewer than 3 groups.
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
            "values": jsonable(self.values),
            "range": jsonable(self.range),
            "sd": jsonable(self.sd),
            "min_max_ratio": jsonable(self.min_max_ratio),
            "max_z": jsonable(self.max_z),
            "max_z_group": self.max_z_group,
            "dixon": None if self.dixon is None else self.dixon.to_dict(),
        }


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
    cited by SAGED (Guan et al.) §4.2) and, unlike a table, exists for any n ≥ 3 and any confidence in
    (0, 1). Results are cached; those for 3 to 100 values at 0.90, 0.95 and 0.99 are the same
    simulation's, written down (``stats/dixon_table.py``, checked against it by the tests).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise StatisticsError(f"n must be an integer, got {n!r}")
    check_confidence(confidence)
    return _dixon_critical(int(n), float(confidence))


@functools.lru_cache(maxsize=1024)
def _dixon_critical(n: int, confidence: float) -> float:
    if n < 3:
        raise StatisticsError(f"Dixon's Q test needs at least 3 values, got n={n}")
    from pytest_llmbias.stats.dixon_table import CONFIDENCES, CRITICAL

    if n in CRITICAL and confidence in CONFIDENCES:  # the simulation's value, written down
        return CRITICAL[n][CONFIDENCES.index(confidence)]
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
    bad = [k for k, v in zip(names, arr, strict=True) if not math.isfinite(v)]
    if bad:
        raise StatisticsError(f"{what}: {len(bad)} value(s) are NaN or infinite (groups: {', '.join(bad)})")
    return names, arr


def dixon_q(values: Mapping[str, float], confidence: float = 0.95) -> DixonQResult:
    """Dixon's Q test (r10, two-sided) on one value per group.

    On the sorted values x1 ≤ … ≤ xn, Q = max(x2 − x1, xn − x(n−1)) / (xn − x1); the suspect is the
    group at the end with the larger gap (the upper end on a tie; equal values are ordered by group
    name; gaps that differ by rounding only count as a tie). The suspect is an outlier when Q
    exceeds :func:`dixon_critical` (n, confidence). When every value is equal (a range within
    floating-point rounding, 1e-12 · max(1, max |x|), counts as 0), Q is 0, there is no suspect
    and no outlier. Needs at least 3 values. Source: SAGED (Guan et al.) §4.2 (Rorabacher 1991).
    """
    check_confidence(confidence)
    names, arr = _finite_mapping(values, "dixon_q")
    n = len(names)
    if n < 3:
        raise StatisticsError(f"Dixon's Q test needs at least 3 groups, got {n}")
    critical = dixon_critical(n, confidence)
    order = sorted(range(n), key=lambda i: (arr[i], names[i]))
    x = arr[order]
    spread = float(x[-1] - x[0])
    rounding = rounding_tolerance(x)
    if spread <= rounding:
        return DixonQResult(
            n=n, q=0.0, critical=critical, confidence=float(confidence), suspect=None, suspect_value=math.nan
        )
    low_gap, high_gap = float(x[1] - x[0]), float(x[-1] - x[-2])
    idx = order[-1] if high_gap >= low_gap - rounding else order[0]
    q = max(low_gap, high_gap) / spread
    return DixonQResult(
        n=n, q=q, critical=critical, confidence=float(confidence), suspect=names[idx], suspect_value=float(arr[idx])
    )


def disparity_metrics(
    stats: Mapping[str, float], *, statistic: str = "mean", confidence: float = 0.95
) -> DisparityResult:
    """Disparity metrics over one statistic per group (``statistic`` names it, e.g. the means).

    Range (max − min), SD (ddof=1), min/max ratio (None unless every value is ≥ 0 and the max is
    > 0), max Z-score (largest |x − mean| / SD, and its group; ties go to the first group by name)
    and Dixon's Q test (from 3 groups on). Values that differ by floating-point rounding only
    (a range within 1e-12 · max(1, max |x|)) count as equal: range 0, SD 0, min/max ratio 1 (when
    defined), max Z 0 with no group, and no Dixon outlier. Needs at least 2 groups. Source:
    SAGED (Guan et al.) §4.2.
    """
    names, arr = _finite_mapping(stats, "disparity")
    if len(names) < 2:
        only = f" ({names[0]!r})" if names else ""
        raise StatisticsError(f"disparity needs at least 2 groups, got {len(names)}{only}")
    check_confidence(confidence)
    lo, hi = float(arr.min()), float(arr.max())
    spread = hi - lo
    equal = spread <= rounding_tolerance(arr)
    if equal:
        spread = 0.0
    sd = 0.0 if equal else float(np.std(arr, ddof=1))
    ratio = None if lo < 0 or hi <= 0 else (1.0 if equal else lo / hi)
    if sd > 0:
        z = np.abs(arr - arr.mean()) / sd
        i = int(np.argmax(z))
        max_z, max_z_group = float(z[i]), names[i]
    else:
        max_z, max_z_group = 0.0, None
    mapping = {k: float(v) for k, v in zip(names, arr, strict=True)}
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
