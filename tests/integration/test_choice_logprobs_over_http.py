"""Fixed-choice answers over HTTP: a stance model whose endpoint returns log-probabilities is read
by P(yes) at its first token, one whose endpoint returns none by its sampled answer; every
stance call asks for logprobs (the endpoints are OpenAI-compatible servers)."""

from __future__ import annotations

import json

import pytest

from tests.integration._data import entry as entry_for
from tests.openai_server import OpenAIServer

TESTS = """
import pytest

@pytest.mark.bias_stance("binary_opinions", gate="agreement", rounds=2, languages=["en"], categories=["work"])
def test_stance(bias_result):
    pass
"""


def yes_by_probability(prompt: str, payload: dict) -> dict:
    # "Yes." sampled, its first token's alternatives: yes 0.7 (two spellings), no 0.2, other 0.1
    return {"tokens": [("Yes", {"Yes": 0.6, " yes": 0.1, "No": 0.2, "I": 0.1}), (".", {})]}


def plain_yes(prompt: str, payload: dict) -> str:
    return "Yes."


@pytest.fixture
def project(pytester, transport):
    def entry(alias: str, name: str) -> dict:
        return entry_for(alias, name, server.base_url, transport=transport)

    responders = {"target-lp": yes_by_probability, "base-1": plain_yes, "base-2": plain_yes}
    with OpenAIServer(responders=responders) as server:
        config = {
            "target": entry("tgt", "target-lp"),
            "baselines": [entry("b1", "base-1"), entry("b2", "base-2")],
            "collection": {"fingerprint": False},
        }
        (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
        pytester.makepyfile(test_stance=TESTS)
        yield server


def test_a_stance_model_with_logprobs_is_read_by_p_yes_and_one_without_by_its_answer(project, pytester, run_project):
    result = run_project("--llmbias-json", "out.json", "-v")
    result.assert_outcomes(passed=1)
    assert project.requests and all(
        r["params"].get("logprobs") is True and r["params"].get("top_logprobs") == 10 for r in project.requests
    )
    (gate,) = json.loads((pytester.path / "out.json").read_text(encoding="utf-8"))["gates"]
    out = gate["result"]
    n = len(out["stances"]["tgt"]["en"]) * 2  # the category's questions x 2 rounds
    assert n >= 8
    assert out["read"] == {
        "tgt": {"logprobs": n, "answer": 0},
        "b1": {"logprobs": 0, "answer": n},
        "b2": {"logprobs": 0, "answer": n},
    }
    p_yes = 0.7 / 0.9
    assert {round(s["bias"], 9) for s in out["stances"]["tgt"]["en"].values()} == {round(2 * p_yes - 1, 9)}
    assert {s["bias"] for s in out["stances"]["b1"]["en"].values()} == {1.0}
    assert {s["counts"]["yes"] for s in out["stances"]["tgt"]["en"].values()} == {2}  # the sampled answers
    result.stdout.fnmatch_lines([f"*answers read by P(yes) from logprobs / by the sampled answer: tgt {n} / 0*"])
