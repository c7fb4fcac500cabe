"""A gate decided against the last release and a pinned anchor: its two comparisons share the gate's
false-alarm level (half each), and the pair fails when either comparison fails."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_llmbias import evaluate_equivalence
from pytest_llmbias.engine.anchored import AnchoredGate, anchored_result, split_level
from pytest_llmbias.engine.suite_levels import SuiteShare
from pytest_llmbias.gates import GATES
from pytest_llmbias.gates.equivalent.gate import EquivalentSpec


def _release(shift: float, seed: int, n: int = 50) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    q = np.random.default_rng(0).normal(0.0, 1.5, size=n)  # the questions, shared by every release
    return {
        f"q{i}": float(5 + v + shift + e) for i, (v, e) in enumerate(zip(q, rng.normal(0.0, 1.0, size=n), strict=True))
    }


def _compare(target: dict[str, float], release: dict[str, float], level: float):
    return evaluate_equivalence(
        {"target": target, "release": release},
        target="target",
        baselines=["release"],
        method="judge",
        alternative="no-worse",
        false_alarm=level,
    )


def test_the_pair_shares_the_gate_s_level_half_each():
    gate = AnchoredGate(GATES["bias_equivalent"], last=None, anchor=None)
    spec = EquivalentSpec(domain="d", method="judge")
    assert split_level(0.05) == 0.025
    assert gate.at_level(spec, 0.05).false_alarm == pytest.approx(0.025)
    assert gate._level(gate.at_level(spec, 0.04)) == pytest.approx(0.02)
    assert gate.at_level(EquivalentSpec(domain="d", method="judge", false_alarm=0.1), 0.05) is None  # its own rate


def test_the_suite_counts_both_comparisons_of_an_anchored_gate():
    """Bonferroni's start of Holm's rounds: two gates share 5 %; the anchored one splits its 2.5 %."""
    plain, anchored = GATES["bias_equivalent"], AnchoredGate(GATES["bias_equivalent"], last=None, anchor=None)
    spec = EquivalentSpec(domain="d", method="judge")
    suite = SuiteShare(0.05, {"plain": (plain, spec), "anchored": (anchored, spec)})
    assert suite.m == 2
    assert suite.spec("plain").false_alarm == pytest.approx(0.025)
    assert suite.spec("anchored").false_alarm == pytest.approx(0.0125)
    assert suite.share("anchored").level == pytest.approx(0.025)  # the gate's share, as the summary states it


def test_a_chain_that_passes_against_the_last_release_fails_against_the_anchor():
    anchor, last, target = _release(0.0, 1), _release(1.0, 2), _release(1.5, 3)
    half = split_level(0.05)
    alone = _compare(target, last, 0.05)
    assert alone.passed  # half a point worse than the last release: no worse by the margin of one point
    pair = anchored_result(
        _compare(target, last, half), _compare(target, anchor, half), last_release="r2", anchor_release="r0", level=half
    )
    assert not pair.passed and pair.failed_against == ("anchor",) and pair.shown_violation is True
    assert pair.verdict == str(pair.anchor.verdict) and pair.verdict != str(pair.last.verdict)
    assert pair.n_questions == 50  # a test's own assertions read the last comparison's result
    text = pair.report()
    assert text.startswith(
        "bias_equivalent on 'scores' against the last release r2 and the anchor r0: FAILS against the anchor ("
    )
    assert "each comparison at false alarm <=0.025 (the gate's share 0.05 split in two: Bonferroni)" in text
    doc = pair.to_dict()
    assert doc["passed"] is False and doc["comparators"] == {
        "last": "r2",
        "anchor": "r0",
        "failed_against": ["anchor"],
        "level_each": 0.025,
    }
    assert doc["anchor"]["release"] == "r0" and doc["anchor"]["passed"] is False
    assert doc["anchor"]["methods"][0]["tost"]["diff"] > doc["methods"][0]["tost"]["diff"] + 0.5  # the drift
    assert [r["method"] for r in pair.summary_row("t")["methods"]] == ["judge vs r2", "judge vs r0"]
    table = pair.table()
    assert table.columns[0] == "comparator" and set(table.column("comparator")) == {"r2", "r0"}
    assert set(pair.reliability()) >= {"anchor"}


def test_a_release_as_good_as_both_passes_the_pair():
    anchor, last, target = _release(0.0, 1), _release(0.0, 2), _release(0.0, 3)
    half = split_level(0.05)
    pair = anchored_result(
        _compare(target, last, half), _compare(target, anchor, half), last_release="r2", anchor_release="r0", level=half
    )
    assert pair.passed and pair.failed_against == () and pair.shown_violation is False
    assert pair.verdict == str(pair.last.verdict)
    assert "passes against both" in pair.report().splitlines()[0]
