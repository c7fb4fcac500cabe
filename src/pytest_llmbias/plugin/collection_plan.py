"""The plan made at collection: every marker of the plugin parsed on its test, the session's gates
and their suite shares, and the spending checked before any call (``--llmbias-plan``, ``--llmbias-max-cost``).

The plugin imports this module only once a selected test carries one of its markers; the core is
imported here as each step first needs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from pytest_llmbias.plugin.failures import shown  # pytest only

#: the items' stash keys of a marker's spec, of the release its ``against=`` names, and of its gate
StashKeys = tuple["pytest.StashKey[dict]", "pytest.StashKey[dict]", "pytest.StashKey[dict]"]


def _line_writer(reporter: Any) -> Callable[[str], None]:
    """Writes a line to the terminal reporter, on a line of its own."""

    def write(line: str) -> None:
        reporter.ensure_newline()
        reporter.write_line(line)

    return write


def plan_marked(
    plugin: Any,  # the run's plugin object (pytest_llmbias.plugin)
    items: list[pytest.Item],
    marked: list[tuple[pytest.Item, str, pytest.Mark]],
    keys: StashKeys,
) -> None:
    """Plans every call the ``marked`` tests need, with fewer garbage collections meanwhile: each
    marker's spec, ``against=`` release and gate in its item's stash (under ``keys``), the run's suite
    shares in ``plugin.suite``; with ``--llmbias-plan``, every item deselected and ``plugin.plan_only`` set."""
    from pytest_llmbias.planning.garbage import fewer_collections

    with fewer_collections():
        _plan_marked(plugin, items, marked, keys)


def _plan_marked(
    plugin: Any, items: list[pytest.Item], marked: list[tuple[pytest.Item, str, pytest.Mark]], keys: StashKeys
) -> None:
    from pytest_llmbias.engine.anchored import anchored
    from pytest_llmbias.gates import looking, marker_release, plan_marker, session_gates
    from pytest_llmbias.planning.gate_usage import GatePlans
    from pytest_llmbias.spending import check_spending

    spec_key, against_key, gate_key = keys
    core, gates = plugin.session, []
    # which calls each marker planned, for its gate's usage: counted only where it is read (JSON, MLflow)
    wanted = core.settings.report.json is not None or core.settings.mlflow.active
    plans = plugin.plans = GatePlans() if wanted else None
    for item, name, marker in marked:
        with shown("session", where=item.nodeid):
            against, kwargs = marker_release(name, marker.kwargs)
            view = core.against(against)
            # with --llmbias-anchor: decided against the anchor release as well
            gate = anchored(looking(plugin.registry.gate(name)), core, view)
            plan = functools.partial(plan_marker, gate, view, name, marker.args, kwargs)
            spec = plans.record((item.nodeid, name), core, plan) if plans is not None else plan()
        item.stash.setdefault(spec_key, {})[name] = spec
        item.stash.setdefault(against_key, {})[name] = against
        item.stash.setdefault(gate_key, {})[name] = gate
        if gate is not None:
            gates.append((item, name, gate, spec))
    reporter = plugin.config.pluginmanager.getplugin("terminalreporter")
    with shown("session"):
        plugin.suite = suite = session_gates(core.settings, gates)  # one gate a test; --llmbias-suite-alpha
        for item, name in suite.keys():
            item.stash[spec_key][name] = suite.spec((item, name))
        core.share_specs([(spec, suite.spec((item, name))) for item, name, _, spec in gates])
        core.open_team_store()  # an unreachable team store is a usage error, before any test
        core.check_applications()  # and a Python target that names nothing
        plan_only = check_spending(
            core,
            [(i.nodeid, g, suite.spec((i, n))) for i, n, g, _ in gates],
            worker=plugin.is_worker,
            write=_line_writer(reporter) if reporter else None,
        )
    if plan_only:  # no test runs; the session ends as a success (see the plugin's pytest_sessionfinish)
        plugin.config.hook.pytest_deselected(items=list(items))
        items.clear()
        plugin.plan_only = True
        if reporter is not None:
            reporter.write_line("llmbias: plan only (--llmbias-plan): no model was called")
