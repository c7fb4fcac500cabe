"""Helpers shared by the disparity modules (:mod:`.selection`, :mod:`.resampling`, :mod:`.outliers`)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np

from pytest_llmbias.errors import StatisticsError

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
