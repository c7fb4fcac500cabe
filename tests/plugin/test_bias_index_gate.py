"""``@pytest.mark.bias_index`` end to end through pytester, offline from snapshots of a fictional
three-dimension domain (tests/plugin/_data.py: DIMS)."""

from __future__ import annotations

import json

import pytest

from tests.plugin._data import loaded_on

OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")

GATE = """
import pytest


@pytest.mark.bias_index("dims"{extra})
def test_index(bias_result):
    assert bias_result.n_prompts == 24
"""


def test_a_target_like_its_baselines_passes(pytester: pytest.Pytester, dims_project, run_pytest):
    dims_project()
    pytester.makepyfile(GATE.format(extra=""))
    result = run_pytest(*OFFLINE, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_index*index (relative)*paired; false alarm*no-worse*",
            "*bias_index on 'dims': NO-WORSE*",
            "*speech*2*",  # the dimension table, with the domain's weight
            "*index = sum(w_i x B_i) / 3 + P(D) + 1.5 x S*",
        ]
    )


def test_a_target_loaded_on_one_dimension_fails_naming_its_prompts(
    pytester: pytest.Pytester, dims_project, run_pytest_once
):
    dims_project(loaded_on("faith"))
    pytester.makepyfile(GATE.format(extra=""))
    result = run_pytest_once(*OFFLINE, "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            # BIASED at one look; WORSE where the looks over samples each take a fifth of the error
            "*bias_index on 'dims': [WB][OI][RA]S* (target tgt vs baselines b1, b2, b3; 24 prompts x 1 sample(s); "
            "feature 'sentiment')*",
            "*faith*",
            "*prompts contributing most to the target's index (beyond the baselines):*",
            "*fai-*(faith): 2.7* vs 0.*'On fai-*: this topic is *.'*",
        ]
    )
    row = json.loads(next(v for k, v in _properties(pytester.path / "junit.xml") if k == "llmbias"))
    assert [m["method"] for m in row["methods"]] == ["index (relative)"]
    assert row["methods"][0]["verdict"] in ("biased", "worse")


def _properties(path):
    import xml.etree.ElementTree as ET

    return [(p.get("name"), p.get("value")) for p in ET.parse(path).iter("property")]


@pytest.mark.parametrize(("bound", "outcome"), [(5.0, "passed"), (0.4, "failed")])
def test_absolute_mode_checks_a_bound_with_confidence(
    pytester: pytest.Pytester, dims_project, run_pytest_once, bound, outcome
):
    dims_project(loaded_on("work"), roster="target: {model: openai/tgt, alias: tgt}\n")
    pytester.makepyfile(GATE.format(extra=f", relative=False, max_index={bound}"))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(
            [
                "*bias_index on 'dims': ABOVE BOUND*",
                "*[[]absolute[]] verdict: above bound  (H0: index <= max_index 0.4)*",
                "*95% lower bound*",
            ]
        )


def test_a_pass_only_for_want_of_evidence_says_so_and_strict_fails_it(
    pytester: pytest.Pytester, dims_project, run_pytest_once
) -> None:
    # the index is about 1.50, its 95% interval about [1.36, 1.64] over 24 prompts
    dims_project(loaded_on("work"), roster="target: {model: openai/tgt, alias: tgt}\n")
    pytester.makepyfile(
        GATE.format(extra=", relative=False, max_index=1.55")
        + GATE.format(extra=", relative=False, max_index=5.0").replace("def test_index", "def test_far")
    )
    result = run_pytest_once(*OFFLINE, "-v", "--llmbias-json=run.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*[[]absolute[]] verdict: not shown biased (underpowered)  (H0: index <= max_index 1.55)*",
            "*not shown biased (underpowered): power *% to catch an index 0.08 above max_index; * prompts would give "
            "80%;"
            " --llmbias-strict would fail it*",
        ]
    )
    gates = {g["test"].split("::")[-1]: g for g in json.loads((pytester.path / "run.json").read_text())["gates"]}
    # the interval lies under 5.0: the index is shown within the bound, which is evidence, not its absence
    assert gates["test_far"]["verdict"] == "within bound"
    near = gates["test_index"]["result"]["reliability"]["absolute"]
    assert gates["test_index"]["verdict"] == "not shown biased (underpowered)"
    assert near["underpowered"] and near["power"] < 0.8 and near["prompts_needed"] > 24
    strict = run_pytest_once(*OFFLINE, "--llmbias-strict")
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(["*--llmbias-strict fails an underpowered pass*"])


def test_lexical_penalty_and_weights_reach_the_report(pytester: pytest.Pytester, dims_project, run_pytest_once):
    dims_project()
    pytester.makepyfile(GATE.format(extra=", diversity_penalty='lexical', weights={'work': 3.0}"))
    result = run_pytest_once(*OFFLINE, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*speech*2*", "*work*3*", "*P(D)*"])
    result.stdout.no_fnmatch_line("*P(D)      *0.2000*")  # the lexical penalty, not the constant


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ", weights={'speach': 1.0}",
            "*a weight for 'speach', which is not a bias dimension of domain 'dims'; dimensions: speech, work, faith*",
        ),
        (", weights={'work': -1.0}", "*weights[[]'work'[]] must be a positive number, got -1.0*"),
        (", diversity_penalty='corpus'", "*diversity_penalty must be a number or 'lexical', got 'corpus'*"),
        (", relative=False", "*relative=False needs a bound: give max_index=*"),
    ],
)
def test_bad_arguments_are_usage_errors(pytester: pytest.Pytester, dims_project, run_pytest_once, extra, message):
    dims_project()
    pytester.makepyfile(GATE.format(extra=extra))
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_dimension_without_responses_is_an_error_never_a_pass(
    pytester: pytest.Pytester, dims_project, run_pytest_once
):
    dims_project(skip=tuple(f"fai-{i}" for i in range(1, 9)))
    pytester.makepyfile(GATE.format(extra=""))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*response(s) for domain 'dims' are missing*", "*fai-1*"])
