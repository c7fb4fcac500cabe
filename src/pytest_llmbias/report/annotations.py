"""GitHub Actions workflow commands for a run's gates: one ``::error`` per gate that failed (or could
not be computed) and one ``::warning`` per underpowered pass, each at its test's file and line,
its verdict and figures on one line, so that the pull request shows them beside the code.

Format and escaping as GitHub documents its workflow commands ("Setting an error message"):
``::error file={name},line={line},title={title}::{message}``; in a message ``%``, CR and LF are
escaped as ``%25``, ``%0D``, ``%0A``, and in a property also ``:`` and ``,`` (``%3A``, ``%2C``).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_llmbias.report.tracking.run_log import gate_line, gate_outcome


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(
    entries: Iterable[Mapping[str, Any]], locations: Mapping[str, tuple[str, int]] | None = None
) -> list[str]:
    """The workflow commands of the gate ``entries`` (the JSON document's ``gates``), in test-id
    order; ``locations``: test id -> (file, 1-based line) of the test (without one, the test id's
    file and no line). Gates that passed with the power they were designed for say nothing."""
    locations = locations or {}
    out = []
    for entry in sorted(entries, key=lambda e: str(e.get("test"))):
        outcome = gate_outcome(entry)
        if outcome == "passed":
            continue
        test = str(entry.get("test"))
        path, line = locations.get(test, (test.partition("::")[0], 0))
        level = "warning" if outcome == "underpowered" else "error"
        title = f"llmbias {entry.get('gate')}: {entry.get('verdict')}"
        where = f"file={_property(path)}" + (f",line={line}" if line else "")
        out.append(f"::{level} {where},title={_property(title)}::{_data(f'{test}: {gate_line(entry)}')}")
    return out
