"""Gate results as pandas data frames (``result.to_frame()``): one row per model and item
(question, prompt, group, dimension or perspective), with the columns a notebook user expects.
pandas is imported here only, when a frame is asked for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def frame(rows: Iterable[Mapping[str, Any]], columns: list[str]) -> Any:
    """A ``pandas.DataFrame`` of ``rows`` with ``columns`` in that order."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas comes with the test extras
        raise ImportError("to_frame() needs pandas: pip install 'pytest-llmbias[frames]'") from None
    return pd.DataFrame(list(rows), columns=columns)
