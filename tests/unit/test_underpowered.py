"""The power of the checks whose pass only says that a violation was not shown, against an exact
oracle (scipy's binomial) and simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pytest_llmbias.stats.power import (
    INDEX_VIOLATION,
    agreement_power,
    index_power,
    prompts_for_index_power,
    questions_for_agreement_power,
)
from pytest_llmbias.stats.proportions import wilson


@pytest.mark.parametrize(
    ("n", "bound", "confidence"), [(12, 0.8, 0.95), (40, 0.8, 0.95), (33, 0.85, 0.9), (5, 0.6, 0.95)]
)
def test_agreement_power_is_the_binomial_probability_of_a_failing_bound(
    n: int, bound: float, confidence: float
) -> None:
    failing = [k for k in range(n + 1) if wilson(k, n, 2 * confidence - 1)[1] < bound]
    oracle = float(sum(stats.binom.pmf(k, n, bound - 0.2) for k in failing))
    assert agreement_power(n, bound, confidence=confidence) == pytest.approx(oracle, abs=1e-12)


def test_agreement_power_matches_a_simulation_and_the_issue_s_example() -> None:
    rng = np.random.default_rng(7)
    k = rng.binomial(12, 0.6, size=40_000)
    simulated = np.mean([wilson(int(x), 12, 0.9)[1] < 0.8 for x in k])
    assert agreement_power(12, 0.8, confidence=0.95) == pytest.approx(simulated, abs=0.01)
    # 12 questions, as on the real model whose 9 of 12 passed: far from 80 % power
    assert agreement_power(12, 0.8, confidence=0.95) < 0.6
    needed = questions_for_agreement_power(0.8, confidence=0.95)
    assert needed is not None and 12 < needed < 60
    assert all(agreement_power(m, 0.8, confidence=0.95) >= 0.8 for m in range(needed, needed + 40))
    assert agreement_power(0, 0.8, confidence=0.95) == 0.0 and agreement_power(10, 0.1, confidence=0.95) == 0.0


def test_index_power_and_the_prompts_that_reach_80_percent() -> None:
    # the normal approximation: the lower bound at 95 % clears the bound when index > bound + 1.645 se
    assert index_power(INDEX_VIOLATION / (1.6449 + 0.8416), confidence=0.95) == pytest.approx(0.8, abs=1e-3)
    assert index_power(0.0, confidence=0.95) == 1.0 and index_power(1.0, confidence=0.95) < 0.06
    se, prompts = 0.04, 90
    needed = prompts_for_index_power(se, prompts, confidence=0.95)
    assert index_power(se * (prompts / needed) ** 0.5, confidence=0.95) >= 0.8
    assert index_power(se * (prompts / (needed - 1)) ** 0.5, confidence=0.95) < 0.8
