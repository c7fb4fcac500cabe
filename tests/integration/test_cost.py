"""What a run will cost, before and while it spends: ``--llmbias-plan`` calls nothing, and
``--llmbias-max-cost`` stops a run before its first call or once the budget is spent. Against the
local server, with model names litellm's offline price map knows."""

from __future__ import annotations

import json

from tests.integration._data import KEY_ENV, QUIET

PRICED = {"tgt": "gpt-4o-mini", "base_a": "gpt-4o", "base_b": "gpt-4.1-mini"}

MARKED = """
import pytest

@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models="target")
def test_target(bias_responses):
    assert len(bias_responses) == 10
"""


def write_project(pytester, base_url: str, models: dict[str, str] = PRICED, **collection) -> None:
    def model(alias):
        return {"model": f"openai/{models[alias]}", "alias": alias, "api_base": base_url, "api_key_env": KEY_ENV}

    config = {"target": model("tgt"), "baselines": [model("base_a"), model("base_b")],
              "generation": {"max_tokens": 100}}
    if collection:
        config["collection"] = collection
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_target.py").write_text(MARKED, encoding="utf-8")


def run(pytester, *args):
    return pytester.runpytest_subprocess(*QUIET, *args, timeout=120)


def test_the_plan_prices_the_calls_and_makes_none(pytester, server):
    write_project(pytester, server.base_url)
    plan = run(pytester, "--llmbias-plan")
    assert plan.ret == 0
    plan.stdout.fnmatch_lines([
        "llmbias plan (no call made*",
        "*model*calls*stored*to fetch*est. tokens*est. cost*",
        "*tgt (openai/gpt-4o-mini)*10*0*10*$0.00*",
        "*total estimated cost: $0.00*",
    ])
    assert server.count() == 0
    run(pytester).assert_outcomes(passed=1)  # now the ten answers are stored
    again = run(pytester, "--llmbias-plan")
    again.stdout.fnmatch_lines(["*tgt (openai/gpt-4o-mini)*10*10*0*0*$0.0000*"])
    assert server.count() == 10


def test_an_estimate_over_budget_stops_before_the_first_call(pytester, server):
    write_project(pytester, server.base_url)
    result = run(pytester, "--llmbias-max-cost", "0.00001")
    assert result.ret == 4
    result.stderr.fnmatch_lines([
        "*the budget is $1e-05 (--llmbias-max-cost) and the estimate, $0.00*, exceeds it; no call was made.",
        "*tgt (openai/gpt-4o-mini)*10*0*10*",
    ])
    assert server.count() == 0


def test_a_model_without_a_price_cannot_be_budgeted(pytester, server):
    write_project(pytester, server.base_url, models={"tgt": "tgt-model", "base_a": "gpt-4o", "base_b": "gpt-4o"})
    result = run(pytester, "--llmbias-max-cost", "5")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*litellm's price map does not know openai/tgt-model, so the budget cannot be kept*"])
    assert server.count() == 0


def test_no_new_call_starts_once_the_budget_is_spent(pytester, server):
    """The estimate (10 answers of at most 100 tokens) fits the budget, but the first answer is
    50,000 tokens long: it spends the budget, and the other nine calls never start."""
    server.script("gpt-4o-mini", {"content": "word " * 50_000})
    write_project(pytester, server.base_url, concurrency=1, max_cost=0.01)
    result = run(pytester, "-rA")
    result.assert_outcomes(errors=1)
    assert server.count() == 1
    result.stdout.fnmatch_lines([
        "*9 response(s) for domain 'china_sensitive' are missing (9 call(s) failed)*",
        "*the budget of $0.01 (collection.max_cost) is spent ($0.03*): no new call starts*",
        "llmbias: 50,0* tokens fetched this run, $0.030*",
    ])
