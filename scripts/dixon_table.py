"""Write ``src/pytest_llmbias/stats/dixon_table.py``: Dixon's Q critical values that
:func:`pytest_llmbias.stats.outliers.dixon_critical` would simulate, for the common group counts
and confidences, so that a run reads them instead of simulating them (about 0.1 s each).

    python scripts/dixon_table.py           # rewrite the table
    python scripts/dixon_table.py --check   # exit 1 when the table differs from the simulation

The values are the simulation's own (the same seeded draws), so the table changes no verdict;
``tests/unit/test_disparity.py`` checks a few of them against the simulation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pytest_llmbias.stats.outliers import _dixon_null

TABLE = Path(__file__).resolve().parent.parent / "src" / "pytest_llmbias" / "stats" / "dixon_table.py"
SIZES = range(3, 101)
CONFIDENCES = (0.9, 0.95, 0.99)


def render() -> str:
    rows = []
    for n in SIZES:
        null = _dixon_null(n)
        rows.append(f"    {n}: ({', '.join(repr(float(np.quantile(null, c))) for c in CONFIDENCES)}),")
    return (
        '"""Dixon\'s Q (r10) critical values by group count, at the confidences of :data:`CONFIDENCES`: the\n'
        "quantiles of :func:`~pytest_llmbias.stats.outliers.dixon_critical`'s seeded simulation, read\n"
        'instead of simulated. Written by ``scripts/dixon_table.py``; do not edit by hand."""\n\n'
        f"CONFIDENCES = {CONFIDENCES!r}\n\n"
        "CRITICAL: dict[int, tuple[float, ...]] = {\n" + "\n".join(rows) + "\n}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if TABLE.read_text(encoding="utf-8") != text:
            print(f"{TABLE} differs from the simulation: run python scripts/dixon_table.py", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
