"""Each gate's entry of the JSON document carries its usage: the calls its plan made (its judge's
ratings too), fetched, from the store or failed, their tokens and cost at litellm's prices. Against
the local server, with model names litellm's offline price map knows."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pytest_llmbias.report.json_report import schema
from tests.integration._data import KEY_ENV, QUIET
from tests.openai_server import OpenAIServer

JUDGE = "gpt-4.1-nano"
NAMES = {"tgt": "gpt-4o-mini", "base_a": "gpt-4o", "base_b": "gpt-4.1-mini", "judge": JUDGE}

TWO_JUDGED = """
import pytest

@pytest.mark.bias_equivalent("china_sensitive", categories=["tibet"], method="judge")
def test_judged(bias_result):
    pass

@pytest.mark.bias_equivalent("china_sensitive", categories=["tibet"], method="judge", alternative="no-worse")
def test_judged_again(bias_result):
    pass

@pytest.mark.bias_responses("china_sensitive", categories=["taiwan_status"], models="target")
def test_answers_no_gate_asked_for(bias_responses):
    pass
"""


@pytest.fixture
def judging_server():
    with OpenAIServer(latency=0.0, judges=(JUDGE,)) as s:
        yield s


def gates_of(pytester: pytest.Pytester) -> tuple[dict, dict]:
    doc = json.loads((pytester.path / "run.json").read_text())
    jsonschema.validate(doc, schema())
    return doc["plan"], {g["test"].split("::")[-1]: g["usage"] for g in doc["gates"]}


def test_two_gates_sharing_their_answers_and_ratings_both_count_them(pytester, judging_server) -> None:
    """By hand: each gate asks 3 models x 10 tibet questions (30 answers) and the judge rates each
    once (30), 20 a second time (its retest) and the domain's 4 anchors: 84 calls. Both gates ask
    the same 84, so each gate counts 84 and the run fetches 84 once, besides the taiwan_status answers
    of a test that is no gate. A second run serves every one of them from the store."""

    def model(alias: str) -> dict:
        return {
            "model": f"openai/{NAMES[alias]}",
            "alias": alias,
            "api_base": judging_server.base_url,
            "api_key_env": KEY_ENV,
        }

    config = {
        "target": model("tgt"),
        "baselines": [model("base_a"), model("base_b")],
        "judge": model("judge"),
        "generation": {"max_tokens": 100},
        "collection": {"fingerprint": False, "max_samples": 1},  # no probes: the run's calls are the gates'
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_gates.py").write_text(TWO_JUDGED, encoding="utf-8")

    pytester.runpytest_inprocess(*QUIET, "--llmbias-json=run.json")
    plan, usage = gates_of(pytester)
    taiwan = judging_server.count() - 84
    assert taiwan > 0 and plan["fetched"] == 84 + taiwan
    assert usage["test_judged"] == usage["test_judged_again"]
    first = usage["test_judged"]
    assert (first["calls"], first["fetched"], first["from_store"], first["failed"]) == (84, 84, 0, 0)
    assert first["tokens"] > 0 and 0 < first["cost_usd"] < plan["cost_usd"]

    pytester.runpytest_inprocess(*QUIET, "--llmbias-json=run.json")
    plan, usage = gates_of(pytester)
    assert plan["fetched"] == 0
    assert usage["test_judged"] == {
        "calls": 84,
        "fetched": 0,
        "from_store": 84,
        "failed": 0,
        "tokens": 0,
        "cost_usd": 0.0,
    }
