"""Helpers shared by the statistics modules."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np

from pytest_llmbias.errors import StatisticsError

#: relative tolerance below which a spread or a gap is floating-point rounding (see rounding_tolerance)
_SPREAD_RTOL = 1e-12

Values = Union[Sequence[float], "np.ndarray[Any, Any]"]
"""Scores: a flat sequence of numbers or a 1-d array."""


def jsonable(obj: Any) -> Any:
    """Plain JSON types: floats (nan → None), ints, strings, lists and dicts."""
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return None if math.isnan(f) else f
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return obj


def is_real(x: object) -> bool:
    """True for a real number that is not a bool."""
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def check_confidence(confidence: float) -> None:
    """Nothing for a real number strictly between 0 and 1; :class:`StatisticsError` otherwise."""
    if not (is_real(confidence) and 0.0 < float(confidence) < 1.0):
        raise StatisticsError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def rounding_tolerance(arr: Values) -> float:
    """The largest difference between the values ``arr`` that is taken for floating-point rounding:
    1e-12 · max(1, max |x|).

    Group statistics are computed in floating point: the mean of three 0.1s is 0.10000000000000002
    while that of two is 0.1, so groups whose scores are all equal can differ by a few ulps, and
    Dixon's Q of such values is 1 (a "perfect outlier") and their max Z well defined. A rounding
    error scales with the scores a statistic was computed from, not with the statistic itself (the
    mean of 0.2 and −0.2 may come out as 1e-17), hence the floor of 1: the scores of every built-in
    feature are of order 1. For such scores 1e-12 is thousands of ulps, yet far below any
    meaningful difference.
    """
    return _SPREAD_RTOL * max(1.0, float(np.max(np.abs(np.asarray(arr, dtype=float)))))
