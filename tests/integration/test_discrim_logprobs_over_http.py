"""discrim-eval over HTTP: a target whose endpoint returns log-probabilities is scored from P(yes),
as the published metric is, and a target whose endpoint returns none from its sampled decisions.
Both say "Yes." to everyone; the first is less likely to say it to Black applicants."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from tests.integration._data import entry as entry_for
from tests.openai_server import OpenAIServer

DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "discrim_explicit.jsonl"
RECORDS = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
TESTS = """
import pytest

@pytest.mark.bias_benchmark("discrim_eval")
def test_discrim(bias_result):
    pass
"""


def p_yes(prompt: str) -> float:
    return 0.3 if " Black " in prompt else 0.8


def yes_by_probability(prompt: str, payload: dict) -> dict:
    p = p_yes(prompt)
    return {"tokens": [("Yes", {"Yes": p, "No": 1 - p}), (".", {})]}


def plain_yes(prompt: str, payload: dict) -> str:
    return "Yes."


@pytest.fixture
def project(pytester, transport):
    def write(target: str) -> None:
        def entry(alias: str, name: str) -> dict:
            return entry_for(alias, name, server.base_url, transport=transport)

        config = {
            "target": entry("tgt", target),
            "baselines": [entry("b1", "base-1"), entry("b2", "base-2")],
            "collection": {"fingerprint": False},
            "domains": {"discrim_eval": {"path": "discrim", "limit": None}},
        }
        (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")

    responders = {"target-lp": yes_by_probability, "target-plain": plain_yes, "base-1": plain_yes, "base-2": plain_yes}
    with OpenAIServer(responders=responders) as server:
        (pytester.path / "discrim").mkdir()
        shutil.copy(DATA, pytester.path / "discrim" / "explicit.jsonl")
        pytester.makepyfile(test_discrim=TESTS)
        yield write


def _result(pytester, name: str) -> dict:
    (gate,) = json.loads((pytester.path / name).read_text(encoding="utf-8"))["gates"]
    return gate["result"]


def test_a_target_with_logprobs_is_scored_from_p_yes_and_one_without_from_its_answers(project, pytester, run_project):
    project("target-lp")
    run_project("--llmbias-json", "lp.json").assert_outcomes(failed=1)
    result = _result(pytester, "lp.json")
    n = len(RECORDS)
    assert result["read"] == {
        "tgt": {"logprobs": n, "answer": 0},
        "b1": {"logprobs": 0, "answer": n},
        "b2": {"logprobs": 0, "answer": n},
    }
    harness = result["harness"]["tgt"]
    assert harness["probabilities"] == n
    assert harness["yes_rate"] == pytest.approx(sum(p_yes(r["filled_template"] + " ") for r in RECORDS) / n)
    black = next(g for g in harness["groups"] if g["group"] == "Black")
    assert black["score"] < -1.5 and math.isclose(black["yes_rate"], 0.3)
    assert next(g for g in result["harness"]["b1"]["groups"] if g["group"] == "Black")["score"] == 0

    project("target-plain")  # the same answers' texts, no logprobs: every decision a sampled yes
    run_project("--llmbias-json", "plain.json").assert_outcomes(passed=1)
    plain = _result(pytester, "plain.json")
    assert plain["read"]["tgt"] == {"logprobs": 0, "answer": n}
    assert plain["harness"]["tgt"]["yes_rate"] == 1.0
