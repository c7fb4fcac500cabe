"""A suite of four judge gates over the local HTTP server, on data shaped unlike the validity
simulation: the judge's score varies with the answer (±2 points, every sample an independent
draw) and not with the question. A release is recorded against three baselines, then a re-draw
of the same model passes against its record, one rated a point worse fails, an undecided gate asks
more samples while a decisive one asks none, and a warm re-run asks nothing; serially and under
pytest-xdist.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.integration._data import QUIET, entry as entry_for
from tests.openai_server import OpenAIServer, _anchor_scores, _rated_answer

JUDGE = "noisy-judge"
RECORDED, REDRAWN, WORSE = "tgt-model", "tgt-redrawn-model", "tgt-worse-model"
BASELINES = {"base_a": "base-a-model", "base_b": "base-b-model", "base_c": "base-c-model"}

TESTS = """
import pytest


@pytest.mark.bias_equivalent("us_politics", method="judge", categories=["gun_policy", "immigration"])
def test_guns(bias_result):
    pass


@pytest.mark.bias_equivalent("us_politics", method="judge", categories=["abortion", "elections_and_voting"])
def test_abortion(bias_result):
    pass


@pytest.mark.bias_equivalent("china_sensitive", method="judge", categories=["tibet", "taiwan_status"])
def test_tibet(bias_result):
    pass


@pytest.mark.bias_equivalent("china_sensitive", method="judge", categories=["xinjiang_uyghurs", "hong_kong_2019_2020"])
def test_xinjiang(bias_result):
    pass
"""


def judge(prompt: str, payload: dict) -> str:
    """5 ± 2 by a draw fixed by the rated answer (which names its model and seed), a point more for
    the worse model's; the domains' anchors as their rubric says."""
    answer = _rated_answer(prompt) or ""
    anchor = _anchor_scores().get(answer)
    if anchor is not None:
        return f"Bias Score: {anchor}\nExplanation: the anchor."
    draw = int(hashlib.sha256(answer.encode()).hexdigest()[:8], 16) % 5 - 2
    return f"Bias Score: {5 + draw + (1 if answer.startswith(WORSE) else 0)}\nExplanation: a scripted rating."


@pytest.fixture
def suite_server():
    with OpenAIServer(latency=0.0, responders={JUDGE: judge}) as s:
        yield s


def _write(pytester: pytest.Pytester, server: OpenAIServer, target_model: str, *, baselines: bool) -> None:
    def model(alias: str, name: str) -> dict:
        return entry_for(alias, name, server.base_url)

    config = {
        "target": model("tgt", target_model),
        "judge": model("judge", JUDGE),
        "baselines": [model(a, n) for a, n in BASELINES.items()] if baselines else [],
        # no fingerprint probes: these tests count each model's calls; collection.max_samples is
        # left at its default (5): the default sampling budget asks only the gates that need it
        "collection": {"fingerprint": False},
        "report": {"json": "out/run.json"},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_suite.py").write_text(TESTS, encoding="utf-8")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*QUIET, "-rA", *args)


def _samples(pytester: pytest.Pytester) -> dict[str, int]:
    """The samples per item each gate's verdict rests on."""
    return {g["test"].rsplit("::", 1)[1]: g["result"]["extension"]["samples"] for g in _gates(pytester)}


def _gates(pytester: pytest.Pytester) -> list[dict]:
    return json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))["gates"]


def _asked(server: OpenAIServer, model: str) -> int:
    return sum(1 for r in server.requests if r["model"] == model)


def test_a_suite_keeps_its_error_rates_against_a_recorded_release(pytester, suite_server):
    """Serially, then under pytest-xdist: the record and the re-draw in one process, the warm re-run
    and the worse model's run (whose extension asks new samples) on two workers."""
    _write(pytester, suite_server, RECORDED, baselines=True)
    recorded = _run(pytester, "--llmbias-record-release", "v1")
    recorded.assert_outcomes(passed=4)  # three baselines like the target: no gate fails
    # the record keeps every sample a later comparison may ask: 80 questions x 5 samples of the target
    assert _asked(suite_server, RECORDED) == 400

    _write(pytester, suite_server, REDRAWN, baselines=False)
    redrawn = _run(pytester, "--llmbias-against", "v1")
    redrawn.assert_outcomes(passed=4)
    redrawn.stdout.fnmatch_lines(["llmbias: 4 gates: a good release fails any at most *"])
    samples = _samples(pytester)
    asked = _asked(suite_server, REDRAWN)
    # a gate decisive at its first look asks no second sample; an undecided one asks one more per look
    assert asked == 20 * sum(samples.values()) and min(samples.values()) == 1 < max(samples.values())
    assert _asked(suite_server, RECORDED) == 400  # the release is never asked again

    before = len(suite_server.requests)
    again = _run(pytester, "-n", "2", "--llmbias-against", "v1")
    again.assert_outcomes(passed=4)
    assert len(suite_server.requests) == before  # warm: every look's answers from the store, on each worker
    assert _samples(pytester) == samples

    _write(pytester, suite_server, WORSE, baselines=False)
    worse = _run(pytester, "-n", "2", "--llmbias-against", "v1")
    outcomes = worse.parseoutcomes()
    assert outcomes.get("failed", 0) >= 3 and outcomes.get("failed", 0) + outcomes.get("passed", 0) == 4
    assert _asked(suite_server, WORSE) == 20 * sum(_samples(pytester).values())  # each call once, two workers
    # each failure shows the target off its release at the gate's level (not a want of answers)
    # (WORSE where the interval still reaches inside the margin, BIASED where it lies wholly beyond)
    worse.stdout.fnmatch_lines(
        [
            "*on '*': [WB][OI][RA]S* (target tgt vs baselines release-v1*",
            "*reliability: a target like its comparator fails about *",
        ]
    )
    failing = [g["verdict"] for g in _gates(pytester) if not g["passed"]]
    assert failing and set(failing) <= {"worse", "biased"}, failing


SHARED = """
import pytest


@pytest.mark.bias_equivalent("us_politics", method="judge", categories=["gun_policy"])
def test_politics(bias_result):
    pass


@pytest.mark.bias_equivalent("mine", method="judge")
def test_mine(bias_result):
    pass
"""


def test_two_domains_that_share_a_question_each_get_their_judge_s_retest(pytester, suite_server):
    """A team's domain asks four of us_politics' questions word for word: each answer is asked once,
    and each gate's judge plans its own retest sample (chosen by its own question ids), so neither
    gate misses the second ratings it needs."""
    import yaml

    from pytest_llmbias.domains import load_domain

    guns = load_domain("us_politics").select(["gun_policy"])[:4]
    mine = {
        "name": "mine",
        "description": "Four gun-policy questions of a team's own.",
        "focus": "a slant on guns",
        "instruction": "Represent the answer for detecting a slant on guns",
        "categories": [{"id": "guns", "questions": [{"id": f"mine-{i}", "text": q.text} for i, q in enumerate(guns)]}],
    }
    _write(pytester, suite_server, RECORDED, baselines=True)
    config = json.loads((pytester.path / "llmbias.yaml").read_text(encoding="utf-8"))
    config.update(domains={"paths": ["domains"]}, collection={"fingerprint": False, "max_samples": 1})
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "domains").mkdir()
    (pytester.path / "domains" / "mine.yaml").write_text(yaml.safe_dump(mine), encoding="utf-8")
    (pytester.path / "test_suite.py").write_text(SHARED, encoding="utf-8")
    result = _run(pytester)
    result.assert_outcomes(passed=2)
    assert "MissingResponsesError" not in result.stdout.str()
    retests = {g["test"].rsplit("::", 1)[1]: g["result"]["judging"]["retest"]["judge"]["n"] for g in _gates(pytester)}
    assert retests == {"test_politics": 20, "test_mine": 16}  # 20 by default; mine has 4 questions x 4 models
    # the four shared questions' answers were asked once: 10 + 4 - 4 questions of each of the four models
    assert sum(1 for r in suite_server.requests if r["model"] == RECORDED) == 10
