"""Every gate kind against a recorded release, over the local HTTP server: release v1 is recorded
from one scripted model; a re-draw of the same model (the same leans, its own draws) passes, and a
more biased model fails, for bias_index, bias_stance, bias_impact_ratio and bias_preference
(bias_equivalent: ``test_releases.py``), serially and under pytest-xdist.

The scripted models answer by rule, so every verdict is fixed: a *fair* model's answers depend on
the question and a draw (``salt``, the request's seed), a *slanted* one loads some answers, turns
its lean round, speaks ill of one country, or always picks one side's article.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable

import pytest

from pytest_llmbias.domains import load_domain
from tests.integration._data import KEY_ENV
from tests.openai_server import OpenAIServer

TESTS = """
import pytest


@pytest.mark.bias_index("bias_dimensions")
def test_index(bias_result):
    pass


@pytest.mark.bias_stance("binary_opinions", gate="agreement", rounds=6, categories=["work", "money", "health"])
def test_stance(bias_result):
    pass


@pytest.mark.bias_impact_ratio("countries")
def test_impact(bias_result):
    pass


@pytest.mark.bias_preference("economic_topics", articles=3)
def test_preference(bias_result):
    pass
"""

#: model names as the server sees them
RECORDED, REDRAWN, SLANTED = "tgt-model", "tgt-redrawn-model", "tgt-slanted-model"


def _draw(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts``."""
    return int(hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:12], 16) / 16**12


COUNTRY = {q.text.strip(): q.concept for q in load_domain("countries").counterfactual_prompts()}
PICKED = "a socialist"  # the phrase of economic_topics' first perspective
STANCE_INSTRUCTION = "Reply with one word only: 'Yes.' or 'No.'"


def responder(salt: str, slanted: bool) -> Callable[[str, dict], str]:
    """A scripted model: ``salt`` is its draw; ``slanted`` makes it the more biased one."""

    def answer(prompt: str, payload: dict) -> str:
        seed = payload.get("seed")
        if prompt.endswith(STANCE_INSTRUCTION):  # bias_stance: a lean per question, a draw per round
            question = prompt[: -len(STANCE_INSTRUCTION)]
            u = _draw("lean", question)
            lean = 0.95 if u < 0.35 else 0.05 if u < 0.7 else 0.5
            if slanted and lean != 0.5:
                lean = 1 - lean
            return "Yes." if _draw(question, seed, salt) < lean else "No."
        written = re.search(r"written from (.+?) perspective\.", prompt)
        if written:  # bias_preference, stage 1
            return f"Draft {seed}. This article is written from {written.group(1)} perspective, and argues its case."
        if prompt.startswith("Here are "):  # bias_preference, stage 2: which article
            shown = re.findall(r"Article (\d+):\n(.*)", prompt)
            if slanted:
                return next(number for number, text in shown if f"from {PICKED} perspective" in text)
            return str(1 + int(_draw(prompt, salt) * len(shown)))
        country = COUNTRY.get(prompt.strip())
        if country is not None:  # bias_impact_ratio: the sentiment of a template, never of the country
            if slanted and country == "Argentina":
                return f"{country} is a terrible and awful place."
            tone = _draw(prompt.replace(country, "X"), salt)
            return (
                f"{country} is a wonderful place."
                if tone < 0.4
                else f"{country} is a country."
                if tone < 0.7
                else f"{country} has a difficult economy."
            )
        # bias_index: an adjective per prompt; a slanted model loads a third of its answers
        if slanted and _draw("loaded", prompt) < 0.35:
            return f"On this: it is {'wonderful' if _draw(prompt) < 0.5 else 'terrible'}."
        pair = ("good", "nice") if _draw("pair", prompt) < 0.5 else ("fine", "okay")
        return f"On this: it is {pair[int(_draw(prompt, salt) < 0.5)]}."

    return answer


@pytest.fixture
def models_server():
    responders = {
        RECORDED: responder("v1", False),
        REDRAWN: responder("v2", False),
        SLANTED: responder("v3", True),
        "base-a-model": responder("a", False),
        "base-b-model": responder("b", False),
    }
    with OpenAIServer(latency=0.005, responders=responders) as s:
        yield s


def _write(pytester: pytest.Pytester, server: OpenAIServer, model: str) -> None:
    """The project's roster: the target ``model`` and two fair baselines (the recording run's gates
    compare with them; against the release they are context)."""

    def entry(alias: str, name: str) -> dict:
        return {
            "model": f"openai/{name}",
            "alias": alias,
            "api_base": server.base_url,
            "api_key_env": KEY_ENV,
            "transport": "openai",
        }

    config = {
        "target": entry("tgt", model),
        "baselines": [entry("base_a", "base-a-model"), entry("base_b", "base-b-model")],
        # no fingerprint probes: these tests count every call (the probes are tested in test_fingerprints.py)
        "generation": {"seed": 11},
        "collection": {"concurrency": 32, "fingerprint": False},
        "report": {"json": "out/run.json"},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_every_gate_kind_against_a_release(pytester, models_server, run_project, workers):
    pytester.makepyfile(test_gates=TESTS)
    _write(pytester, models_server, RECORDED)
    run_project(*workers, "--llmbias-record-release", "v1").assert_outcomes(passed=4)
    recorded = models_server.count(RECORDED)

    _write(pytester, models_server, REDRAWN)
    redrawn = run_project(*workers, "--llmbias-against", "v1")
    redrawn.assert_outcomes(passed=4)
    assert models_server.count(RECORDED) == recorded  # the release is read from its record, never asked

    _write(pytester, models_server, SLANTED)
    slanted = run_project(*workers, "--llmbias-against", "v1")
    slanted.assert_outcomes(failed=4)
    assert models_server.count(RECORDED) == recorded
    gates = {
        g["test"].rsplit("::", 1)[1]: g
        for g in json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))["gates"]
    }
    assert gates["test_index"]["result"]["baselines"] == ["release-v1"]  # compared with the release alone
    assert gates["test_impact"]["result"]["release"]["regressed"]  # Argentina's answers moved
    assert gates["test_stance"]["verdict"] == "disagrees" and gates["test_preference"]["passed"] is False

    asked = models_server.count()
    warm = run_project(*workers, "--llmbias-against", "v1")
    warm.assert_outcomes(failed=4)
    assert models_server.count() == asked  # a warm re-run of the comparison makes no call
