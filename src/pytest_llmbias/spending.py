"""``--llmbias-plan`` and ``--llmbias-max-cost``: what the plan needs, before any call."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_llmbias.errors import ConfigError

if TYPE_CHECKING:
    from pytest_llmbias.session import BiasSession


def check_spending(core: BiasSession, gates: list[tuple[str, Any, Any]], *, worker: bool,
                   write: Callable[[str], None] | None) -> bool:
    """``--llmbias-plan``: write what the plan needs and each gate's expected power, and return
    True (the run stops there). ``--llmbias-max-cost``: ConfigError before the first call when the
    estimate exceeds the budget. False: go on."""
    from pytest_llmbias.report.terminal import budget_error, plan_table, power_table, sizing_table

    c, store = core.settings.collection, core.settings.store
    if not c.plan and (c.max_cost is None or store.offline):
        return False
    if c.plan and worker:
        raise ConfigError("--llmbias-plan runs in one process: drop -n")
    estimate = core.estimate()
    if c.plan:
        if write is not None:
            from pytest_llmbias.gates.expected_power import expected_power

            from pytest_llmbias.gates.sizing import sizing

            powers = [(n, e) for n, gate, spec in gates for e in expected_power(gate, spec, core)]
            sizes = []
            for n, gate, spec in gates:
                measured = {e.check or "": e.item_sd for t, e in powers if t == n and e.item_sd is not None}
                designed = {e.check or "": e.units_needed for t, e in powers if t == n and e.units_needed is not None}
                sizes += [(n, z) for z in sizing(gate, spec, core, measured, designed)]
            for line in (plan_table(estimate, budget=c.max_cost) + (power_table(powers) if gates else [])
                         + sizing_table(sizes)):
                write(line)
        return True
    assert c.max_cost is not None
    error = budget_error(estimate, c.max_cost)
    if error is not None:
        raise ConfigError(error)
    return False
