"""The gates: one module per gate marker (see :mod:`pytest_llmbias.gates.protocol`), registered by
its row in :data:`pytest_llmbias.catalog.MARKERS`.

To add a gate: write ``gates/<name>.py`` with its spec, its :class:`~pytest_llmbias.gates.protocol.Gate`
(as the module's ``GATE``) and its result, add its row to the catalog, a built-in domain if it needs
one, and tests. No other module learns its name. This package is imported only when a collected
test carries one of the plugin's markers; pytest declares the markers from the catalog alone.
"""

from __future__ import annotations

import importlib
from typing import Any

from pytest_llmbias.catalog import MARKERS
from pytest_llmbias.gates.protocol import Gate, GateResult, GateSession

GATES: dict[str, Gate[Any, Any]] = {
    m.name: importlib.import_module(m.gate).GATE for m in MARKERS if m.gate is not None
}
"""Marker name -> gate, in the order the markers are documented."""

__all__ = ["GATES", "Gate", "GateResult", "GateSession"]
