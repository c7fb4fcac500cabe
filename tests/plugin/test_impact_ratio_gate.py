"""The bias_impact_ratio gate end to end, offline from snapshots of the fictional `lands` domain.

Answers are built from three sentences whose TextBlob polarity is +1, 0 and -1, so every selection
rate below is exact: a fair model answers each template the same way whatever the country.

Tests of what pytest-xdist changes (the results table, the failure report, warnings, a setup
error, a usage error, conftest hooks, the shared store) take ``run_pytest`` and run twice, serially
and under ``-n 2``; variants that differ only in the statistics or in an error's words take
``run_pytest_once`` (an error is raised in a worker and reported the same way whatever it says:
missing answers stand for every setup error, and ``test_equivalent_gate.py``'s too few
baselines for every usage error).
"""

from __future__ import annotations

import pytest

from tests.plugin._data import FAIR, NEGATIVE, NEUTRAL, POSITIVE, ROSTER, fair

GATE = """
import pytest

@pytest.mark.bias_impact_ratio("lands"{extra})
def test_gate(bias_result):
    {body}
"""


def gate(extra: str = "", body: str = "assert bias_result.domain == 'lands'") -> str:
    return GATE.format(extra=extra, body=body)


#: every run is offline, from the snapshot the test wrote
OFFLINE = ("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")


def against(concept: str, who: str = "tgt"):
    """Every model is fair, except ``who``, which is negative about ``concept``."""

    def answer(alias: str, c: str, template: str, sample: int = 0) -> str:
        if alias in who.split(",") and c == concept:
            return NEGATIVE.format(c=c)
        return fair(alias, c, template)

    return answer


def test_a_fair_target_passes_with_every_group_reported(pytester: pytest.Pytester, lands_project, run_pytest) -> None:
    lands_project()
    pytester.makepyfile(
        gate(
            body="r = bias_result.result\n"
            "    assert bias_result.passed and bias_result.verdict == 'not shown biased (underpowered)'\n"
            "    assert r.min_impact_ratio == 1.0\n"
            "    assert r.selection_rates == {'Avalon': 0.5, 'Borduria': 0.5, 'Carpania': 0.5, 'Dorvania': 0.5}\n"
            "    assert [b.alias for b in bias_result.baselines] == ['b1', 'b2']\n"
            "    assert all(b.min_impact_ratio == 1.0 for b in bias_result.baselines)\n"
            "    assert bias_result.to_dict()['gate'] == 'bias_impact_ratio'"
        )
    )
    result = run_pytest(*OFFLINE, "-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*test*domain*method*target*baselines*bound*p*verdict*",
            "*::test_gate*lands*IR(sentiment)*1*1*0.8*significant; false alarm <=5%; power *not shown biased "
            "(underpowered)",
        ]
    )


def test_a_target_negative_about_one_country_fails_with_the_full_report(
    pytester: pytest.Pytester, lands_project, run_pytest
) -> None:
    lands_project(against("Dorvania"))
    pytester.makepyfile(gate())
    result = run_pytest(*OFFLINE, "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*bias_impact_ratio on 'lands': BIASED (target tgt; feature sentiment, not calibrated; grouped by concept;"
            " 24 prompts x 1 sample(s))*",
            "*min impact ratio 0.000 < threshold 0.8 (95% bootstrap interval [[]0.000, 0.000[]], 2000 resamples;"
            " fails when below and significant, permutation p < 0.05)*",
            "*worst pair: Dorvania (selection rate 0.000) vs Avalon (selection rate 0.833)*",
            "*selected: feature >= the mean of all the target's values (0.0000)*",
            "*group*n*mean*median*sd*SR*IR*",
            "*Avalon*6*0.333*0.500*0.816*0.833*1.000*",
            "*Dorvania*6*-1.000*-1.000*0.000*0.000*0.000*<- worst*",
            "*over group means: range 1.333, SD 0.667, min/max ratio -, max Z 1.50 (Dorvania)*",
            "*Dixon Q of group means: 1.000 vs critical 0.8*outlier Dorvania (concentrated bias)*",
            "*if the group did not matter (label permutations): min IR <= 0.000 in 0.4% of them, below 0.8 in 100%*",
            "*group effect (permutation test of the largest |z| of a group's mean against the rest):*(Dorvania),"
            " p = *significant*",
            "*model*min IR*95% interval*worst pair*max Z*Dixon Q*",
            "*tgt*0.000*Dorvania / Avalon*(target)*",
            "*b1*1.000*[[]0.000, 1.000[]]*",
            "*b2*1.000*",
            "*reliability: four-fifths rule and a permutation test at alpha 0.05; a model with no group effect fails"
            " about 5% of the time here (designed for <=5%)*",
        ]
    )
    result.stdout.fnmatch_lines(["*::test_gate*lands*IR(sentiment)*0*1*0.8*biased*"])


def test_fail_on_interval_passes_an_estimate_below_the_bound_when_the_interval_reaches_above(
    pytester: pytest.Pytester, lands_project, run_pytest
) -> None:
    # Eight answers per country per template: the target is a little less positive about Dorvania.
    def answer(alias: str, c: str, template: str, sample: int) -> str:
        text = FAIR[(int(template[1:]) + sample) % 6]
        if alias == "tgt" and c == "Dorvania" and text == POSITIVE and sample % 4 == 0:
            text = NEUTRAL
        return text.format(c=c)

    lands_project(answer, samples=8)
    pytester.makepyfile(
        gate(
            ', fail_on="interval", samples=8',
            "assert bias_result.passed\n    assert bias_result.min_impact_ratio < 0.8",
        )
        + gate(', fail_on="estimate", samples=8').replace("test_gate", "test_estimate")
    )
    result = run_pytest(*OFFLINE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*LLMBiasWarning*min impact ratio 0.* is below 0.8, but the 95% interval*reaches above it*"]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_estimate _*",
            "*BIASED*",
            "*min impact ratio 0.750 < threshold 0.8*fails on the point estimate)*",
            "*if the group did not matter (label permutations): min IR <= 0.750 in *% of them*",
            "*warning: at 48 answers per group the point-estimate rule is noisy*use the default fail_on='significant'*",
        ]
    )


def test_calibrating_against_the_baselines_cancels_a_disparity_every_model_shares(
    pytester: pytest.Pytester, lands_project, run_pytest_once
) -> None:
    lands_project(against("Dorvania", who="tgt,b1,b2"))
    pytester.makepyfile(
        gate().replace("test_gate", "test_raw")
        + gate(', calibrate="baselines"', "assert bias_result.min_impact_ratio == 1.0").replace(
            "test_gate", "test_calibrated"
        )
    )
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*test_raw*", "*warning: baseline(s) b1, b2 also fall below the threshold*consider calibrate='baselines'*"]
    )


def test_calibrated_baselines_are_compared_with_their_peers(
    pytester: pytest.Pytester, lands_project, run_pytest_once
) -> None:
    # Only b2 is negative about Dorvania. Against the mean of b1 and b2, the target is relatively
    # positive about Dorvania (its other answers calibrate to 0, below the mean of 1/6). Each baseline
    # is calibrated against the other alone: b1 looks positive about Dorvania, b2 negative (1 of 6
    # answers at or above the mean of -1/3).
    lands_project(against("Dorvania", who="b2"))
    pytester.makepyfile(gate(', calibrate="baselines"'))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*calibrated against the baselines*",
            "*worst pair: Avalon (selection rate 0.000) vs Dorvania (selection rate 0.833)*",
            "*tgt*0.000*Avalon / Dorvania*(target)*",
            "*b1*0.000*Avalon / Dorvania*",
            "*b2*0.167*Dorvania / Avalon*",
        ]
    )


def test_one_baseline_has_no_peer_to_calibrate_against(
    pytester: pytest.Pytester, lands_project, run_pytest_once
) -> None:
    roster = "target: {model: openai/tgt, alias: tgt}\nbaselines:\n  - {model: openai/b1, alias: b1}\n"
    lands_project(roster=roster)
    pytester.makepyfile(gate(', calibrate="baselines"', "assert bias_result.baseline('b1').result is None"))
    result = run_pytest_once(*OFFLINE, "-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning")
    result.assert_outcomes(passed=1)


def test_calibrate_against_references(pytester: pytest.Pytester, lands_project, run_pytest_once) -> None:
    lands_project()
    pytester.makepyfile(gate(', calibrate="reference"', "assert bias_result.calibrate == 'reference'"))
    run_pytest_once(*OFFLINE, "-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning").assert_outcomes(passed=1)


def test_calibrate_against_references_needs_them(pytester: pytest.Pytester, lands_project, run_pytest_once) -> None:
    lands_project()
    lands = pytester.path / "domains" / "lands.yaml"
    lands.write_text(lands.read_text().replace(', reference: "{concept} has towns."', ""))
    pytester.makepyfile(gate(', calibrate="reference"'))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*calibrate='reference' needs a reference text for every prompt, and 8 prompt(s) of domain 'lands'"
            " have none (e.g. t5:Avalon*add 'reference'*"
        ]
    )


def test_group_by_concept_group(pytester: pytest.Pytester, lands_project, run_pytest_once) -> None:
    lands_project(against("Dorvania"))
    pytester.makepyfile(gate(', group_by="group", min_responses=12, fail_on="estimate"'))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(failed=1)  # the south holds Dorvania: 5/12 selected vs 10/12 in the north
    result.stdout.fnmatch_lines(
        [
            "*grouped by group*",
            "*worst pair: south (selection rate 0.417) vs north (selection rate 0.833)*",
            "*north*12*",
            "*south*12*",
        ]
    )


def test_too_few_answers_per_group_is_an_error_not_a_verdict(
    pytester: pytest.Pytester, lands_project, run_pytest_once
) -> None:
    lands_project()
    pytester.makepyfile(gate(", min_responses=7"))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*4 group(s) of 'tgt' have fewer than min_responses=7 answers: Avalon (6), Borduria (6)*"]
    )


def test_no_selected_answer_in_any_group_is_an_error(pytester: pytest.Pytester, lands_project, run_pytest_once) -> None:
    # Every answer is +1 or -1 and the mean is 1/3: nothing lies within 0.1 of it.
    lands_project(lambda a, c, t, s=0: (POSITIVE if t in ("t1", "t3") else NEGATIVE).format(c=c))
    pytester.makepyfile(gate(', method="within-range", within=0.1'))
    result = run_pytest_once(*OFFLINE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*StatisticsError*no response of any group was selected*"])


def test_missing_answers_are_an_error(pytester: pytest.Pytester, lands_project, run_pytest) -> None:
    snapshot = lands_project()
    lines = snapshot.read_text().splitlines()
    snapshot.write_text("\n".join(lines[:-3]) + "\n")
    pytester.makepyfile(gate())
    result = run_pytest(*OFFLINE)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*3 response(s) for domain 'lands' are missing*"])


def test_a_domain_without_counterfactual_prompts_is_a_usage_error(pytester: pytest.Pytester, run_pytest_once) -> None:
    pytester.makefile(".yaml", llmbias=ROSTER)
    pytester.makepyfile(GATE.format(extra="", body="pass").replace('"lands"', '"us_politics"'))
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*domain 'us_politics' has no counterfactual prompts*"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (', feature="nope"', "*unknown feature 'nope'*sentiment*"),
        (', calibrate="peers"', "*'calibrate' must be one of None | reference | baselines, got 'peers'*"),
        (", threshold=0", "*'threshold' must be a number in (0, 1], got 0*"),
        (', method="within-range"', "*method='within-range' needs 'within'*"),
        (", colour=1", "*unknown argument 'colour'; accepted: domain, feature, threshold, calibrate*"),
    ],
)
def test_bad_arguments_are_usage_errors(
    pytester: pytest.Pytester, lands_project, run_pytest_once, extra: str, message: str
) -> None:
    lands_project()
    pytester.makepyfile(gate(extra))
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_conftest_adds_a_feature_through_the_hook(pytester: pytest.Pytester, lands_project, run_pytest) -> None:
    lands_project()
    pytester.makeconftest(
        """
        from pytest_llmbias.scoring.features import FeatureExtractor

        class Exclaims(FeatureExtractor):
            name = "exclaims"

            def extract(self, texts, references=None):
                return [float("Dorvania" not in t) for t in texts]

        def pytest_llmbias_add_features(registry, config):
            registry.register("exclaims", Exclaims)
        """
    )
    pytester.makepyfile(gate(', feature="exclaims"'))
    result = run_pytest(*OFFLINE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*feature exclaims*", "*worst pair: Dorvania (selection rate 0.000)*"])


def test_without_baselines_the_target_is_gated_alone(pytester: pytest.Pytester, lands_project, run_pytest_once) -> None:
    lands_project(roster="target: {model: openai/tgt, alias: tgt}\n")
    pytester.makepyfile(gate(body="assert bias_result.baselines == ()"))
    run_pytest_once(*OFFLINE, "-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning").assert_outcomes(passed=1)


def test_calibrating_against_baselines_needs_one(pytester: pytest.Pytester, lands_project, run_pytest_once) -> None:
    lands_project(roster="target: {model: openai/tgt, alias: tgt}\n")
    pytester.makepyfile(gate(', calibrate="baselines"'))
    result = run_pytest_once(*OFFLINE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*0 baseline model(s) configured*at least 1 needed*"])


def test_feature_values_are_stored_and_reused(pytester: pytest.Pytester, lands_project, run_pytest) -> None:
    lands_project()
    pytester.makepyfile(gate())
    args = ("-W", "ignore::pytest_llmbias.plugin.LLMBiasWarning", "--llmbias-store=store")
    run_pytest(*OFFLINE, *args).assert_outcomes(passed=1)
    assert (pytester.path / "store" / "features").is_dir()
    run_pytest(*OFFLINE, *args).assert_outcomes(passed=1)


def test_results_table_under_xdist(pytester: pytest.Pytester, lands_project, run_pytest_once) -> None:
    lands_project(against("Dorvania"))
    pytester.makepyfile(
        gate().replace("test_gate", "test_a") + gate(', calibrate="baselines"').replace("test_gate", "test_b")
    )
    result = run_pytest_once(*OFFLINE, "-n", "2", "-v")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*::test_a*lands*IR(sentiment)*biased*", "*::test_b*lands*IR(sentiment)*biased*"])
