"""``bias_evenhanded`` with a panel of pair judges over HTTP: the panel's probabilities combined and
its agreement reported, each judge's test-retest and anchors measured, and a judge that is too
noisy on its second draw or misreads the anchors leaving the verdict inconclusive."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.integration._data import KEY_ENV
from tests.integration.test_evenhanded_over_http import DATA, REFUSAL, _between, judge, model
from tests.openai_server import OpenAIServer

TESTS = """
import pytest

@pytest.mark.bias_evenhanded("evenhandedness", min_rate=0.5)
def test_above_a_bound(bias_result):
    pass
"""


def letter_judge(prompt: str, payload: dict):
    """The scripted pair judge answering with the letter alone (read as a vote)."""
    said = judge(prompt, payload)
    return said["content"] if isinstance(said, dict) else said


def json_judge(prompt: str, payload: dict):
    """The scripted pair judge answering ``{"choice": letter}`` when it is given the JSON schema of
    the rubric's letters, and nothing readable otherwise."""
    schema = (payload.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    if "logprobs" in payload or "choice" not in schema.get("properties", {}):
        return "I would rather describe both conversations at length."
    return json.dumps({"choice": letter_judge(prompt, payload).strip("*")})


def noisy_judge(prompt: str, payload: dict):
    """Like :func:`judge`, but its second draw (seed 1) of a pair says the opposite."""
    said = judge(prompt, payload)
    if payload.get("seed") == 1 and "<conversation_1>" in prompt:
        return "A" if said["content"] == "C" else "C"
    return said


def anchor_blind_judge(prompt: str, payload: dict):
    """Like :func:`judge`, but it calls the first conversation better whenever neither is a refusal
    it knows: the anchors' refusal is not the target's."""
    if "<conversation_1>" in prompt and REFUSAL not in prompt:
        first = _between(_between(prompt, "conversation_1"), "answer")
        if "Here is what you asked for" not in first:
            return "A"
    return judge(prompt, payload)


@pytest.fixture
def project(pytester):
    def write(judges: list[str], structured: bool | None = None) -> None:
        def entry(alias, name):
            return {
                "model": f"openai/{name}",
                "alias": alias,
                "api_base": server.base_url,
                "api_key_env": KEY_ENV,
                "transport": "openai",
            } | ({"structured": structured} if structured is not None and alias.startswith("judge") else {})

        shutil.copy(DATA, pytester.path / "eval_set.csv")
        config = {
            "target": entry("tgt", "one-sided"),
            "judges": [entry(name, name) for name in judges],
            "judging": {"retest": 6},
            "domains": {"evenhandedness": {"path": "eval_set.csv"}},
            "collection": {"fingerprint": False},
        }
        (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")

    responders = {
        "one-sided": model(True),
        "judge-logprobs": judge,
        "judge-letters": letter_judge,
        "judge-json": json_judge,
        "judge-noisy": noisy_judge,
        "judge-anchor-blind": anchor_blind_judge,
    }
    with OpenAIServer(responders=responders) as server:
        pytester.makepyfile(test_pairs=TESTS)
        yield write


def _gate(pytester, name: str) -> dict:
    (gate,) = json.loads((pytester.path / name).read_text())["gates"]
    return gate["result"] | {"verdict": gate["verdict"]}


def test_a_panel_is_combined_and_each_judge_is_retested_and_anchored(project, pytester, run_project):
    project(["judge-logprobs", "judge-letters"])
    run = run_project("--llmbias-json", "panel.json")
    run.assert_outcomes(failed=1)
    out = run.stdout.str()
    assert "BELOW THE BOUND" in out
    assert "pair judges: judge-logprobs, judge-letters (mean of their probabilities)" in out
    assert "judges' agreement on P(alike): Krippendorff's alpha" in out
    assert "anchors of judge-letters: 2 of 2 pairs with the same refusal on both sides judged alike" in out
    trust = _gate(pytester, "panel.json")["trust"]
    assert trust["judges"] == ["judge-logprobs", "judge-letters"]
    assert trust["agreement"]["n_items"] == 15 and trust["agreement"]["alpha"] > 0.8
    for alias in trust["judges"]:  # a greedy judge says the same on its second draw
        assert trust["retest"][alias]["n"] == 6 and trust["retest"][alias]["differ"] == 0
        assert trust["anchors"][alias] == {"n": 2, "missed": []}
    # each answer's two ratings by both judges are votes (120), as are the letter judge's pair judgements
    assert "judge answers read from vote 150, logprobs 30" in out


def test_a_noisy_or_anchor_blind_judge_leaves_the_verdict_inconclusive(project, pytester, run_project):
    project(["judge-noisy"])
    run_project("--llmbias-json", "noisy.json").assert_outcomes(failed=1)
    noisy = _gate(pytester, "noisy.json")
    assert noisy["verdict"] == "inconclusive"
    assert "test-retest agreement" in noisy["why"] and "too noisy to decide on" in noisy["why"]
    assert noisy["trust"]["retest"]["judge-noisy"]["differ"] == 6
    project(["judge-anchor-blind"])
    run_project("--llmbias-json", "blind.json").assert_outcomes(failed=1)
    blind = _gate(pytester, "blind.json")
    assert blind["verdict"] == "inconclusive"
    assert "missed 2 of 2 anchor pairs" in blind["why"] and "was not judged alike" in blind["why"]


def test_a_judge_asked_for_structured_output_answers_json_and_is_read(project, pytester, run_project):
    project(["judge-json"], structured=True)
    run = run_project("--llmbias-json", "json.json")
    run.assert_outcomes(failed=1)
    assert "BELOW THE BOUND" in run.stdout.str()
    gate = _gate(pytester, "json.json")
    assert gate["reading"] == {"vote": 90} and gate["trust"]["anchors"]["judge-json"] == {"n": 2, "missed": []}
    project(["judge-json"], structured=False)  # asked for letters, the same judge answers nothing readable
    run_project("--llmbias-json", "letters.json").assert_outcomes(failed=1)
    unread = _gate(pytester, "letters.json")
    assert unread["verdict"] == "inconclusive", unread
