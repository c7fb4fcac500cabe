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


def test_a_shared_suite_alpha_is_said() -> None:
    from pytest_llmbias.gates import GATES
    from pytest_llmbias.gates.suite_levels import share_alpha

    impact, stance, equivalent = (GATES[n] for n in ("bias_impact_ratio", "bias_stance", "bias_equivalent"))
    specs = [(impact, impact.parse(("lands",), {})), (stance, stance.parse((), {"gate": "agreement"})),
             (equivalent, equivalent.parse(("d",), {})), (impact, impact.parse(("lands",), {"fail_on": "estimate"}))]
    shared = share_alpha(0.05, specs)
    assert [level for _, level in shared] == [0.025, 0.025, None, None]
    assert shared[0][0].alpha == 0.025 and shared[1][0].confidence == 0.975  # the spec set to its share
    assert shared[2][0] is specs[2][1]  # a TOST keeps its own rate
    entries = [{**_entry(f"t{i}", {"designed_false_alarm": 0.025 if level else 0.1}), "suite_alpha": 0.05,
                "suite_level": level} for i, (_, level) in enumerate(shared)]
    suite = suite_figures(entries)
    assert suite["alpha"] == 0.05 and suite["method"] == "bonferroni" and suite["levels"]["t2"] is None
    assert suite["sentence"].endswith("; --llmbias-suite-alpha 0.05 is shared by Bonferroni: 2 gate(s) at 0.025 "
                                      "each, 2 keep their own rate (none they can be set to)")


def test_a_suite_alpha_outside_zero_and_one_is_refused() -> None:
    from pytest_llmbias.errors import ConfigError
    from pytest_llmbias.settings import SuiteSettings

    with pytest.raises(ConfigError, match="suite.alpha must lie strictly between 0 and 1, got 0"):
        SuiteSettings(alpha=0)


def test_one_format_for_rates_and_the_weaker_figure_of_a_composite() -> None:
    from pytest_llmbias.gates.result import fmt_false_alarm

    assert fmt_false_alarm(bound=0.05) == "false alarm <=5%" and fmt_false_alarm(bound=0.025) == "false alarm <=2.5%"
    assert fmt_false_alarm(estimate=0.32) == "false alarm ~32%"
    # a gate of two checks shows the weaker: the estimate when it is above the bound
    assert fmt_false_alarm(bound=0.05, estimate=0.54) == "false alarm ~54%"
    assert fmt_false_alarm(bound=0.05, estimate=1e-10) == "false alarm <=5%"


def test_the_preference_row_shows_its_weaker_check() -> None:
    from pytest_llmbias import evaluate_preference

    def even(offset: int) -> dict:
        # 20 topics x 4 trials; topic t picks "a" in (t + offset) % 4 + ... of its trials: uneven per topic
        return {f"t{t}": [("a" if (k + t + offset) % 4 < (1 + t % 3) else "b", k % 2) for k in range(4)] for t in range(20)}

    result = evaluate_preference({"tgt": even(0), "rel": even(1)}, ["a", "b"], target="tgt", baselines=["rel"],
                                 release=True, tolerance=0.3)
    assert result.relative is not None
    (row,) = result.rows()
    assert row["reliability"].startswith("binomial TOST + paired TOST; false alarm ")
    from pytest_llmbias.gates.result import fmt_rate

    figure = max(0.05, result.relative.false_alarm)
    assert row["reliability"].endswith(("~" if result.relative.false_alarm > 0.05 else "<=") + fmt_rate(figure))
