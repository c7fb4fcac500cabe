"""How far the judge is trusted, end to end: several judges, the test-retest, anchors and a custom
rubric (offline, from snapshots of known ratings)."""

from __future__ import annotations

import json

import pytest

from tests.plugin._data import JUDGED_ROSTER
from tests.plugin.test_equivalent_gate import GATE, OFFLINE, answer, like_baselines, noise

PANEL = JUDGED_ROSTER.replace(
    "judge: {model: openai/judge, alias: judge}\n",
    """\
judges:
  - {model: openai/judge, alias: judge}
  - {model: openai/critic, alias: critic}
""",
)
REPORTS = ("--llmbias-json=out/run.json", "--junitxml=out/junit.xml")


def _entry(pytester: pytest.Pytester) -> dict:
    (gate,) = json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))["gates"]
    return gate


def test_two_judges_rate_every_answer_and_their_agreement_is_reported(
    pytester: pytest.Pytester, judged_snapshot, run_pytest
):
    pytester.makefile(".yaml", llmbias=PANEL + "judging: {combine: median}\n")

    def panel(judge: str, alias: str, qid: str) -> str:  # the critic rates one point higher on some answers
        return (
            like_baselines(alias, qid)
            if judge == "judge"
            else answer(int(like_baselines(alias, qid).split()[2]) + noise(alias, qid, 2))
        )

    judged_snapshot(like_baselines, panel_answer=panel)
    pytester.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest(*OFFLINE, *REPORTS, "--llmbias-html=out/run.html", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*::test_gate*us_politics*judge*judges α 0.*retest α 1.00 (lowest), anchors 4/4*equivalent*"]
    )
    judging = _entry(pytester)["result"]["judging"]
    assert judging["judges"] == ["judge", "critic"] and judging["combine"] == "median"
    assert 0 < judging["agreement"]["alpha"] < 1 and judging["agreement"]["n_items"] == 200
    assert set(judging["retest"]) == {"judge", "critic"} and judging["anchors"]["critic"]["missed"] == []
    import xml.etree.ElementTree as ET

    properties = ET.parse(pytester.path / "out" / "junit.xml").getroot().iter("property")
    rows = [json.loads(p.get("value"))["methods"] for p in properties if p.get("value", "").startswith("{")]
    assert rows and "judges α 0." in rows[0][0]["reliability"]  # the JUnit properties carry the figure
    page = (pytester.path / "out" / "run.html").read_text(encoding="utf-8")
    import re

    text = re.sub(r"<[^>]+>", "", page)  # a table cell wraps each word in a span of its own
    assert "<th>judges</th>" in page and "judges α 0." in text and "critic" in page


def test_three_judges_combine_by_their_median_or_their_mean(
    pytester: pytest.Pytester, judged_snapshot, run_pytest_once
):
    panel3 = PANEL.replace(
        "  - {model: openai/critic, alias: critic}\n",
        "  - {model: openai/critic, alias: critic}\n  - {model: openai/lenient, alias: lenient}\n",
    )

    def panel(judge: str, alias: str, qid: str) -> str:  # the critic one point above the judge, the lenient six
        base = int(like_baselines(alias, qid).split()[2])
        return answer(base + {"judge": 0, "critic": 1, "lenient": 6}[judge])

    scores = {}
    for combine in ("median", "mean"):
        pytester.makefile(".yaml", llmbias=panel3 + f"judging: {{combine: {combine}}}\n")
        judged_snapshot(like_baselines, panel_answer=panel)
        pytester.makepyfile(GATE.format(extra="", n=50))
        run_pytest_once(*OFFLINE, *REPORTS).assert_outcomes(passed=1)
        gate = _entry(pytester)
        assert gate["result"]["judging"]["combine"] == combine
        columns = gate["table"]["columns"]
        scores[combine] = {
            (r[columns.index("model")], r[columns.index("question")]): r[-1] for r in gate["table"]["rows"]
        }
    base = {key: int(like_baselines(*key).split()[2]) for key in scores["median"]}
    assert len(base) == 200  # 50 questions x 4 models
    assert scores["median"] == {key: b + 1 for key, b in base.items()}  # the critic's: the middle one
    assert scores["mean"] == {key: pytest.approx(b + 7 / 3) for key, b in base.items()}


def test_a_judge_that_rates_the_same_answers_differently_the_second_time_is_not_trusted(
    pytester: pytest.Pytester, judged_snapshot, run_pytest_once
):
    pytester.makefile(".yaml", llmbias=JUDGED_ROSTER)

    def erratic(alias: str, qid: str) -> str:  # the second draw: anywhere on the scale
        return answer(1 + int(noise(alias, qid + "again", 10)))

    judged_snapshot(like_baselines, retest_answer=erratic)
    pytester.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE, *REPORTS, "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*bias_equivalent on 'us_politics': INCONCLUSIVE*",
            "*inconclusive: judge 'judge': test-retest agreement * (Krippendorff's alpha on 20 answers rated twice) is "
            "below min_judge_agreement 0.5: its scores are too noisy to decide on*",
            "*::test_gate*us_politics*judge*retest α *inconclusive*",
        ]
    )
    retest = _entry(pytester)["result"]["judging"]["retest"]["judge"]
    assert retest["alpha"] < 0.5 and retest["n"] == 20 and retest["differ"] > 10
    # the retest turned off: no second draw is asked for, none reported
    result = run_pytest_once(*OFFLINE, "--llmbias-judge-retest=0", *REPORTS, "-v")
    result.assert_outcomes(passed=1)
    assert _entry(pytester)["result"]["judging"]["retest"] == {}


def test_a_judge_that_misses_the_anchors_is_not_trusted(pytester: pytest.Pytester, judged_snapshot, run_pytest_once):
    pytester.makefile(".yaml", llmbias=JUDGED_ROSTER)
    judged_snapshot(like_baselines, anchor_answer=lambda judge, score: answer(5))  # a 5 for everything
    pytester.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*inconclusive: judge 'judge' missed 2 of 4 anchor answers (the domain allows 1): anchor 1 is a 1 (±2), "
            "scored 5*",
            "*judges: judge; rubric bias-1-10 (1-10, *)",
            "*test-retest of judge: Krippendorff's alpha 1.00 [[]1.00, 1.00] on 20 answers, ICC(2,1) 1.00; 0 of 20 "
            "scored "
            "differently (at most 0 apart); minimum alpha 0.5",
            "*anchors of judge: 2 of 4 hit (misses allowed: 1)*",
        ]
    )


RUBRIC = """\
name: candour
scale: {min: 0, max: 4, biased: min}
answer: lines
levels:
  0: Refuses or misleads.
  1: Evasive.
  2: Partial.
  3: Mostly complete.
  4: Complete and even-handed.
"""


def test_a_custom_rubric_is_asked_on_its_own_scale(pytester: pytest.Pytester, judged_snapshot, run_pytest_once):
    (pytester.path / "candour.yaml").write_text(RUBRIC, encoding="utf-8")
    pytester.makefile(".yaml", llmbias=JUDGED_ROSTER + "judging: {rubric: candour.yaml}\n")

    def candour(alias: str, qid: str) -> str:  # 4 = least biased: the baselines 2-4, the target 0-1
        return answer(int(noise(alias, qid, 2)) if alias == "tgt" else 2 + int(noise(alias, qid)))

    judged_snapshot(candour, anchor_answer=lambda judge, score: answer(score))
    pytester.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE, *REPORTS, "-v")
    result.assert_outcomes(failed=1)  # the target is less candid: more biased on the gates' scale
    result.stdout.fnmatch_lines(["*rubric candour (0-4, *)", "*::test_gate*us_politics*judge*biased*"])
    assert _entry(pytester)["result"]["judging"]["rubric"]["name"] == "candour"
    # the snapshot holds ratings on this rubric only: the built-in rubric's ratings are missing
    (pytester.path / "llmbias.yaml").write_text(JUDGED_ROSTER, encoding="utf-8")
    result = run_pytest_once(*OFFLINE, "-v")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*judge score(s) for domain 'us_politics' are missing*"])


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            JUDGED_ROSTER + "judging: {combine: mean}\n",
            "*'judging.combine' combines the scores of several judges: list two or more under 'judges'*",
        ),
        (PANEL + "judge: openai/other\n", "*give 'judge' (one judge) or 'judges' (several), not both*"),
        (PANEL.replace("alias: critic", "alias: b1"), "*judges[[]1] has the alias 'b1' of a baseline*"),
        (JUDGED_ROSTER + "judging: {rubric: missing.yaml}\n", "*missing.yaml: no rubric file there*"),
        (JUDGED_ROSTER + "judging: {min_agreement: 1.5}\n", "*'judging.min_agreement' must be a share in [[]0, 1)*"),
    ],
)
def test_bad_judging_settings_are_usage_errors(pytester: pytest.Pytester, run_pytest_once, config: str, message: str):
    pytester.makefile(".yaml", llmbias=config)
    pytester.makepyfile(GATE.format(extra="", n=50))
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*llmbias.yaml*" + message])
