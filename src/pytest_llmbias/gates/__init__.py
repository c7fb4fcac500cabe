"""The gates: one module per gate marker, registered here (see :mod:`pytest_llmbias.gates.protocol`).

To add a gate: write ``gates/<name>.py`` with its spec, its :class:`~pytest_llmbias.gates.protocol.Gate`
and its result, add one line to :data:`GATES`, a built-in domain if it needs one, and tests. No
other module learns its name. Importing a gate module must stay light (numpy, scipy and the
scorers are imported inside the functions that use them): the registry is read when pytest loads
the plugin, to declare the markers.
"""

from __future__ import annotations

from typing import Any

from pytest_llmbias.gates.protocol import Gate, GateResult, GateSession
from pytest_llmbias.gates.equivalent import GATE as _EQUIVALENT
from pytest_llmbias.gates.impact import GATE as _IMPACT_RATIO

GATES: dict[str, Gate[Any, Any]] = {
    _EQUIVALENT.marker: _EQUIVALENT,
    _IMPACT_RATIO.marker: _IMPACT_RATIO,
}
"""Marker name -> gate, in the order the markers are documented."""

__all__ = ["GATES", "Gate", "GateResult", "GateSession"]
