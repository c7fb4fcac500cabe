"""Statistics: pure functions over numbers (numpy/scipy only), each stating its H0 and H1."""

from __future__ import annotations

from pytest_llmbias.stats.tost import (
    StatisticsError,
    TostResult,
    equivalence_pass_probability,
    margin_from_baselines,
    tost_power,
    welch_tost,
)

__all__ = [
    "StatisticsError",
    "TostResult",
    "equivalence_pass_probability",
    "margin_from_baselines",
    "tost_power",
    "welch_tost",
]
