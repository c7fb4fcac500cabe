"""The group-sequential design every gate shares (``pytest_llmbias.engine.sequential_design``): the
batches, the looks, and the error they keep, checked by simulation through ``evaluate_equivalence``
(the comparison the ``bias_equivalent`` marker runs)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_llmbias import evaluate_equivalence, run_looks
from pytest_llmbias.engine.sequential_design import batches, decide
from pytest_llmbias.errors import MissingResponsesError, StatisticsError


def test_batches_are_a_seeded_partition_as_equal_as_they_divide() -> None:
    units = [f"u{i}" for i in range(10)]
    parts = batches(units, 4, "lands")
    assert sorted(u for p in parts for u in p) == sorted(units)
    assert [len(p) for p in parts] == [3, 3, 2, 2]
    assert parts == batches(units, 4, "lands")  # the same on every run
    assert parts != batches(units, 4, "other")  # another domain, another order
    assert all(list(p) == [u for u in units if u in p] for p in parts)  # each batch in domain order


def _scores(rng: np.random.Generator, shift: float, n: int = 40) -> dict[str, dict[str, float]]:
    q = rng.normal(0, 1.5, n)
    return {
        a: {f"q{i}": float(5 + q[i] + (shift if a == "t" else 0) + rng.normal(0, 1)) for i in range(n)}
        for a in ("t", "b1", "b2", "b3")
    }


def _looks(scores: dict[str, dict[str, float]], looks: int, spending: str = "obrien-fleming", margin: float = 1.0):
    def evaluate(units: tuple[str, ...], nominal: float, first):
        kept = {a: {u: s[u] for u in units} for a, s in scores.items()}
        return evaluate_equivalence(
            kept, target="t", baselines=("b1", "b2", "b3"), alpha=nominal, margin=margin, alternative="no-worse"
        )

    parts = batches(list(scores["t"]), looks, "seed")
    return run_looks(evaluate, parts, alpha=0.05, spending=spending)


def test_a_clear_target_stops_at_the_first_look_and_says_so() -> None:
    result, look, missing = _looks(_scores(np.random.default_rng(1), 0.0), 4, "pocock")
    assert (look, missing) == (1, None) and result.passed
    q = result.sequential
    assert q["decision"] == "pass" and q["units"] == 10 and q["units_max"] == 40 and q["saved"] == 0.75
    # Pocock type at t = 1/4: alpha ln(1 + (e - 1)/4), the first look's nominal level
    assert q["nominal"][0] == pytest.approx(0.05 * np.log(1 + (np.e - 1) / 4), rel=1e-6)
    assert result.methods[0].tost.alpha == q["nominal"][0]  # the test ran at the look's level
    worse, look, _ = _looks(_scores(np.random.default_rng(2), 4.0), 4, "pocock")
    assert look == 1 and not worse.passed and worse.sequential["decision"] == "fail"


def test_batches_that_do_not_divide_evenly_are_said() -> None:
    from pytest_llmbias.engine.sequential_design import sequential_line

    scores = _scores(np.random.default_rng(1), 0.0, n=42)
    result, _, _ = _looks(scores, 4, "pocock")
    assert result.sequential["batches"] == [11, 11, 10, 10]
    assert sequential_line(result.sequential).endswith("(batches of 11, 11, 10, 10 units: they do not divide evenly)")


def test_a_missing_batch_is_named_and_a_verdict_needs_data() -> None:
    def evaluate(units, nominal, first):
        if len(units) > 5:
            raise MissingResponsesError("batch 2 is not stored")
        raise StatisticsError("zero variance")  # too few items for a verdict: look again

    result, look, missing = run_looks(evaluate, [("a",) * 5, ("b",) * 5], alpha=0.05, spending="pocock")
    assert result is None and look == 2 and "batch 2" in str(missing)
    with pytest.raises(StatisticsError, match="zero variance"):  # at the last look the error is the gate's
        run_looks(
            lambda u, n, f: (_ for _ in ()).throw(StatisticsError("zero variance")),
            [("a",), ("b",)],
            alpha=0.05,
            spending="pocock",
        )


def test_a_gate_that_fails_on_evidence_passes_only_at_the_last_look_unless_shown_fair() -> None:
    class Interval:
        low = 0.5

    class Impact:  # the shape of an impact-ratio result: passes unless a disparity is shown
        passed, fair, threshold, underpowered = True, True, 0.8, False
        target = type("T", (), {"interval": Interval()})()

    shares = [0.5, 1.0]
    assert decide(Impact(), 1, 2, alpha=0.05, spending="pocock", shares=shares) == "continue"
    Interval.low = 0.85
    assert decide(Impact(), 1, 2, alpha=0.05, spending="pocock", shares=shares) == "pass (shown fair)"
    Impact.passed = Impact.fair = False
    assert decide(Impact(), 1, 2, alpha=0.05, spending="pocock", shares=shares) == "fail"


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_looks_keep_the_error_of_passing_a_target_at_its_margin(spending: str) -> None:
    """A target exactly at the no-worse margin, looked at four times, passes no more than alpha of
    the time (plus simulation error), as the fixed design does."""
    rng = np.random.default_rng(7)
    runs = 200
    passed = sum(_looks(_scores(rng, 1.0), 4, spending, margin=1.0)[0].passed for _ in range(runs))
    assert passed / runs <= 0.05 + 2.5 * (0.05 * 0.95 / runs) ** 0.5


def test_looks_save_calls_without_losing_the_good_targets() -> None:
    rng = np.random.default_rng(11)
    results = [_looks(_scores(rng, 0.0), 4, "obrien-fleming", margin=1.0)[0] for _ in range(60)]
    assert sum(r.passed for r in results) >= 54
    assert np.mean([r.sequential["units"] / r.sequential["units_max"] for r in results]) < 0.75


@pytest.mark.parametrize(("k", "n"), [(5, 40), (12, 40), (20, 40), (33, 40), (60, 100), (0, 10), (10, 10)])
def test_a_split_shown_outside_the_tolerance_is_scipys_one_sided_binomial_test(k: int, n: int) -> None:
    from scipy import stats

    from pytest_llmbias.stats.proportions import binomial_tost

    t = binomial_tost(k, n, reference=0.5, tolerance=0.15, alpha=0.05)
    below = stats.binomtest(k, n, 0.35, alternative="less").pvalue < 0.05
    above = stats.binomtest(k, n, 0.65, alternative="greater").pvalue < 0.05
    assert t.outside == (below or above)
