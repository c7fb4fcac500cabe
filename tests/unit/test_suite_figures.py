"""The session as a family of gates: each gate's stated false-alarm rate, and the session's."""

from __future__ import annotations

import pytest

from pytest_llmbias.report.html import render
from pytest_llmbias.report.json_report import document
from pytest_llmbias.report.suite import gate_false_alarm, suite_figures


def _entry(test: str, reliability: dict | None) -> dict:
    return {"test": test, "gate": "bias_x", "domain": "d", "passed": True, "verdict": "ok",
            "result": {"reliability": reliability} if reliability is not None else {"error": "E: broken"}}


def test_a_gate_states_the_sum_of_its_checks_rates() -> None:
    # an estimated rate wins over the designed one; nested checks add up (a gate fails when any does)
    impact = {"designed_false_alarm": 0.025, "false_alarm": 0.02, "release": {"designed_false_alarm": 0.025}}
    assert gate_false_alarm(_entry("t", impact)) == pytest.approx(0.045)
    assert gate_false_alarm(_entry("t", {"relative": {"designed_false_alarm": 0.1, "false_alarm": 0.7},
                                         "judge": {"false_alarm": 0.6}})) == 1.0
    assert gate_false_alarm(_entry("t", {"test": "a rule with no rate", "false_alarm": None})) is None
    assert gate_false_alarm(_entry("t", None)) is None


def test_the_sessions_figures_and_where_they_are_shown() -> None:
    entries = [_entry(f"t{i}", {"designed_false_alarm": 0.05}) for i in range(15)] + [_entry("broken", None)]
    suite = suite_figures(entries)
    assert suite is not None and suite["gates"] == 16 and suite["unstated"] == ["broken"]
    assert suite["independent"] == pytest.approx(1 - 0.95**15) and suite["at_most"] == pytest.approx(0.75)
    assert suite["sentence"] == ("15 gates at 5% each: a good release fails some gate with probability up to 54% "
                                 "(independent gates; at most 75% whatever their dependence); 1 more state none")
    doc = document(settings={}, plan={}, gates=entries, version="0")
    assert doc["suite"] == suite
    assert "15 gates at 5% each: a good release fails some gate" in render(doc, figures_for=None)
    assert suite_figures([]) is None
    assert suite_figures([_entry("broken", None)])["sentence"] == "1 gate(s) ran; none states a false-alarm rate"
