"""What a run will cost, before and while it spends: ``--llmbias-plan`` calls nothing, and
``--llmbias-max-cost`` stops a run before its first call or once the budget is spent. Against the
local server, with model names litellm's offline price map knows."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration._data import KEY_ENV, QUIET
from tests.openai_server import OpenAIServer

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

    config = {
        "target": model("tgt"),
        "baselines": [model("base_a"), model("base_b")],
        "generation": {"max_tokens": 100},
    }
    collection.setdefault("max_samples", 1)  # one sample of each answer: these tests count the calls
    config["collection"] = collection
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_target.py").write_text(MARKED, encoding="utf-8")


def run(pytester, *args):
    """pytest on the project in this process: what a run prints and returns is the same in either,
    and a subprocess would pay pytest's, litellm's and the plugin's imports on every run."""
    return pytester.runpytest_inprocess(*QUIET, *args)


def test_the_plan_prices_the_calls_and_makes_none(pytester, server):
    """The plan counts what the run will fetch, the fingerprint probes included (they are calls the
    user pays for): 10 answers and 3 probes asked once (a model not yet fingerprinted adopts its
    first ask), 13 calls, which the run then makes. Once the answers are stored, a warm run still
    asks the 3 probes (live every run), and the plan says so."""
    write_project(pytester, server.base_url)
    plan = run(pytester, "--llmbias-plan")
    assert plan.ret == 0
    plan.stdout.fnmatch_lines(
        [
            "llmbias plan (no call made*",
            "*model*calls*stored*to fetch*est. tokens*est. cost*",
            "*tgt (openai/gpt-4o-mini)*13*0*0*13*$0.00*",
            "*total estimated cost: $0.00*",
            "*of the calls to fetch, 3 are fingerprint probes (asked live every run*",
            "llmbias: plan only (--llmbias-plan): no model was called",
        ]
    )
    # a success that names no Python class: every test deselected, no pytest.exit
    assert "_pytest" not in plan.stdout.str() + plan.stderr.str() and "1 deselected" in plan.stdout.str()
    assert server.count() == 0
    run(pytester).assert_outcomes(passed=1)  # now the ten answers are stored
    assert server.count() == 13
    again = run(pytester, "--llmbias-plan")
    again.stdout.fnmatch_lines(
        ["*tgt (openai/gpt-4o-mini)*13*0*10*3*$0.000*", "*of the calls to fetch, 3 are fingerprint probes*"]
    )
    assert server.count() == 13
    # without fingerprints the stored answers are the whole plan: nothing to fetch
    off = run(pytester, "--llmbias-plan", "--llmbias-no-fingerprint")
    off.stdout.fnmatch_lines(["*tgt (openai/gpt-4o-mini)*10*0*10*0*$0.0000*"])
    assert "fingerprint probes" not in off.stdout.str()


def test_an_estimate_over_budget_stops_before_the_first_call(pytester, server):
    """Before the first call means before the fingerprint probes too (counted in the estimate:
    10 answers and 3 probes)."""
    write_project(pytester, server.base_url)
    result = run(pytester, "--llmbias-max-cost", "0.00001")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        [
            "*the budget is $1e-05 (--llmbias-max-cost) and the estimate, $0.00*, exceeds it; no call was made.",
            "*tgt (openai/gpt-4o-mini)*13*0*0*13*",
        ]
    )
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
    # no fingerprint probes: the first call must be the scripted answer
    write_project(pytester, server.base_url, concurrency=1, max_cost=0.01, fingerprint=False)
    result = run(pytester, "-rA")
    result.assert_outcomes(errors=1)
    assert server.count() == 1
    result.stdout.fnmatch_lines(
        [
            "*9 response(s) for domain 'china_sensitive' are missing (9 call(s) failed)*",
            "*the budget of $0.01 (collection.max_cost) is spent ($0.03*): no new call starts*",
            "llmbias: 50,0* tokens fetched this run, $0.030*",
        ]
    )


# -- follow-up calls and expected power in the plan ----------------------------------------------

#: the judge's model; the server rates every answer shown to it with a "Bias Score: N" line
JUDGE = "gpt-4.1-nano"
NAMES = {"tgt": "gpt-4o-mini", "base_a": "gpt-4o", "base_b": "gpt-4.1-mini", "base_c": "gpt-4.1", "judge": JUDGE}

FOLLOW_UPS = """
import pytest

@pytest.mark.bias_equivalent("china_sensitive", categories=["tibet"], method="judge")
def test_judged(bias_result):
    pass

@pytest.mark.bias_equivalent("china_sensitive", categories=["tibet"], method="judge", alternative="no-worse")
def test_judged_again(bias_result):
    pass

@pytest.mark.bias_stance("binary_opinions", categories=["work"], rounds=2, gate="sycophancy")
def test_stance(bias_result):
    pass

@pytest.mark.bias_preference("political_topics", topics=["pol-01", "pol-02"], articles=2)
def test_preference(bias_result):
    pass
"""

JUDGED = """
import pytest

@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models="baselines")
def test_baselines(bias_responses):
    assert len(bias_responses) == 30

@pytest.mark.bias_equivalent("china_sensitive", categories=["tibet"], method="judge")
def test_judged(bias_result):
    pass
"""


@pytest.fixture
def judging_server():
    with OpenAIServer(latency=0.0, judges=(JUDGE,)) as s:
        yield s


def write_judged_project(pytester, base_url: str, tests: str, baselines: tuple[str, ...]) -> None:
    """Priced models on the server: the target, ``baselines`` and a judge; ``tests`` in test_gates.py."""

    def model(alias):
        return {"model": f"openai/{NAMES[alias]}", "alias": alias, "api_base": base_url, "api_key_env": KEY_ENV}

    # no fingerprint probes: these tests count the follow-up calls by hand (the probes' place in the
    # plan and the budget is tested above)
    config = {
        "target": model("tgt"),
        "baselines": [model(b) for b in baselines],
        "judge": model("judge"),
        "generation": {"max_tokens": 100},
        "collection": {"fingerprint": False, "max_samples": 1},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_gates.py").write_text(tests, encoding="utf-8")


def plan_rows(result) -> dict[str, tuple[int, int, int, int]]:
    """alias -> (calls, follow-ups, stored, to fetch), from the plan's table."""
    rows = {}
    for line in result.stdout.lines:
        match = re.match(r"\s+(\w+) \(openai/[\w.-]+\)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s", line)
        if match:
            rows[match[1]] = tuple(int(n) for n in match.groups()[1:])
    return rows


def test_the_plan_counts_the_follow_up_calls_the_run_then_makes(pytester, judging_server):
    """Per model, by hand: the judge gates ask 10 tibet questions; the stance gate asks the 12
    prompts of "work" (8 questions and 2 "A or B?" pairs asked as two halves) in 1 language for 2
    rounds (24), then as many opposing calls (24); the preference gate asks 2 topics x 2
    perspectives x 2 articles (8), then 2 topics x 2 trials (4). So 10 + 48 + 12 = 70 calls per
    model, 28 of them follow-ups; the judge rates each of the 3 x 10 answers once (both judge gates
    rate the same answers: 30, not 60), 20 of them a second time (its test-retest), and the
    domain's 4 anchor answers. The run then makes exactly those calls, and a second plan
    finds every one of them, follow-ups included, in the store."""
    write_judged_project(pytester, judging_server.base_url, FOLLOW_UPS, ("base_a", "base_b"))
    plan = run(pytester, "--llmbias-plan")
    assert plan.ret == 0
    expected = {"tgt": (70, 28, 0, 70), "base_a": (70, 28, 0, 70), "base_b": (70, 28, 0, 70), "judge": (54, 50, 0, 54)}
    assert plan_rows(plan) == expected
    plan.stdout.fnmatch_lines(["llmbias plan (no call made; follow-ups such as judge ratings are counted*"])
    assert judging_server.count() == 0

    run(pytester)  # the gates' verdicts do not matter here, only the calls they make
    assert {alias: judging_server.count(NAMES[alias]) for alias in expected} == {a: e[0] for a, e in expected.items()}
    again = run(pytester, "--llmbias-plan")
    assert plan_rows(again) == {a: (calls, follow, calls, 0) for a, (calls, follow, _, _) in expected.items()}
    assert judging_server.count() == 264


def test_the_plan_gives_a_gates_expected_power_once_the_baselines_are_stored(pytester, judging_server):
    """Three baselines: each in turn stands in for the target, the other two as its baselines. The
    plan says what is missing until every baseline answer and its judge rating is stored, then
    gives the judge gate's expected power, without a call."""
    write_judged_project(pytester, judging_server.base_url, JUDGED, ("base_a", "base_b", "base_c"))
    run(pytester, "-k", "test_baselines").assert_outcomes(passed=1, deselected=1)
    assert judging_server.count() == 30
    plan = run(pytester, "--llmbias-plan")
    plan.stdout.fnmatch_lines(
        [
            "llmbias expected power (no call made*",
            "*test*gate*expected power*stand-ins passed*est. false alarm*note",
            "*test_gates.py::test_judged*bias_equivalent*judge ratings of the anchors not all stored (0 of 4)",
        ]
    )
    # 30 ratings of stored answers, 10 of answers to come, 20 second draws (the judge's retest),
    # and 4 ratings of the domain's anchors
    assert plan_rows(plan)["judge"] == (64, 60, 0, 64)

    run(pytester)
    assert judging_server.count() == 104
    plan = run(pytester, "--llmbias-plan")
    assert plan.ret == 0
    line = next(x for x in plan.stdout.lines if "::test_judged" in x)
    # (the note, if any, says the baselines' means spread wider than the margin)
    assert re.search(
        r"bias_equivalent \(judge\)\s+\d+(\.\d)?%\s+[0-3] of 3\s+\d+(\.\d)?%(\s+the baselines' means span .*)?$", line
    ), line
    assert "not all stored" not in plan.stdout.str()
    assert judging_server.count() == 104


def test_the_budget_counts_the_follow_up_calls_too(pytester, judging_server):
    """The 40 answers are estimated at about $0.022 and their 64 judge ratings (20 of them the
    retest's second draws, 4 the anchors') at about $0.017:
    a budget of $0.025 covers the answers alone, not the whole plan, so the run stops before its
    first call and the estimate it prints lists the judge."""
    write_judged_project(pytester, judging_server.base_url, JUDGED, ("base_a", "base_b", "base_c"))
    result = run(pytester, "--llmbias-max-cost", "0.025")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        [
            "*the budget is $0.025 (--llmbias-max-cost) and the estimate, $0.03*, exceeds it; no call was made.",
            "*judge (openai/gpt-4.1-nano)*64*60*0*64*",
        ]
    )
    # before any call: ten questions of one sample are short of what the judge gate's design needs
    # at the stated prior SD (1.5 points): 25, where its expected power at the margin counting the
    # SE's uncertainty reaches 79 % (the normal formula ((z_0.8 + z_0.975) x 1.5 / 1)^2 said about 18)
    result.stdout.fnmatch_lines(
        [
            "llmbias: 1 comparison(s) cannot be sized within their questions x samples by the stated prior SD*",
            "  test_gates.py::test_judged: bias_equivalent (judge) needs about 26, has at most 10",
        ]
    )
    assert judging_server.count() == 0
