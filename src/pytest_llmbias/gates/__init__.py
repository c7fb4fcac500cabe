"""The gates: one package per gate marker (see :mod:`pytest_llmbias.engine.protocol`), registered by
its row in :data:`pytest_llmbias.catalog.MARKERS`, and the path of a marker through them.

To add a gate: write ``gates/<name>/gate.py`` with its spec, its :class:`~pytest_llmbias.engine.protocol.Gate`
(as the module's ``GATE``) and its result (its other parts beside them, named by what they are), add
its row to the catalog, a built-in domain if it needs one, and tests. No other module learns its
name. This package is imported only when a collected test carries one of the plugin's markers;
pytest declares the markers from the catalog alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmbias.catalog import MARKERS
from pytest_llmbias.engine.protocol import Gate, GateResult, GateSession
from pytest_llmbias.engine.sequential_gate import SequentialGate

GATES: dict[str, Gate[Any, Any]] = {
    m.name: SequentialGate(importlib.import_module(m.gate).GATE) for m in MARKERS if m.gate is not None
}
"""Marker name -> gate, in the order the markers are documented; each takes its verdict in looks
when its marker or the run asks for several (see :mod:`pytest_llmbias.engine.sequential_gate`)."""


def looking(gate: Any) -> Any:
    """``gate`` taking its verdict in looks when its marker or the run asks for several (see
    :mod:`pytest_llmbias.engine.sequential_gate`); None stays None (a marker that is no gate)."""
    # a gate decided against several releases (engine.anchored) wraps each comparison's looks itself
    wrapped = isinstance(gate, SequentialGate) or getattr(gate, "wraps_looks", False)
    return gate if gate is None or wrapped else SequentialGate(gate)


def evaluate_marker(gate: Any, spec: Any, session: Any) -> Any:
    """``gate``'s verdict on ``spec`` (with its looks, see :func:`looking`); missing or broken
    data give the session's inconclusive result (or the exception) instead of raising."""
    from pytest_llmbias.errors import LLMBiasError

    try:
        return looking(gate).evaluate(spec, session)
    except (LLMBiasError, ValueError) as exc:
        return session.inconclusive(exc, spec.domain)


def gate_figures(entry: Mapping[str, Any]) -> Sequence[Any]:
    """The plots of a report's ``entry``, from its gate's :meth:`~pytest_llmbias.engine.protocol.Gate.figures`
    (none for a gate this version does not know), and a group-sequential gate's looks: the
    ``figures_for`` of :func:`pytest_llmbias.report.html.render`."""
    from pytest_llmbias.report.html import looks_figures

    gate = GATES.get(str(entry.get("gate")))
    return [*(gate.figures(entry) if gate is not None else []), *looks_figures(entry)]


def session_gates(settings: Any, gates: Sequence[tuple[Any, str, Any, Any]]) -> Any:
    """The session's gates, given as (test item, marker, gate, spec): one a test, else a
    :class:`ConfigError` naming the test (a test gives one verdict: a second gate marker would go
    unheard), with their shares of ``suite.alpha`` (a
    :class:`~pytest_llmbias.engine.suite_levels.SuiteShare` keyed (item, marker))."""
    from pytest_llmbias.engine.suite_levels import SuiteShare
    from pytest_llmbias.errors import ConfigError

    seen: dict[Any, str] = {}
    for item, name, _, _ in gates:
        if item in seen:
            raise ConfigError(
                f"{getattr(item, 'nodeid', item)} carries two gate markers ({seen[item]} and {name}): "
                "a test gives one verdict; give each gate a test of its own"
            )
        seen[item] = name
    return SuiteShare(settings.suite.alpha, {(i, n): (g, s) for i, n, g, s in gates}, looks=settings.collection.looks)


def marker_release(name: str, kwargs: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """A marker's ``against=`` (the recorded release it compares with, overriding the run's
    ``--llmbias-against``) and its other keyword arguments. ConfigError for a value that is not a
    release's name or path."""
    rest = dict(kwargs)
    against = rest.pop("against", None)
    if against is not None and (not isinstance(against, str) or not against.strip()):
        from pytest_llmbias.errors import ConfigError

        raise ConfigError(
            f"@pytest.mark.{name}: 'against' must name a recorded release (a name or a folder), got {against!r}"
        )
    return (against.strip() if against else None), rest


def plan_marker(
    gate: Gate[Any, Any] | None, session: GateSession, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Any:
    """Parse one marker into its spec and register the calls it needs with ``session`` (the
    view of it the marker's ``against=`` asks for: see :func:`marker_release`): through ``gate``
    for a gate marker, as a :class:`~pytest_llmbias.planning.request.ResponseRequest` for
    ``bias_responses`` (``gate`` None). ConfigError for a bad argument, roster or domain."""
    if gate is None:
        from pytest_llmbias.planning.request import ResponseRequest

        request = ResponseRequest.parse(tuple(args), kwargs, marker=name)
        session.plan(request)
        return request
    spec = gate.parse(tuple(args), kwargs)
    if session.settings.release.against and not getattr(gate, "compares_releases", False):
        from pytest_llmbias.errors import ConfigError

        supported = ", ".join(n for n, g in GATES.items() if getattr(g, "compares_releases", False))
        raise ConfigError(
            f"@pytest.mark.{name} does not compare the target with a recorded release "
            f"(--llmbias-against; a gate that does sets compares_releases = True); {supported} do: "
            "run this test without it"
        )
    gate.plan(spec, session)
    return spec


def parse_marker(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """The spec of one of the plugin's markers (see :data:`pytest_llmbias.catalog.MARKERS`):
    a :class:`~pytest_llmbias.planning.request.ResponseRequest` for ``bias_responses``, the gate's
    spec for a gate marker; ConfigError naming the accepted arguments."""
    if name in GATES:
        return GATES[name].parse(tuple(args), kwargs)
    from pytest_llmbias.planning.request import ResponseRequest

    return ResponseRequest.parse(tuple(args), kwargs, marker=name)


__all__ = [
    "GATES",
    "Gate",
    "GateResult",
    "GateSession",
    "evaluate_marker",
    "gate_figures",
    "looking",
    "parse_marker",
    "plan_marker",
    "session_gates",
]
