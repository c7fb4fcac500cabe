"""``--llmbias-plan`` and ``--llmbias-max-cost``: what the plan needs, before any call."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_llmbias.errors import ConfigError, LLMBiasError

if TYPE_CHECKING:
    from pytest_llmbias.session import BiasSession


def check_spending(
    core: BiasSession, gates: list[tuple[str, Any, Any]], *, worker: bool, write: Callable[[str], None] | None
) -> bool:
    """``--llmbias-plan``: write what the plan needs and each gate's expected power, and return
    True (the run stops there). ``--llmbias-max-cost``: ConfigError before the first call when the
    estimate exceeds the budget. False: go on."""
    import functools

    from pytest_llmbias.report.terminal import budget_error, plan_table, power_table, sizing_table

    c, store = core.settings.collection, core.settings.store
    estimated = functools.cache(core.estimate)  # a pass over every planned call: once at most
    if not c.plan and not store.offline and not worker and write is not None:
        for line in short_of_sizing(core, gates, estimated):
            write(line)
    if not c.plan and (c.max_cost is None or store.offline):
        return False
    if c.plan and worker:
        raise ConfigError("--llmbias-plan runs in one process: drop -n")
    estimate = estimated()
    rounds, by_batch = None, _by_batch(core)
    if c.plan or c.batch:
        from pytest_llmbias.planning.estimate import price_batches

        rounds = price_batches(estimate, by_batch)
    if c.plan:
        if write is not None:
            from pytest_llmbias.engine.expected_power import expected_power
            from pytest_llmbias.engine.sizing import sizing

            one_by_one = {a for a in estimate if not by_batch(a)}
            powers = [(n, e) for n, gate, spec in gates for e in expected_power(gate, spec, core)]
            sizes = []
            for n, gate, spec in gates:
                measured = {e.check or "": e.item_sd for t, e in powers if t == n and e.item_sd is not None}
                designed = {e.check or "": e.units_needed for t, e in powers if t == n and e.units_needed is not None}
                sizes += [(n, z) for z in sizing(gate, spec, core, measured, designed)]
            for line in (
                plan_table(estimate, budget=c.max_cost, rounds=rounds, batch=c.batch, one_by_one=one_by_one)
                + (power_table(powers) if gates else [])
                + sizing_table(sizes)
            ):
                write(line)
        return True
    assert c.max_cost is not None
    error = budget_error(estimate, c.max_cost, batch=c.batch)
    if error is not None:
        raise ConfigError(error)
    return False


def _by_batch(core: BiasSession) -> Callable[[str], bool]:
    """Whether batch mode sends an alias's calls by batch (see
    :func:`~pytest_llmbias.clients.batch_costs.sent_by_batch`)."""
    from pytest_llmbias.clients.batch_costs import sent_by_batch

    def by_batch(alias: str) -> bool:
        try:
            return sent_by_batch(core.model(alias))
        except (LLMBiasError, KeyError):
            return False

    return by_batch


def short_of_sizing(
    core: BiasSession,
    gates: list[tuple[str, Any, Any]],
    estimate: Callable[[], dict[str, dict[str, Any]]] | None = None,
) -> list[str]:
    """Before a run that calls models: a line for each comparison that cannot be sized even at
    the most samples its looks may take (``collection.max_samples``; against a recorded release no
    more than its record holds, as :func:`~pytest_llmbias.engine.extension.looks` says) by the
    stated prior SD (:mod:`pytest_llmbias.engine.sizing`), and only when the run has calls to make
    (a warm run spends nothing to warn about). Its verdict
    will likely be *underpowered*; ``--llmbias-plan`` sizes it on the stored answers instead."""
    from pytest_llmbias.engine.extension import looks
    from pytest_llmbias.engine.sizing import sizing

    short = []
    for nodeid, gate, spec in gates:
        try:
            rows = sizing(gate, spec, core)
            counts = looks(gate, spec, core)  # up to max_samples, or what a recorded release holds
        except (LLMBiasError, ValueError, KeyError):  # the gate's own planning reports a bad spec
            continue
        for z in rows:
            samples = getattr(spec, "samples", None) or core.settings.generation.samples
            most = z.units * counts[-1] // samples if counts is not None else z.units
            if most < z.needed:
                short.append((nodeid, z, most))
    if not short or not any(e["to_fetch"] for e in (estimate or core.estimate)().values()):
        return []
    lines = [
        f"llmbias: {len(short)} comparison(s) cannot be sized within their questions x samples by the stated "
        "prior SD, and will likely be underpowered (--llmbias-plan sizes them on stored answers):"
    ]
    lines += [
        f"  {nodeid}: {z.gate} ({z.check}) needs about {z.needed}, has at most {most}" for nodeid, z, most in short
    ]
    return lines
