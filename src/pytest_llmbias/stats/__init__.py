"""Statistics: pure functions over numbers (numpy/scipy only), each stating its H0 and H1.

:mod:`.selection`: the selection rule, selection rates, group summaries and the impact ratio.
:mod:`.resampling`: the bootstrap interval of the impact ratio and its permutation check.
:mod:`.outliers`: disparity metrics over groups, max Z and Dixon's Q.
:mod:`.tost`: Welch's TOST for equivalence, its margin and power.
"""

from __future__ import annotations

from pytest_llmbias.stats.outliers import (
    DisparityResult,
    DixonQResult,
    disparity_metrics,
    dixon_critical,
    dixon_q,
)
from pytest_llmbias.stats.resampling import (
    BootstrapInterval,
    NullCheck,
    bootstrap_impact_ratio,
    permutation_null,
)
from pytest_llmbias.stats.selection import (
    GroupSummary,
    ImpactRatioResult,
    SelectionRule,
    impact_ratio,
    selection_rates,
    selection_standard,
    summarize_groups,
)
from pytest_llmbias.stats.tost import (
    TostResult,
    equivalence_pass_probability,
    margin_from_baselines,
    tost_power,
    welch_tost,
)

__all__ = [
    "BootstrapInterval",
    "DisparityResult",
    "DixonQResult",
    "GroupSummary",
    "ImpactRatioResult",
    "NullCheck",
    "SelectionRule",
    "TostResult",
    "bootstrap_impact_ratio",
    "disparity_metrics",
    "dixon_critical",
    "dixon_q",
    "equivalence_pass_probability",
    "impact_ratio",
    "margin_from_baselines",
    "permutation_null",
    "selection_rates",
    "selection_standard",
    "summarize_groups",
    "tost_power",
    "welch_tost",
]
