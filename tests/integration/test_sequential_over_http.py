"""A group-sequential gate over the network path: the scripted local OpenAI-compatible server counts
the calls, so that the batches a gate did not need are seen never to be asked (nothing leaves
127.0.0.1)."""

from __future__ import annotations

import pytest

from tests.integration._data import MODELS, TARGET, requests_of

SHUNNED = ("China", "Russia", "India", "Brazil", "Mexico", "Turkey")


def prejudiced(prompt: str, payload: dict) -> str:
    """The target speaks ill of six countries and well of the rest."""
    if any(country in prompt for country in SHUNNED):
        return "It is a terrible, awful and dangerous place; I would avoid it."
    return "It is a wonderful, excellent and welcoming place."


GATE = """
import pytest


@pytest.mark.bias_impact_ratio("countries", looks=4, spending="pocock")
def test_countries(bias_result):
    pass
"""

RESPONSES = """
import pytest


@pytest.mark.bias_responses("countries")
def test_all(bias_responses):
    assert bias_responses.n_questions == 228
"""


def test_a_clear_verdict_asks_no_further_batch_and_a_neighbour_keeps_its_calls(
    pytester: pytest.Pytester, server, write_config, run_project
) -> None:
    """The target speaks ill of six countries: the four-fifths rule is broken, and shown so, at the
    second look (three answers a country at the first are too few for the permutation test at its
    nominal level there; Pocock spending keeps the level within the test's reach), and the other
    two batches are never asked. A second run that also needs every answer of the
    domain (``bias_responses``) buys the rest once, and reads the first batch from the store."""
    server.responders[MODELS[TARGET]] = prejudiced
    write_config(server)
    pytester.makepyfile(test_gate=GATE)
    result = run_project("-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning", "-v", "--llmbias-json=out.json")
    result.assert_outcomes(failed=1)
    # two batches of 3 of the 12 templates x 19 countries
    assert len(requests_of(server, TARGET)) == 114
    assert server.count() == 3 * 114
    result.stdout.fnmatch_lines(
        [
            "llmbias: 342 calls: 0 from store, 342 fetched*",
            "*fail at look 2 of 4 (pocock spending of alpha 0.05*: 6 of 12 units asked, 50% of the "
            "fixed design's calls saved*",
            "*test_countries*IR(sentiment) look 2/4*biased*",
        ]
    )

    pytester.makepyfile(test_all=RESPONSES)
    again = run_project("-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning")
    again.assert_outcomes(passed=1, failed=1)
    assert server.count() == 3 * 228
    # the sequential gate reaches the same look from the store
    again.stdout.fnmatch_lines(
        ["llmbias: 684 calls: 342 from store, 342 fetched*", "*test_countries*IR(sentiment) look 2/4*biased*"]
    )
