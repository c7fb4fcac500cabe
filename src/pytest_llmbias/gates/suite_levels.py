"""One false-alarm rate for the session (``--llmbias-suite-alpha``): the gates whose false-alarm
rate is a level they can be set to (:meth:`~pytest_llmbias.gates.base.SpecGate.at_level`) share
it by Bonferroni, each at alpha / their number, so that a good release fails any of them at most
alpha of the time whatever their dependence. The others keep their own rate, and the reports say
which. Every process of a run plans every gate (pytest-xdist's workers too), so each computes the
same levels.

Holm's step-down (:func:`pytest_llmbias.stats.multiple.holm`) would give the gates with the
smallest p-values more room, but needs every gate's p-value before any verdict is reported; the
verdicts here are reported as the tests run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any



def share_alpha(alpha: float, gates: Sequence[tuple[Any, Any]]) -> list[tuple[Any, float | None]]:
    """For each (gate, spec) in ``gates``, the spec to evaluate and its level: at ``alpha`` / m
    for the m gates that can be set to a level, unchanged (level None) for the others."""
    def settable(gate: Any, spec: Any) -> bool:
        at_level = getattr(gate, "at_level", None)
        return at_level is not None and at_level(spec, alpha) is not None

    flags = [settable(gate, spec) for gate, spec in gates]
    m = sum(flags)
    return [(gate.at_level(spec, alpha / m), alpha / m) if flag else (spec, None)
            for (gate, spec), flag in zip(gates, flags)]
