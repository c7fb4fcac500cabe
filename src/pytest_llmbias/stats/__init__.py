"""Statistics: pure functions over numbers (numpy/scipy only), each stating its H0 and H1."""

from __future__ import annotations

from pytest_llmbias.stats.disparity import (
    SELECTION_METHODS,
    STANDARDS,
    BootstrapInterval,
    DisparityResult,
    DixonQResult,
    GroupSummary,
    ImpactRatioResult,
    NullCheck,
    bootstrap_impact_ratio,
    disparity_metrics,
    dixon_critical,
    dixon_q,
    impact_ratio,
    permutation_null,
    selection_rates,
    selection_standard,
    summarize_groups,
)
from pytest_llmbias.stats.tost import (
    StatisticsError,
    TostResult,
    equivalence_pass_probability,
    margin_from_baselines,
    paired_tost,
    tost_power,
    welch_tost,
)

__all__ = [
    "SELECTION_METHODS",
    "STANDARDS",
    "BootstrapInterval",
    "DisparityResult",
    "DixonQResult",
    "GroupSummary",
    "ImpactRatioResult",
    "NullCheck",
    "StatisticsError",
    "TostResult",
    "bootstrap_impact_ratio",
    "disparity_metrics",
    "dixon_critical",
    "dixon_q",
    "equivalence_pass_probability",
    "impact_ratio",
    "margin_from_baselines",
    "paired_tost",
    "permutation_null",
    "selection_rates",
    "selection_standard",
    "summarize_groups",
    "tost_power",
    "welch_tost",
]
