"""Group-sequential boundaries against published tables of Lan-DeMets spending boundaries and
against simulated Brownian paths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pytest_llmbias import sequential_boundaries
from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats.sequential import crossing_probabilities, spent

#: one-sided alpha 0.025, equally spaced looks: the Lan-DeMets O'Brien-Fleming-type and Pocock-type
#: spending boundaries as tabulated for this design (Jennison & Turnbull 2000, ch. 7; the same
#: figures as R's gsDesign with sfLDOF and sfLDPocock)
PUBLISHED = {
    ("obrien-fleming", 2): (2.963, 1.969),
    ("obrien-fleming", 3): (3.710, 2.511, 1.993),
    ("obrien-fleming", 4): (4.333, 2.963, 2.359, 2.014),
    ("obrien-fleming", 5): (4.877, 3.357, 2.680, 2.290, 2.031),
    ("pocock", 2): (2.157, 2.201),
    ("pocock", 3): (2.279, 2.295, 2.296),
    ("pocock", 5): (2.438, 2.427, 2.410, 2.397, 2.386),
}


@pytest.mark.parametrize(("spending", "looks"), list(PUBLISHED))
def test_the_boundaries_are_the_published_ones(spending: str, looks: int) -> None:
    bounds = sequential_boundaries(looks, 0.025, spending)
    assert bounds.z == pytest.approx(PUBLISHED[(spending, looks)], abs=0.002)
    assert bounds.spent[-1] == 0.025
    assert bounds.nominal == pytest.approx(tuple(stats.norm.sf(z) for z in bounds.z))


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
@pytest.mark.parametrize("alpha", [0.05, 0.025, 0.01])
def test_one_look_is_the_fixed_test_and_every_design_spends_alpha_exactly(spending: str, alpha: float) -> None:
    assert sequential_boundaries(1, alpha, spending).z == pytest.approx((stats.norm.ppf(1 - alpha),))
    for looks in (2, 3, 4, 6):
        bounds = sequential_boundaries(looks, alpha, spending)
        up, _ = crossing_probabilities(bounds)
        increments = np.diff((0.0, *bounds.spent))
        assert up == pytest.approx(tuple(increments), abs=2e-5)
        assert sum(up) == pytest.approx(alpha, abs=5e-5)


def test_the_spending_functions() -> None:
    assert spent("obrien-fleming", 0.025, 1.0) == pytest.approx(0.025)
    assert spent("pocock", 0.025, 1.0) == pytest.approx(0.025)
    assert spent("obrien-fleming", 0.025, 0.5) == pytest.approx(
        2 - 2 * stats.norm.cdf(stats.norm.ppf(0.9875) / math.sqrt(0.5))
    )
    assert spent("pocock", 0.05, 0.25) == pytest.approx(0.05 * math.log(1 + (math.e - 1) * 0.25))
    assert spent("pocock", 0.05, 0.0) == 0.0


def _paths(rng: np.random.Generator, runs: int, looks: int, theta: float) -> np.ndarray:
    """Z_1..Z_K of ``runs`` Brownian paths with drift θ, at equally spaced looks."""
    t = np.arange(1, looks + 1) / looks
    s = np.cumsum(rng.normal(theta / looks, math.sqrt(1 / looks), size=(runs, looks)), axis=1)
    return s / np.sqrt(t)


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_simulated_paths_cross_as_the_boundaries_say(spending: str) -> None:
    rng = np.random.default_rng(7)
    runs = 200_000
    bounds = sequential_boundaries(4, 0.05, spending, beta=0.1, drift=2.926)
    for theta in (0.0, 2.926):
        z = _paths(rng, runs, 4, theta)
        up_model, down_model = crossing_probabilities(bounds, theta)
        alive = np.ones(runs, dtype=bool)
        for k in range(4):
            up = alive & (z[:, k] >= bounds.z[k])
            down = alive & ~up & (z[:, k] <= bounds.futility[k]) if k < 3 else np.zeros(runs, dtype=bool)
            for observed, model in ((up.mean(), up_model[k]), (down.mean(), down_model[k])):
                assert abs(observed - model) < 4 * math.sqrt(max(model, 1e-4) * (1 - model) / runs) + 1e-4, (theta, k)
            alive &= ~up & ~down
    # non-binding: the efficacy bounds are those of the design without futility bounds
    assert bounds.z == sequential_boundaries(4, 0.05, spending).z
    assert bounds.futility[-1] == bounds.z[-1] and all(a <= b for a, b in zip(bounds.futility, bounds.z, strict=True))


def test_unequal_information_and_bad_arguments() -> None:
    bounds = sequential_boundaries(2, 0.025, "obrien-fleming", information=(0.3, 1.0))
    assert bounds.z[0] == pytest.approx(stats.norm.isf(spent("obrien-fleming", 0.025, 0.3)))
    for args, kwargs, message in [
        ((0,), {}, "looks must be a whole number"),
        ((2, 0.7), {}, "alpha must lie in"),
        ((2, 0.05, "haybittle"), {}, "spending must be one of obrien-fleming, pocock"),
        ((2,), {"information": (0.5, 0.9)}, "information must increase to 1"),
        ((2,), {"beta": 0.1}, "futility bounds need beta"),
    ]:
        with pytest.raises(StatisticsError, match=message):
            sequential_boundaries(*args, **kwargs)


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_a_sequential_paired_no_worse_test_keeps_its_error_and_stops_early(spending: str) -> None:
    """The paired no-worse test of the gates (the one-sample t test of d − δ), looked at after
    each of 4 batches of 15 questions at the nominal levels: a target exactly at the margin passes
    at most alpha of the time (the error the fixed test has), and one like its baselines mostly
    passes before the last look."""
    rng = np.random.default_rng(11)
    bounds = sequential_boundaries(4, 0.05, spending)
    runs, batch, delta = 4000, 15, 0.5

    def p_values(mean: float) -> tuple[np.ndarray, np.ndarray]:
        """Per run and look, the p-values of the t tests of H0 μ ≥ δ (pass) and H0 μ ≤ δ (fail)."""
        d = rng.normal(mean, 1.0, (runs, 4 * batch)) - delta
        n = np.arange(1, 5) * batch
        means = np.stack([d[:, :m].mean(axis=1) for m in n], axis=1)
        sds = np.stack([d[:, :m].std(axis=1, ddof=1) for m in n], axis=1)
        t = means / (sds / np.sqrt(n))
        return stats.t.cdf(t, n - 1), stats.t.sf(t, n - 1)

    def decisions(mean: float) -> list[tuple[bool, int]]:
        p_pass, p_fail = p_values(mean)
        out = []
        for i in range(runs):
            for look in range(1, 5):
                decision = bounds.decide(look, float(p_pass[i, look - 1]), float(p_fail[i, look - 1]))
                if decision != "continue":
                    out.append((decision == "pass", look))
                    break
        return out

    at_margin = decisions(delta)
    false_pass = sum(passed for passed, _ in at_margin) / runs
    assert false_pass < 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
    good = decisions(0.0)
    assert sum(passed for passed, _ in good) / runs > 0.75
    assert sum(look for _, look in good) / runs < 3.3  # of 4: most good targets stop before the end


def test_decide_names_the_look() -> None:
    bounds = sequential_boundaries(3, 0.05, "pocock")
    assert bounds.decide(1, 1e-6) == "pass"
    assert bounds.decide(1, 0.5, 1e-6) == "fail"
    assert bounds.decide(2, 0.5, 0.5) == "continue"
    assert bounds.decide(3, 0.5) == "fail"
    with pytest.raises(StatisticsError, match="look must be 1 to 3"):
        bounds.decide(4, 0.01)
