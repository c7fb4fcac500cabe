"""The end-of-run table: one row per gate and method."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def gate_table(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Lines of a fixed-width table: test, domain, method, target mean, baseline mean, δ, p, verdict.

    Rows come from each gate's ``summary_row`` (or an ``error`` row); they are sorted by test id so
    that the table reads the same with or without pytest-xdist.
    """
    table = [("test", "domain", "method", "target", "baselines", "delta", "p", "verdict")]
    for row in sorted(rows, key=lambda r: r["test"]):
        if "error" in row:
            table.append((row["test"], row["domain"], "-", "-", "-", "-", "-", "error"))
            continue
        for m in row["methods"]:
            table.append(
                (
                    row["test"],
                    row["domain"],
                    m["method"],
                    f"{m['target_mean']:.4g}",
                    f"{m['baseline_mean']:.4g}",
                    f"{m['margin']:.4g}",
                    f"{m['p']:.3g}",
                    m["verdict"],
                )
            )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
