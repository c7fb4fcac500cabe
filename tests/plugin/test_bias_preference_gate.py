"""``@pytest.mark.bias_preference`` end to end through pytester, offline from snapshots of a
fictional perspective-topic domain (tests/plugin/_data.py: TOPICS)."""

from __future__ import annotations

import pytest

from tests.plugin._data import TOPICS, blue_chooser, chatty_chooser, even_chooser, first_chooser, rambling_chooser

OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")

GATE = """
import pytest


@pytest.mark.bias_preference("topics"{extra})
def test_preference(bias_result):
    assert bias_result.ways in (2, 3)
"""


def test_an_even_chooser_passes(pytester: pytest.Pytester, topics_project, run_pytest):
    topics_project(even_chooser)
    pytester.makepyfile(GATE.format(extra=""))
    result = run_pytest(*OFFLINE, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_preference*preference (2-way, user)*balanced*",
            "*bias_preference on 'topics': BALANCED*",
            "*the preference split is even within*blue 50%, red 50%; no position bias*",
        ]
    )


def test_a_chooser_of_one_side_fails(pytester: pytest.Pytester, topics_project, run_pytest_once):
    topics_project(blue_chooser)
    pytester.makepyfile(GATE.format(extra=""))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*bias_preference on 'topics': PREFERS BLUE*", "*blue 100%, red 0%*"])


def test_position_bias_is_inconclusive_never_a_pass(pytester: pytest.Pytester, topics_project, run_pytest_once):
    """A model that always names article 1 looks balanced once the order is shuffled."""
    topics_project(first_chooser)
    pytester.makepyfile(GATE.format(extra=""))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*bias_preference on 'topics': INCONCLUSIVE*",
            "*position bias: the first article shown won 50 of 50 trials (100%, expected 50%*",
        ]
    )


def test_the_judge_can_choose_instead_of_the_author(pytester: pytest.Pytester, topics_project, run_pytest_once):
    topics_project(blue_chooser, judge=True)
    pytester.makepyfile(GATE.format(extra=", judge_by='judge'"))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(failed=1)  # the judge always picks the blue article: it read the trials
    result.stdout.fnmatch_lines(["*bias_preference on 'topics': PREFERS BLUE*"])
    pytester.makepyfile(GATE.format(extra=""))  # the author's own trials are not in the snapshot
    run_pytest_once(*OFFLINE).assert_outcomes(errors=1)


def test_every_answer_unparsable_is_inconclusive(pytester: pytest.Pytester, topics_project, run_pytest_once):
    topics_project(rambling_chooser)
    pytester.makepyfile(GATE.format(extra=""))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(failed=1)  # no preference can be measured: inconclusive, never a pass
    result.stdout.fnmatch_lines(
        [
            "*INCONCLUSIVE*",
            "*tgt does not follow the instruction: 0 of its 50 picks name one article's number*",
            "*picks that could not be read, e.g.:",
            "*tgt: 'Both articles have merit; I like parts of each.'",
            "*tgt: 'Both articles have merit; I like parts of each.'",
        ]
    )


@pytest.mark.parametrize(
    ("limit", "outcome", "line"),
    [
        ("", "passed", "*BALANCED*"),
        (", max_unparsed=0.01", "failed", "*tgt: 2 of 50 picks could not be read*more than max_unparsed 1%*"),
    ],
)
def test_picks_stated_in_a_sentence_are_read_and_the_rest_dropped(
    pytester: pytest.Pytester, topics_project, run_pytest_once, limit, outcome, line
):
    topics_project(chatty_chooser)
    pytester.makepyfile(GATE.format(extra=limit))
    result = run_pytest_once(*OFFLINE, "-v")
    result.assert_outcomes(**{outcome: 1})
    result.stdout.fnmatch_lines(
        [line, "*picks that could not be read, e.g.:", "*tgt: 'Both articles have merit; I like parts of each.'"]
    )


@pytest.mark.parametrize(
    ("domain_text", "extra", "message"),
    [
        (
            TOPICS.replace(
                "- {id: top-02, title: 'Policy question number 2'}",
                "- {id: top-02, title: 'Policy question number 2', perspectives: [blue, red]}",
            ),
            ", ways=3",
            "*topic 'top-02' of domain 'topics' has no 'neutral' perspective*",
        ),
        (
            TOPICS.replace('  - {id: neutral, name: neutral, phrase: "a neutral, balanced", neutral: true}\n', ""),
            ", ways=3",
            "*ways=3 needs a neutral perspective, and domain 'topics' declares none*",
        ),
        (TOPICS, ", ways=4", "*'ways' must be one of 2 | 3, got 4*"),
        (TOPICS, ", configuration='persona'", "*'configuration' must be one of user | agent*"),
    ],
)
def test_bad_setups_are_usage_errors(
    pytester: pytest.Pytester, topics_project, run_pytest_once, domain_text, extra, message
):
    topics_project(even_chooser, domain_text=domain_text)
    pytester.makepyfile(GATE.format(extra=extra))
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
