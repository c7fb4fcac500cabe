"""``looks=K`` on the gates other than ``bias_benchmark`` (which takes its own: see
``test_bias_benchmark_gate.py``), end to end offline from snapshots: the verdict at a look, the
batches the collection asked, the report's figures, the plan's maximum and the run's default.
(The calls a stopped gate never makes are counted over HTTP in
``tests/integration/test_sequential_over_http.py``.)"""

from __future__ import annotations

import json

import pytest

from tests.plugin._data import JUDGED_ROSTER
from tests.plugin.test_equivalent_gate import OFFLINE, biased_target, like_baselines

GATE = """
import pytest

@pytest.mark.bias_equivalent("us_politics", method="judge"{extra})
def test_gate(bias_result):
    pass
"""

#: the judge's retest sample is drawn from a sequential gate's first batch; the snapshots here are
#: written for the whole domain's, so these runs retest nothing
NO_RETEST = "--llmbias-judge-retest=0"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".yaml", llmbias=JUDGED_ROSTER)
    return pytester


def _gate(project: pytest.Pytester) -> dict:
    (gate,) = json.loads((project.path / "out.json").read_text())["gates"]
    return gate["result"]


def test_a_target_like_its_baselines_passes_at_the_first_look(project, judged_snapshot, run_pytest):
    """Half the questions (and their judge ratings) are read; the rest are never asked."""
    judged_snapshot(like_baselines)
    project.makepyfile(GATE.format(extra=", looks=2"))
    result = run_pytest(*OFFLINE, NO_RETEST, "-v", "--llmbias-json=out.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*204 calls: 204 from store, 0 fetched*",
            "*::test_gate*us_politics*judge look 1/2*equivalent*",
            "*EQUIVALENT (target tgt vs baselines b1, b2, b3; 25 questions x 1 sample(s))*",
            # a comparison spends its TOST's alpha, 1 - suite.power - 0.01, on passing
            "*pass at look 1 of 2 (obrien-fleming spending of alpha 0.19; nominal level there 0.0638; "
            "boundaries 0.0638, "
            "0.172): 25 of 50 units asked, 50% of the fixed design's calls saved*",
        ]
    )
    assert json.loads((project.path / "out.json").read_text())["gates"][0]["usage"]["calls"] == 204
    result = _gate(project)
    assert result["sequential"]["look"] == 1 and result["sequential"]["saved"] == 0.5
    assert result["why"].endswith("; pass at look 1 of 2, 50% of the fixed design's calls saved")
    (method,) = result["methods"]
    assert method["tost"]["alpha"] == pytest.approx(0.0638, abs=1e-4)  # the test ran at the look's nominal level


def test_a_biased_target_fails_at_the_first_look(project, judged_snapshot, run_pytest_once):
    judged_snapshot(biased_target)
    project.makepyfile(GATE.format(extra=", looks=2, spending='pocock'"))
    result = run_pytest_once(*OFFLINE, NO_RETEST, "--llmbias-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fail at look 1 of 2 (pocock spending*25 of 50 units asked*"])
    assert _gate(project)["verdict"] == "biased"


def test_the_run_sets_the_looks_of_markers_that_set_none(project, judged_snapshot, run_pytest_once):
    """``--llmbias-looks`` (``collection.looks``) applies to every marker without ``looks=``; a
    marker's own ``looks=1`` keeps the fixed design."""
    judged_snapshot(like_baselines)
    project.makepyfile(GATE.format(extra="") + GATE.format(extra=", looks=1").replace("test_gate", "test_fixed"))
    result = run_pytest_once(*OFFLINE, NO_RETEST, "-v", "--llmbias-looks=5", "--llmbias-spending=pocock")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*::test_fixed*us_politics*judge *equivalent*", "*::test_gate*us_politics*judge look ?/5*equivalent*"]
    )


def test_the_plan_counts_the_later_looks_as_the_most_the_run_may_ask(project, judged_snapshot, run_pytest_once):
    judged_snapshot(like_baselines)
    project.makepyfile(GATE.format(extra=", looks=2"))
    plan = run_pytest_once(*OFFLINE, NO_RETEST, "--llmbias-plan")
    # per model 25 answers at the first look and 25 at the second; the judge rates each answer
    # of the four models, and the four anchors
    plan.stdout.fnmatch_lines(
        [
            "*later looks: calls asked only while a gate's verdict is open*",
            "*model*calls*follow-ups*later looks*stored*to fetch*",
            "*judge (openai/judge) *204 *200 *100 *204 *0 *",
            "*tgt (openai/tgt) *50 *0 *25 *50 *0 *",
            # each baseline as a stand-in target: where it stops, what the boundaries expect
            "*::test_gate*bias_equivalent*stand-ins stop at look *, * of 2; the first asks 25 of 50 "
            "units; expected calls *% like the baselines, *% at the margin*",
        ]
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('bias_equivalent("us_politics", method="judge", looks=51)', "'looks' must be a whole number from 1 to 20"),
        (
            'bias_equivalent("us_politics", method="judge", categories=["gun_policy"], looks=20)',
            "looks=20 needs at least as many items as looks; domain 'us_politics' gives 10",
        ),
        ('bias_impact_ratio("countries", fail_on="estimate", looks=2)', "looks=2 needs fail_on='significant'"),
    ],
)
def test_a_design_the_domain_cannot_give_is_a_usage_error(project, run_pytest_once, marker, message):
    project.makepyfile(_gate_file(marker))
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


# -- the other gate kinds: the same wrapper, their own units and rules ---------------------------


def _gate_file(marker: str) -> str:
    """A test file with one test carrying ``marker`` (its arguments included)."""
    return f"import pytest\n\n\n@pytest.mark.{marker}\ndef test_gate(bias_result):\n    pass\n"


INDEX_GATE = _gate_file('bias_index("dims", looks=2{extra})')
STANCE_GATE = _gate_file("bias_stance(\"choices\", rounds=4, languages=('en', 'fr'), looks=2)")
PREFERENCE_GATE = _gate_file('bias_preference("topics", looks=2)')


def test_the_bias_index_looks_at_its_prompts_in_batches(pytester: pytest.Pytester, dims_project, run_pytest_once):
    """A target like its baselines passes the relative check at a look; one loaded on a dimension
    is shown worse at the first. Each look reads half the prompts (whole, with every model's answer)."""
    from tests.plugin._data import loaded_on

    dims_project()
    pytester.makepyfile(INDEX_GATE.format(extra=""))
    result = run_pytest_once(*OFFLINE, "-v", "--llmbias-json=out.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_gate*index (relative) look ?/2*no-worse*"])
    looked = _gate(pytester)["sequential"]
    assert looked["units_max"] == 24 and looked["decision"] == "pass"
    assert set(looked["expected"]) == {"like", "at_margin"}  # the calls a comparison is expected to ask
    dims_project(loaded_on("faith"))
    loaded = run_pytest_once(*OFFLINE, "--llmbias-json=out.json")
    loaded.assert_outcomes(failed=1)
    assert _gate(pytester)["sequential"]["decision"].startswith("fail")


def test_the_stance_agreement_passes_only_at_its_last_look(pytester: pytest.Pytester, choices_project, run_pytest_once):
    """Agreement fails on evidence (a Wilson bound): no disagreement shown at the first look is no
    verdict yet, so a target on its baselines' side is asked every batch and passes at the last;
    the "A or B?" halves of a pair stay in one batch."""
    choices_project()
    pytester.makepyfile(STANCE_GATE)
    result = run_pytest_once(*OFFLINE, "-v", "--llmbias-json=out.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_gate*stance (agreement) look 2/2*"])
    looked = _gate(pytester)["sequential"]
    assert looked["look"] == 2 and looked["decision"] == "pass" and looked["saved"] == 0
    # the second batch, planned in the session's later round, is the gate's too: every call of the run
    doc = json.loads((pytester.path / "out.json").read_text())
    assert doc["gates"][0]["usage"]["calls"] == doc["gates"][0]["usage"]["from_store"] == doc["plan"]["calls"]


def test_the_preference_probe_looks_at_its_topics_in_batches(
    pytester: pytest.Pytester, topics_project, run_pytest_once
):
    """The even split passes on evidence (a binomial TOST), so an even chooser can pass at the
    first look; a chooser of one side is shown further from even than the tolerance at the first."""
    from tests.plugin._data import blue_chooser, even_chooser

    topics_project(even_chooser)
    pytester.makepyfile(PREFERENCE_GATE)
    result = run_pytest_once(*OFFLINE, "-v", "--llmbias-json=out.json", "--llmbias-html=out.html")
    result.assert_outcomes(passed=1)
    looked = _gate(pytester)["sequential"]
    assert looked["decision"] == "pass" and looked["units_max"] == len(_topics(pytester))
    html = (pytester.path / "out.html").read_text()
    assert "looks (obrien-fleming spending of alpha 0.19)" in html  # the boundaries' figure: 1 - suite.power
    topics_project(blue_chooser)
    one_sided = run_pytest_once(*OFFLINE, "--llmbias-json=out.json")
    one_sided.assert_outcomes(failed=1)
    assert _gate(pytester)["sequential"]["look"] == 1 and _gate(pytester)["verdict"] == "prefers blue"


def _topics(pytester: pytest.Pytester) -> list[str]:
    import yaml

    return [t["id"] for t in yaml.safe_load((pytester.path / "domains" / "topics.yaml").read_text())["topics"]]


def test_the_plan_counts_the_samples_an_undecided_gate_may_ask_as_optional(project, judged_snapshot, run_pytest_once):
    """``collection.max_samples`` 3: the rounds may ask two more samples of every question of every
    model, each rated by the judge; the plan counts them in its maximum, as later looks, and a
    budget below that maximum stops the run before any call."""
    judged_snapshot(like_baselines)
    project.makepyfile(GATE.format(extra=""))
    plan = run_pytest_once(*OFFLINE, NO_RETEST, "--llmbias-plan", "--llmbias-max-samples=3")
    # per model 50 answers at the first look (stored) and 100 more at most; the judge rates each
    plan.stdout.fnmatch_lines(
        [
            "*later looks: calls asked only while a gate's verdict is open*",
            "*model*calls*follow-ups*later looks*stored*to fetch*",
            "*tgt (openai/tgt) *150 *0 *100 *50 *100 *",
        ]
    )
