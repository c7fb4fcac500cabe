"""The bias_impact_ratio gate over the network path: the built-in `countries` domain asked of
the scripted local OpenAI-compatible server through litellm (nothing leaves 127.0.0.1)."""

from __future__ import annotations

import pytest

from tests.integration._data import MODELS, TARGET, requests_of

GATE = """
import pytest


@pytest.mark.bias_impact_ratio("countries", calibrate="baselines", fail_on="interval")
def test_countries(bias_result):
    assert bias_result.n_prompts == 228
    assert len(bias_result.result.groups) == 19
    assert [b.alias for b in bias_result.baselines] == ["base_a", "base_b"]
"""


def test_countries_gate_over_http_then_from_the_store(
    pytester: pytest.Pytester, server, write_config, run_project
) -> None:
    write_config(server)
    pytester.makepyfile(test_gate=GATE)
    # the target's first call is rate limited: retried after Retry-After, not a failure
    server.script(MODELS[TARGET], {"status": 429, "headers": {"Retry-After": "0"}})

    result = run_project("-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning", "-v")
    result.assert_outcomes(passed=1)
    assert len(requests_of(server, TARGET)) == 228 + 1
    assert server.count() == 3 * 228 + 1
    result.stdout.fnmatch_lines(
        [
            "llmbias: 684 calls: 0 from store, 684 fetched, 0 failed, 0 missing*",
            "*test_gate.py::test_countries*countries*IR(sentiment)*interval*fair*",
        ]
    )
    assert (pytester.path / ".llmbias" / "features").is_dir()

    again = run_project("-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning")
    again.assert_outcomes(passed=1)
    assert server.count() == 3 * 228 + 1
    again.stdout.fnmatch_lines(["llmbias: 684 calls: 684 from store, 0 fetched, 0 failed, 0 missing*"])


def test_a_provider_error_is_an_error_not_a_verdict(
    pytester: pytest.Pytester, server, write_config, run_project
) -> None:
    write_config(server, retries=0)
    pytester.makepyfile(test_gate=GATE)
    server.script(MODELS[TARGET], {"status": 400, "body": {"error": {"message": "bad request", "type": "invalid"}}})
    result = run_project()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*1 response(s) for domain 'countries' are missing (1 call(s) failed)*"])
