"""Statistics: pure functions over numbers (numpy/scipy only), each stating its H0 and H1.

:mod:`.selection`: the selection rule, selection rates, group summaries and the impact ratio.
:mod:`.resampling`: the bootstrap interval of the impact ratio and its permutation check.
:mod:`.outliers`: disparity metrics over groups, max Z and Dixon's Q.
:mod:`.power`: power and sample size of the checks that pass when a violation is not shown (the
four-fifths rule backed by a test, the stance agreement check, the absolute index check).
:mod:`.tost`: the paired and Welch TOST for equivalence, its margin and power.

Names are imported from their modules on first use, so importing one module of this package
(``pytest_llmbias.stats.tost``, as the gates do at plugin load) does not import numpy through the
others.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "outliers": ("DisparityResult", "DixonQResult", "disparity_metrics", "dixon_critical", "dixon_q"),
    "resampling": (
        "BootstrapInterval",
        "GroupEffectTest",
        "NullCheck",
        "bootstrap_impact_ratio",
        "group_effect_test",
        "permutation_null",
    ),
    "selection": (
        "GroupSummary",
        "ImpactRatioResult",
        "SelectionRule",
        "impact_ratio",
        "selection_rates",
        "selection_standard",
        "summarize_groups",
    ),
    "power": (
        "agreement_power",
        "answers_for_power",
        "index_power",
        "power_at",
        "prompts_for_index_power",
        "questions_for_agreement_power",
    ),
    "tost": ("TostResult", "margin_from_baselines", "paired_tost", "tost_power", "welch_tost"),
    "tost_stability": ("equivalence_pass_probability",),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
