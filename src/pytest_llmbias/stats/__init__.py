"""Statistics: pure functions over numbers (numpy/scipy only), each stating its H0 and H1.

Names are imported from their modules on first use, so importing one module of this package
(``pytest_llmbias.stats.tost``) does not import numpy through the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "disparity": (
        "SELECTION_METHODS",
        "STANDARDS",
        "BootstrapInterval",
        "DisparityResult",
        "DixonQResult",
        "GroupSummary",
        "ImpactRatioResult",
        "NullCheck",
        "bootstrap_impact_ratio",
        "disparity_metrics",
        "dixon_critical",
        "dixon_q",
        "impact_ratio",
        "permutation_null",
        "selection_rates",
        "selection_standard",
        "summarize_groups",
    ),
    "tost": (
        "StatisticsError",
        "TostResult",
        "equivalence_pass_probability",
        "margin_from_baselines",
        "tost_power",
        "welch_tost",
    ),
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
