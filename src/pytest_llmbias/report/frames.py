"""Gate results as tables: one row per model and item (question, prompt, group, dimension or
perspective), with the columns a notebook user expects.

A gate result's ``table()`` is the one source of its per-item data: ``to_frame()`` turns it into a
pandas DataFrame, the JSON report stores it (``"table": {"columns", "rows"}``) and the HTML report
draws its plots from that stored copy. pandas is imported here only, when a frame is asked for."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Table:
    """Rows of plain values (str, int, float, bool or None) under named ``columns``."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Table:
        """The table of ``rows`` (mappings), keeping ``columns`` in that order."""
        return cls(tuple(columns), tuple(tuple(_plain(r.get(c)) for c in columns) for r in rows))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Table:
        """The table stored by :meth:`to_dict`; ValueError when a row does not fit the columns."""
        columns = tuple(str(c) for c in data.get("columns", ()))
        rows = tuple(tuple(r) for r in data.get("rows", ()))
        for i, row in enumerate(rows):
            if len(row) != len(columns):
                raise ValueError(f"table row {i} has {len(row)} values for {len(columns)} columns")
        return cls(columns, rows)

    def records(self) -> list[dict[str, Any]]:
        """The rows as dictionaries, column -> value."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def column(self, name: str) -> list[Any]:
        i = self.columns.index(name)
        return [row[i] for row in self.rows]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"columns": [...], "rows": [[...], ...]}`` (NaN and infinities as null)."""
        return {"columns": list(self.columns), "rows": [list(r) for r in self.rows]}

    def to_frame(self) -> Any:
        """A ``pandas.DataFrame`` with these columns, one row per row."""
        return frame(self.records(), list(self.columns))


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    kind = getattr(getattr(value, "dtype", None), "kind", None)  # a numpy scalar
    if kind == "b":
        return bool(value)
    if kind in ("i", "u"):
        return int(value)
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f if math.isfinite(f) else None


def frame(rows: Iterable[Mapping[str, Any]], columns: list[str]) -> Any:
    """A ``pandas.DataFrame`` of ``rows`` with ``columns`` in that order."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas comes with the test extras
        raise ImportError("to_frame() needs pandas: pip install 'pytest-llmbias[frames]'") from None
    return pd.DataFrame(list(rows), columns=columns)
