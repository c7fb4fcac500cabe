"""The bias_equivalent gate end to end (judge method, offline from snapshots).

Tests of what pytest-xdist changes (the results table, the failure report, warnings, a setup
error, a usage error, conftest hooks, the shared store) take ``run_pytest`` and run twice, serially
and under ``-n 2``; variants that differ only in the statistics or in an error's words take
``run_pytest_once`` (an error is raised in a worker and reported the same way whatever it says:
too few baselines stand for every usage error, and ``test_impact_ratio_gate.py``'s
missing answers for every setup error).
"""

from __future__ import annotations

import hashlib

import pytest

from tests.plugin._data import JUDGED_ROSTER

GATE = """
import pytest

@pytest.mark.bias_equivalent("us_politics", method="judge"{extra})
def test_gate(bias_result):
    assert bias_result.n_questions == {n}
"""


def noise(alias: str, qid: str, spread: int = 3) -> int:
    return int(hashlib.sha256(f"{alias}/{qid}".encode()).hexdigest(), 16) % spread


def answer(score: int) -> str:
    return f"Bias Score: {score}\nExplanation: illustrative."


# Baselines rate 1-3, 2-4 and 1-3 (means about 2, 3, 2): a margin of about 1.6 at k = 2.81.
BASE = {"b1": 1, "b2": 2, "b3": 1}


def like_baselines(alias: str, qid: str) -> str:
    return answer(BASE.get(alias, 1) + noise(alias, qid))


def biased_target(alias: str, qid: str) -> str:
    return answer(8 + noise(alias, qid) if alias == "tgt" else BASE[alias] + noise(alias, qid))


#: every run is offline, from the snapshot the test wrote
OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".yaml", llmbias=JUDGED_ROSTER)
    return pytester


def test_a_target_like_the_baselines_passes(project: pytest.Pytester, judged_snapshot, run_pytest):
    judged_snapshot(like_baselines)
    project.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest(*OFFLINE, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test*domain*method*target*baselines*bound*p*verdict*", "*::test_gate*us_politics*judge*equivalent*"]
    )


def test_a_biased_target_fails_with_the_paper_style_table(project: pytest.Pytester, judged_snapshot, run_pytest):
    judged_snapshot(biased_target)
    project.makepyfile(GATE.format(extra="", n=50))
    # one look: the TOST's own 62 % interval (looks over samples each take a fifth of the error)
    result = run_pytest(*OFFLINE, "-v", "--llmbias-max-samples=1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*bias_equivalent on 'us_politics': BIASED (target tgt vs baselines b1, b2, b3; 50 questions x 1 "
            "sample(s))*",
            "*[[]judge] verdict: biased*",
            "*mean target*mean baselines*",
            "*difference*margin delta*",
            "*SE*df*",
            "*t lower*p lower*",
            "*t upper*p upper*",
            "*62% CI of the difference*",
            "*category*tgt*b1*b2*b3*",
            "*gun_policy*",
            "*D_LLM*",
            "*reliability: a target like its comparator fails about*(designed for <=5%, power 80%)*",
        ]
    )
    result.stdout.fnmatch_lines(["*::test_gate*us_politics*judge*biased*"])


def test_an_inconclusive_gate_fails_and_says_how_many_questions_would_do(
    project: pytest.Pytester, judged_snapshot, run_pytest_once
):
    # one category (10 questions), a target slightly off: neither inside nor outside the margin
    def slightly_off(alias, qid):
        return answer(BASE.get(alias, 2) + noise(alias, qid) + (1 if alias == "tgt" and noise(alias, qid, 2) else 0))

    judged_snapshot(slightly_off, categories=("gun_policy",))
    # the Welch test (the paired default is powerful enough to call this target biased)
    # (compared with the population of baselines: against their mean it is shown off, and fails)
    project.makepyfile(
        GATE.format(extra=", categories=['gun_policy'], test='welch', k=2.81, reference='population'", n=10)
    )
    # an underpowered verdict passes without --llmbias-strict; one look (five would each take a fifth)
    result = run_pytest_once(*OFFLINE, "--llmbias-strict", "--llmbias-max-samples=1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*NOT SHOWN BIASED (UNDERPOWERED)*",
            "*underpowered: the 62% CI straddles +/-delta, and the difference is not shown at the "
            "false-alarm level 5%; about * questions (or questions x samples) would size the design; "
            "--llmbias-strict fails it*",
        ]
    )


def test_min_margin_and_fixed_margin(project: pytest.Pytester, judged_snapshot, run_pytest_once):
    judged_snapshot(biased_target)
    project.makepyfile(GATE.format(extra=", margin=10.0", n=50))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(passed=1)
    project.makepyfile(GATE.format(extra=", min_margin=10.0", n=50))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(passed=1)


def test_an_unstable_gate_warns_with_remedies(project: pytest.Pytester, judged_snapshot, run_pytest):
    # baselines that agree exactly on their means: margin ~0 -> identical-means error or instability
    def close(alias, qid):
        return answer(2 + noise(alias, qid))

    judged_snapshot(close)
    # the paper's procedure (Welch, k = 2.81, no floor): the default floor would keep it stable
    project.makepyfile(GATE.format(extra=", test='welch', k=2.81, min_margin=0", n=50))
    result = run_pytest(*OFFLINE)
    result.stdout.fnmatch_lines(
        [
            "*warnings summary*",
            "*LLMBiasWarning: us_politics: judge: underpowered design: 50 items give a target worse by the margin*",
        ]
    )


def test_an_unreadable_judge_answer_is_re_asked_then_dropped(project: pytest.Pytester, judged_snapshot, run_pytest):
    def broken(alias, qid):
        return (
            "I would rather not give a number." if (alias, qid) == ("b2", "us-gun-03") else like_baselines(alias, qid)
        )

    judged_snapshot(broken)  # offline, the re-ask cannot be made: the data is missing
    project.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest(*OFFLINE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*judge score(s) for domain 'us_politics' are missing (offline mode*", "*judge: judge:b2:us-gun-03*"]
    )

    judged_snapshot(broken, reasks=2)  # every re-ask answered the same way: 1 of b2's 50 unread
    result = run_pytest(*OFFLINE, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*judge answers read: label 199; 0 after a re-ask, 1 unread*",
            "*dropped for every model (1 question(s) with an unreadable rating): us-gun-03*",
            "*unread: 'I would rather not give a number.'*",
        ]
    )


def test_more_unreadable_answers_than_allowed_is_inconclusive(
    project: pytest.Pytester, judged_snapshot, run_pytest_once
):
    def chatty(alias, qid):
        return "It depends." if alias == "b1" and qid.endswith(("1", "2")) else like_baselines(alias, qid)

    judged_snapshot(chatty, reasks=2)  # 10 of b1's 50 ratings unreadable: 20 %
    project.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*INCONCLUSIVE*",
            "*inconclusive: judge 'judge': 10 of 50 ratings of b1's answers stayed unreadable after the re-asks (20%), "
            "more than max_unparsed 10%*",
            "*unread: 'It depends.'*",
        ]
    )
    project.makepyfile(GATE.format(extra=", max_unparsed=0.25", n=50))
    run_pytest_once(*OFFLINE).assert_outcomes(passed=1)  # allowed: decided on the other 40 questions


def test_a_judge_that_never_follows_the_rubric_is_not_asked_again(
    project: pytest.Pytester, judged_snapshot, run_pytest_once
):
    judged_snapshot(lambda alias, qid: "The response continues: and then the people went home.")
    project.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE)  # offline: no re-ask was ever stored, yet nothing is "missing"
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*inconclusive: judge 'judge' does not follow the rubric: 0 of 200 answers readable (for example "
            "'The response continues*",
            "*judge answers read: none; 0 after a re-ask, 200 unread*",  # the same answers counted alike
        ]
    )


def test_a_missing_judge_answer_offline_fails_naming_it(project: pytest.Pytester, judged_snapshot, run_pytest_once):
    judged_snapshot(like_baselines, skip_judge={("tgt", "us-imm-04")})
    project.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*1 judge score(s) for domain 'us_politics' are missing (offline mode*", "*judge:tgt:us-imm-04*"]
    )


def test_a_judge_that_gives_every_answer_one_score_is_named(project: pytest.Pytester, judged_snapshot, run_pytest_once):
    judged_snapshot(lambda alias, qid: answer(1))
    project.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*judge 'judge' gave every one of the 200 answers the same score (1): it cannot tell them apart*"]
    )


def test_fewer_than_two_baselines_is_a_usage_error(pytester: pytest.Pytester, run_pytest):
    pytester.makefile(".yaml", llmbias="target: openai/tgt\nbaselines: [openai/b1]\njudge: openai/judge\n")
    pytester.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*1 baseline model(s) configured*at least 2 needed*"])


def test_the_judge_method_needs_a_judge(pytester: pytest.Pytester, run_pytest_once):
    pytester.makefile(".yaml", llmbias="target: openai/tgt\nbaselines: [openai/b1, openai/b2]\n")
    pytester.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the judge method needs a judge model*"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (", method='vibes'", "*'method' must be one of embedding | judge | both*"),
        (", k=-1", "*'k' must be a positive number*"),
        (", alpha=0.7", "*'alpha' must be below 0.5*"),
        (", margin='wide'", "*'margin' must be a positive number*"),
        (", test='t'", "*'test' must be one of paired | welch*"),
        (", alternative='less'", "*'alternative' must be one of equivalent | no-worse*"),
        (", margin={'vibes': 1.0}", "*'margin' maps a method to a number; methods: embedding, judge*"),
        (
            ", delta=1",
            "*unknown argument 'delta'; accepted: domain, method, test, alternative, k, alpha, margin, min_margin, "
            "false_alarm, reference, clustered, categories, samples*",
        ),
    ],
)
def test_bad_gate_arguments_are_usage_errors(project: pytest.Pytester, run_pytest_once, extra, message):
    source = GATE.format(extra=extra, n=50)
    if "method=" in extra:  # in place of the judge method, not a second method= keyword
        source = source.replace('method="judge"' + extra, extra.lstrip(", "))
    project.makepyfile(source)
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_the_gate_table_is_merged_across_xdist_workers(project: pytest.Pytester, judged_snapshot, run_pytest_once):
    judged_snapshot(biased_target)
    project.makepyfile(test_one=GATE.format(extra="", n=50), test_two=GATE.format(extra=", margin=10.0", n=50))
    result = run_pytest_once(*OFFLINE, "-n", "2", "-p", "xdist", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test*domain*method*target*baselines*bound*p*verdict*",
            "*test_one.py::test_gate*us_politics*judge*biased*",
            "*test_two.py::test_gate*us_politics*judge*equivalent*",
        ]
    )


def test_a_judge_that_is_also_in_the_roster_draws_a_warning(pytester: pytest.Pytester, judged_snapshot, run_pytest):
    pytester.makefile(
        ".yaml",
        llmbias=JUDGED_ROSTER.replace(
            "judge: {model: openai/judge, alias: judge}", "judge: {model: openai/b3, alias: judge}"
        ),
    )
    judged_snapshot(like_baselines)
    pytester.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest(*OFFLINE)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*LLMBiasWarning: us_politics: judge: the judge openai/b3 is also in the roster*"])


def test_the_summary_fits_a_terminal_and_follows_the_verbosity(
    project: pytest.Pytester, judged_snapshot, run_pytest_once
):
    """By default one table in 100 columns and the collection line once; -q: only the gates that
    did not pass and the one-line figure; -v: every figure."""
    judged_snapshot(biased_target)
    project.makepyfile(
        GATE.format(extra="", n=50)
        + """

@pytest.mark.bias_equivalent("us_politics", method="judge", margin=10.0)
def test_a_very_long_test_name_that_would_not_fit_in_a_table_of_one_hundred_columns_at_all(bias_result):
    pass
"""
    )
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(passed=1, failed=1)
    # pytest's own short summary is not ours to shorten (it is never cut when $CI is set)
    section = result.stdout.str().split(" llmbias ")[-1].split("short test summary info")[0].splitlines()
    assert section and all(len(line) <= 100 for line in section), [line for line in section if len(line) > 100]
    assert sum("llmbias: 424 calls" in line for line in result.stdout.lines) == 1  # printed once
    # printed in the middle of the file's results, which go on under it: the file's name once
    name = "test_the_summary_fits_a_terminal_and_follows_the_verbosity.py "
    assert sum(line.startswith(name) for line in result.stdout.lines) == 1, result.stdout.str()
    result.stdout.fnmatch_lines([name, "llmbias: 424 calls*", "[.F][.F] *[[]100%[]]"], consecutive=True)
    result.stdout.fnmatch_lines(
        [
            "test*method*p*verdict",
            "…*_one_hundred_columns_at_all  *judge*equivalent",  # its start elided, its function's end kept
            "test_gate*judge*biased",
            "(-v: every figure*",
            "llmbias: 2 gates: 1 passed, 1 failed",  # counted once each, as every report counts them
        ]
    )
    quiet = run_pytest_once(*OFFLINE, "-q")
    assert "equivalent" not in quiet.stdout.str().split("short test summary")[0].split("llmbias")[-1]
    quiet.stdout.fnmatch_lines(["test*method*p*verdict", "test_gate*judge*biased", "llmbias: 2 gates: *"])
    verbose = run_pytest_once(*OFFLINE, "-v")
    verbose.stdout.fnmatch_lines(["*test*domain*method*target*baselines*bound*p*reliability*verdict*"])


def test_the_plan_says_before_a_call_when_the_baselines_disagree_by_more_than_the_margin(
    project: pytest.Pytester, judged_snapshot, run_pytest_once
):
    # baselines rated about 2, 4 and 6: their means span four judge points, the margin is one
    def spread(alias: str, qid: str) -> str:
        return answer({"b1": 1, "b2": 3, "b3": 5}.get(alias, 1) + noise(alias, qid))

    judged_snapshot(spread)
    project.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE, "--llmbias-plan")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*::test_gate *the baselines' means span *, more than the margin 1: their mean is a loose reference*"]
    )
    assert "--llmbias-record-release" in result.stdout.str()
