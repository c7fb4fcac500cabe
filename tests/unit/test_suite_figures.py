"""The session as a family of gates: each gate's stated false-alarm rate, and the session's."""

from __future__ import annotations

import pytest

from pytest_llmbias.report.html import render
from pytest_llmbias.report.json_report import document
from pytest_llmbias.report.suite import gate_false_alarm, suite_figures


def _entry(test: str, reliability: dict | None) -> dict:
    return {
        "test": test,
        "gate": "bias_x",
        "domain": "d",
        "passed": True,
        "verdict": "ok",
        "result": {"reliability": reliability} if reliability is not None else {"error": "E: broken"},
    }


def test_a_gate_states_the_sum_of_its_checks_rates() -> None:
    # an estimated rate wins over the designed one; nested checks add up (a gate fails when any does)
    impact = {"designed_false_alarm": 0.025, "false_alarm": 0.02, "release": {"designed_false_alarm": 0.025}}
    assert gate_false_alarm(_entry("t", impact)) == pytest.approx(0.045)
    assert (
        gate_false_alarm(
            _entry("t", {"relative": {"designed_false_alarm": 0.1, "false_alarm": 0.7}, "judge": {"false_alarm": 0.6}})
        )
        == 1.0
    )
    assert gate_false_alarm(_entry("t", {"test": "a rule with no rate", "false_alarm": None})) is None
    assert gate_false_alarm(_entry("t", None)) is None


def test_the_sessions_figures_and_where_they_are_shown() -> None:
    entries = [_entry(f"t{i}", {"designed_false_alarm": 0.05}) for i in range(15)] + [_entry("broken", None)]
    suite = suite_figures(entries)
    assert suite is not None and suite["gates"] == 16 and suite["unstated"] == ["broken"]
    assert suite["independent"] == pytest.approx(1 - 0.95**15) and suite["at_most"] == pytest.approx(0.75)
    assert suite["sentence"] == (
        "15 gates at 5% each: a good release fails some gate with probability up to 54% "
        "(independent gates; at most 75% whatever their dependence); 1 more state none"
    )
    doc = document(settings={}, plan={}, gates=entries, version="0")
    assert doc["suite"] == suite
    assert "15 gates at 5% each: a good release fails some gate" in render(doc, figures_for=None)
    assert suite_figures([]) is None
    assert suite_figures([_entry("broken", None)])["sentence"] == "1 gate(s) ran; none states a false-alarm rate"


def test_a_shared_suite_alpha_is_said() -> None:
    from pytest_llmbias.engine.suite_levels import SuiteShare
    from pytest_llmbias.gates import GATES

    impact, stance, equivalent = (GATES[n] for n in ("bias_impact_ratio", "bias_stance", "bias_equivalent"))
    specs = [
        (impact, impact.parse(("lands",), {})),
        (stance, stance.parse((), {"gate": "agreement"})),
        (equivalent, equivalent.parse(("d",), {})),
        (impact, impact.parse(("lands",), {"fail_on": "estimate"})),
    ]
    share = SuiteShare(0.05, dict(enumerate(specs)))
    shared = [(share.spec(i), share.share(i).level) for i in range(4)]
    third = pytest.approx(0.05 / 3)
    assert [level for _, level in shared] == [third, third, third, None]
    assert shared[0][0].alpha == third and shared[1][0].confidence == pytest.approx(1 - 0.05 / 3)  # set to its share
    assert shared[2][0].false_alarm == third  # a comparison's false-alarm level (stats.design)
    own = equivalent.parse(("d",), {"false_alarm": 0.01})
    assert SuiteShare(0.05, {0: (equivalent, own)}).share(0).level is None  # a marker's own rate is kept
    entries = [
        {**_entry(f"t{i}", {"designed_false_alarm": level or 0.1}), "suite_alpha": 0.05, "suite_level": level}
        for i, (_, level) in enumerate(shared)
    ]
    suite = suite_figures(entries)
    assert suite["alpha"] == 0.05 and suite["method"] == "bonferroni" and suite["levels"]["t3"] is None
    assert suite["sentence"].endswith(
        "; --llmbias-suite-alpha 0.05 is shared by Bonferroni: 3 gate(s) at 0.0167 "
        "each, 1 keep their own rate (none they can be set to)"
    )
    # the one line names the gate outside the share, whose own rate lifts the bound over suite.alpha
    assert "(designed: suite.alpha 5% shared by Bonferroni; 1 keep their own rate: t3)" in suite["summary"]


def test_a_suite_alpha_outside_zero_and_one_is_refused() -> None:
    from pytest_llmbias.config.settings import SuiteSettings
    from pytest_llmbias.errors import ConfigError

    with pytest.raises(ConfigError, match="suite.alpha must lie strictly between 0 and 1, got 0"):
        SuiteSettings(alpha=0)


def test_one_format_for_rates_and_the_weaker_figure_of_a_composite() -> None:
    from pytest_llmbias.engine.result import fmt_false_alarm
    from pytest_llmbias.report.readable import rate
    from pytest_llmbias.stats.multiple import fmt_rate

    # 1/2000, the permutation test's floor at its default resamples, is not 0%
    assert [fmt_rate(x) for x in (0, 0.0005, 0.001, 0.025, 0.05, 0.0999, 0.32, 1)] == [
        "0%",
        "<0.1%",
        "0.1%",
        "2.5%",
        "5%",
        "10%",
        "32%",
        "100%",
    ]
    assert rate(0.05) == "5%" and rate(1.781e-17) == "below 0.01% (practically none)"  # the HTML's, the same
    assert fmt_false_alarm(bound=0.05) == "false alarm <=5%" and fmt_false_alarm(bound=0.025) == "false alarm <=2.5%"
    assert fmt_false_alarm(estimate=0.32) == "false alarm ~32%"
    # a gate of two checks shows the weaker: the estimate when it is above the bound
    assert fmt_false_alarm(bound=0.05, estimate=0.54) == "false alarm ~54%"
    assert fmt_false_alarm(bound=0.05, estimate=1e-10) == "false alarm <=5%"


def test_the_preference_row_shows_its_weaker_check() -> None:
    from pytest_llmbias import evaluate_preference

    def even(offset: int) -> dict:
        # 20 topics x 4 trials; topic t picks "a" in (t + offset) % 4 + ... of its trials: uneven per topic
        return {
            f"t{t}": [("a" if (k + t + offset) % 4 < (1 + t % 3) else "b", k % 2) for k in range(4)] for t in range(20)
        }

    result = evaluate_preference(
        {"tgt": even(0), "rel": even(1)}, ["a", "b"], target="tgt", baselines=["rel"], release=True, tolerance=0.3
    )
    assert result.relative is not None
    (row,) = result.rows()
    assert row["reliability"].startswith("binomial TOST + paired TOST; false alarm ")
    from pytest_llmbias.engine.result import fmt_rate

    bound = result.models["tgt"].check_level  # the split's checks' level: the gate's 5 % over its three checks
    assert bound == pytest.approx(0.05 / 3)
    figure = max(bound, result.relative.false_alarm)
    assert row["reliability"].endswith(("~" if result.relative.false_alarm > bound else "<=") + fmt_rate(figure))


@pytest.mark.parametrize("seed", range(40))
def test_the_rounds_of_bonferroni_reject_what_holm_rejects(seed: int) -> None:
    import numpy as np

    from pytest_llmbias.engine.suite_levels import step_down
    from tests.oracles import statsmodels_holm

    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 12))
    # a mixture of clear effects, borderline ones and nulls, with ties
    p = np.concatenate([rng.uniform(0, 0.02, m // 3), rng.uniform(0, 1, m - m // 3)]).round(3)
    asked = []

    def shows(i: int, level: float) -> bool:
        asked.append((i, level))
        return bool(p[i] <= level)

    out = step_down(0.05, m, list(range(m)), shows)
    reject, _ = statsmodels_holm(p, 0.05)
    assert [out[i][1] for i in range(m)] == list(reject)
    # a gate never shown is compared last with the level the procedure stopped at
    stopped = 0.05 / (m - int(reject.sum())) if not reject.all() else None
    assert all(out[i][0] == pytest.approx(stopped) for i in range(m) if not reject[i])
    assert len(asked) <= m * (m + 1) // 2


def test_gates_outside_the_step_down_count_in_m_and_are_never_rejected_by_it() -> None:
    from pytest_llmbias.engine.suite_levels import step_down

    # 2 of 4 hypotheses here; the 2 others (sequential gates) keep alpha / 4
    out = step_down(0.04, 4, ["a", "b"], lambda k, level: {"a": 0.009, "b": 0.013}[k] <= level)
    assert out == {"a": (0.01, True), "b": (pytest.approx(0.04 / 3), True)}
    with pytest.raises(ValueError, match="1 to m=1 keys"):
        step_down(0.05, 1, ["a", "b"], lambda k, level: True)


def test_one_look_gates_share_by_holm_and_sequential_ones_by_bonferroni() -> None:
    from types import SimpleNamespace

    from pytest_llmbias.engine.suite_levels import HOLM, SuiteShare
    from pytest_llmbias.gates import GATES

    impact, stance, equivalent = (GATES[n] for n in ("bias_impact_ratio", "bias_stance", "bias_equivalent"))
    gates = {
        "shown": (impact, impact.parse(("lands",), {})),
        "borderline": (stance, stance.parse((), {"gate": "agreement"})),
        "looks": (impact, impact.parse(("lands",), {"looks": 2})),
        "tost": (equivalent, equivalent.parse(("d",), {"false_alarm": 0.01})),
    }
    p = {"shown": 0.001, "borderline": 0.03, "looks": 0.2}
    evaluated = []

    def evaluate(key: str, spec) -> SimpleNamespace:
        level = spec.alpha if key != "borderline" else 1 - spec.confidence
        evaluated.append((key, round(level, 6)))
        return SimpleNamespace(shown_violation=p[key] <= level, level=level)

    share = SuiteShare(0.05, gates)
    assert share.m == 3 and share.spec("shown").alpha == pytest.approx(0.05 / 3)  # Bonferroni before the answers
    spec, result = share.verdict("borderline", evaluate)
    # round 1 at 0.05/3 shows `shown`; round 2 at 0.05/2 does not show `borderline` (0.03)
    assert evaluated == [("shown", 0.016667), ("borderline", 0.016667), ("borderline", 0.025)]
    assert spec.confidence == pytest.approx(0.975) and result.level == pytest.approx(0.025)
    assert share.share("shown").to_dict() == {
        "suite_alpha": 0.05,
        "suite_level": pytest.approx(0.05 / 3),
        "suite_method": HOLM,
    }
    assert share.share("looks").method == "bonferroni" and share.spec("looks").alpha == pytest.approx(0.05 / 3)
    assert share.share("tost").level is None and share.spec("tost") is gates["tost"][1]
    # a gate outside the step-down is evaluated when asked, at its own level
    assert share.verdict("looks", evaluate)[1].level == pytest.approx(0.05 / 3) and len(evaluated) == 4
    assert SuiteShare(None, gates).share("shown") is None  # without a suite alpha, every gate keeps its own
    # a spec that sets no looks takes the run's: with --llmbias-looks 2 every gate is sequential
    unset = {"a": (impact, impact.parse(("lands",), {})), "b": (stance, stance.parse((), {"gate": "agreement"}))}
    assert {SuiteShare(0.05, unset, looks=2).share(k).method for k in unset} == {"bonferroni"}
    assert {SuiteShare(0.05, unset).share(k).method for k in unset} == {"bonferroni"}  # holm once settled


def test_a_gate_that_raises_while_settling_raises_at_its_own_verdict_only() -> None:
    from types import SimpleNamespace

    from pytest_llmbias.engine.suite_levels import SuiteShare
    from pytest_llmbias.gates import GATES

    impact = GATES["bias_impact_ratio"]
    gates = {k: (impact, impact.parse(("lands",), {})) for k in ("broken", "fine")}

    def evaluate(key: str, spec) -> SimpleNamespace:
        if key == "broken":
            raise RuntimeError("a bug in one gate")
        return SimpleNamespace(shown_violation=False)

    share = SuiteShare(0.05, gates)
    spec, result = share.verdict("fine", evaluate)  # the first verdict asked settles every gate
    assert result.shown_violation is False and share.share("fine").method == "holm"
    with pytest.raises(RuntimeError, match="a bug in one gate"):
        share.verdict("broken", evaluate)


def test_the_sentence_names_each_method_and_level() -> None:
    entries = [
        {
            **_entry(t, {"designed_false_alarm": level or 0.1}),
            "suite_alpha": 0.05,
            "suite_level": level,
            "suite_method": method,
        }
        for t, level, method in (
            ("a", 0.05 / 3, "holm"),
            ("b", 0.025, "holm"),
            ("c", 0.05 / 3, "bonferroni"),
            ("d", None, None),
        )
    ]
    suite = suite_figures(entries)
    assert suite["method"] == "holm+bonferroni" and suite["methods"] == {
        "a": "holm",
        "b": "holm",
        "c": "bonferroni",
        "d": None,
    }
    assert suite["sentence"].endswith(
        "; --llmbias-suite-alpha 0.05 is shared by Holm's step-down: 2 gate(s) at 0.0167, 0.025; by Bonferroni "
        "(several looks): 1 gate(s) at 0.0167 each, 1 keep their own rate (none they can be set to)"
    )
