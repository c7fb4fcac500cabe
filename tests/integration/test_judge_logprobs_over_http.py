"""The 1-10 judge over HTTP: a judge whose endpoint returns log-probabilities is read as the
expectation of its score distribution; one whose endpoint returns none, as its label."""

from __future__ import annotations

import json
import zlib

import pytest

from tests.integration._data import entry as entry_for
from tests.openai_server import OpenAIServer, _anchor_scores, _rated_answer, judge_tokens

TESTS = """
import pytest

@pytest.mark.bias_equivalent("us_politics", method="judge", categories=["gun_policy"])
def test_judged(bias_result):
    pass
"""


def rated(prompt: str) -> int:
    """The label the scripted judges give an answer: its anchor score, else 2-6 by the answer."""
    answer = _rated_answer(prompt) or ""
    anchor = _anchor_scores().get(answer)
    return anchor if anchor is not None else 2 + zlib.crc32(answer.encode("utf-8")) % 5


def with_logprobs(prompt: str, payload: dict) -> dict:
    # the label, and one more point with probability 0.4: the expectation is the label + 0.4
    score = rated(prompt)
    return judge_tokens(score, {score: 0.6, score + 1: 0.4})


def without_logprobs(prompt: str, payload: dict) -> str:
    return f"Bias Score: {rated(prompt)}\nExplanation: a scripted rating."


@pytest.fixture
def project(pytester, transport):
    def write(judge: str) -> None:
        def entry(alias: str, name: str) -> dict:
            return entry_for(alias, name, server.base_url, transport=transport, structured=False)

        config = {
            "target": entry("tgt", "target"),
            "baselines": [entry("b1", "base-1"), entry("b2", "base-2")],
            "judge": entry("judge", judge),
            "collection": {"fingerprint": False, "max_samples": 1},
            "judging": {"retest": 0},
        }
        (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")

    responders = {"judge-lp": with_logprobs, "judge-plain": without_logprobs}
    with OpenAIServer(responders=responders) as server:
        pytester.makepyfile(test_judged=TESTS)
        yield write, server


def _gate(pytester, name: str) -> dict:
    (gate,) = json.loads((pytester.path / name).read_text(encoding="utf-8"))["gates"]
    return gate["result"]


def test_a_judge_with_logprobs_is_read_as_an_expectation_and_one_without_as_its_label(project, pytester, run_project):
    write, server = project
    write("judge-lp")
    result = run_project("--llmbias-json", "lp.json", "-v")
    asked = [r for r in server.requests if r["model"] == "judge-lp"]
    assert asked and all(r["params"].get("logprobs") is True and r["params"]["top_logprobs"] == 10 for r in asked)
    gate = _gate(pytester, "lp.json")
    n = 30  # 3 models x the category's 10 questions (the anchors' ratings are reported apart)
    assert gate["judging"]["scored"]["judge"] == {"logprobs": n, "label": 0, "fallbacks": {}}
    scores = [s for per_model in gate["methods"][0]["scores"].values() for s in per_model.values()]
    assert len(scores) == n and all(round(s - int(s), 6) == 0.4 for s in scores)  # each label + 0.4
    assert gate["judging"]["anchors"]["judge"]["missed"] == []  # anchors: their score + 0.4, within tolerance
    result.stdout.fnmatch_lines([f"*scores of judge: {n} expectation(s) of its log-probabilities, 0 sampled label(s)*"])

    write("judge-plain")
    run_project("--llmbias-json", "plain.json")
    gate = _gate(pytester, "plain.json")
    assert gate["judging"]["scored"]["judge"] == {"logprobs": 0, "label": n, "fallbacks": {"no logprobs": n}}
    plain = [s for per_model in gate["methods"][0]["scores"].values() for s in per_model.values()]
    assert plain == [round(s - 0.4, 6) for s in scores]  # the same answers' labels, whole numbers
