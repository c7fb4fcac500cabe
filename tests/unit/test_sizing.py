"""What a comparison needs before any call (engine.sizing), the extension's looks over samples
(engine.extension), and the run's one-line summary (report.suite)."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from pytest_llmbias.engine.sizing import units_for
from pytest_llmbias.report.suite import suite_figures
from pytest_llmbias.stats.design import Design


@pytest.mark.parametrize(
    ("sd", "margin", "level", "power", "two_sided", "samples"),
    [
        (1.5, 1.0, 0.05 / 7, 0.8, False, 1),
        (1.5, 1.0, 0.05 / 7, 0.8, True, 3),
        (0.05, 0.02, 0.005, 0.9, True, 1),
        (0.6, 0.1, 0.05, 0.8, False, 1),
    ],
)
def test_the_planned_units_give_the_power_at_the_margin_on_simulated_answers(
    sd, margin, level, power, two_sided, samples
) -> None:
    """Monte Carlo oracle for the plan's sizing: normal answers of a release worse by the margin,
    ``units_for`` units of them (items x samples), decided by the design's rule (pass when the TOST
    at 1 - power - slack shows the difference within the margin, fail when it does not and the
    difference is shown off at the level) fail at least power of the time within Monte Carlo error,
    as ``expected_power`` computes; a third fewer units noticeably less. The normal formula's n
    falls short."""
    import numpy as np

    from pytest_llmbias.stats.design import expected_power

    rng = np.random.default_rng(36)
    draws = 20_000
    mc_se = (power * (1 - power) / draws) ** 0.5

    def simulated(units: int) -> tuple[float, float]:
        items = units // samples
        rule = Design.of(
            margin=margin, se=1.0, se_like=1.0, df=items - 1, level=level, power=power, two_sided=two_sided
        )
        t, c = margin - rule.pass_bound, rule.critical  # the design's quantiles at se = 1
        diffs = rng.normal(margin, sd / samples**0.5, (draws, items))  # each item's mean difference
        d, se = diffs.mean(axis=1), diffs.std(axis=1, ddof=1) / items**0.5
        x = np.abs(d) if two_sided else d
        failed = ~(x < margin - t * se) & (x > c * se)
        model = expected_power(
            margin=margin, se=sd / units**0.5, df=items - 1, level=level, power=power, two_sided=two_sided
        )
        return float(failed.mean()), model

    n = units_for(sd, margin, level=level, power=power, two_sided=two_sided, samples=samples)
    assert n % samples == 0
    rate, model = simulated(n)
    assert model >= power and abs(rate - model) < 4 * mc_se
    assert rate >= power - 3 * mc_se
    fewer = samples * max(2, round(n / samples * 2 / 3))
    rate, model = simulated(fewer)
    assert rate < power - 0.04 and abs(rate - model) < 4 * mc_se
    # the normal formula n = ((z_(1-b) + z_(1-a))·sd/margin)² sizes for the expected SE only: fewer units
    z = NormalDist().inv_cdf
    normal = math.ceil(((z(power) + z(1 - (level / 2 if two_sided else level))) * sd / margin) ** 2)
    assert normal < n


def test_the_designs_units_needed_size_it_in_expectation() -> None:
    """An unsized design asks for the units at which its expected power at the margin reaches
    power, with the standard error shrinking and the degrees of freedom growing with them;
    against baselines whose means spread (se_like above se), more."""
    from pytest_llmbias.stats.design import expected_power, like_df, like_se

    items, sd, level = 15, 1.5, 0.05 / 7
    d = Design.of(
        margin=1.0, se=sd / items**0.5, se_like=sd / items**0.5, df=items - 1, level=level, power=0.8, two_sided=False
    )
    assert not d.sized
    need = d.units_needed(items)
    assert need is not None and need > items

    def at(n: int) -> float:
        return expected_power(margin=1.0, se=sd / n**0.5, df=n - 1, level=level, power=0.8, two_sided=False)

    assert at(need) >= 0.8 > at(need - 1)
    assert need == units_for(sd, 1.0, level=level, power=0.8, two_sided=False)
    means = [0.0, 0.3, -0.2]
    se = sd / items**0.5
    wide = Design.of(
        margin=1.0,
        se=se,
        se_like=like_se(se, means),
        df=items - 1,
        df_like=like_df(se, items - 1, means),
        level=level,
        power=0.8,
        two_sided=True,
    )
    assert wide.units_needed(items) > need


def _entry(test: str, reliability: dict, verdict: str = "equivalent") -> dict:
    return {
        "test": test,
        "gate": "bias_equivalent",
        "domain": "d",
        "passed": True,
        "verdict": verdict,
        "result": {"reliability": reliability},
        "suite_alpha": 0.05,
        "suite_level": 0.0125,
        "suite_method": "holm",
    }


def test_the_summary_is_one_line_of_the_designed_rates() -> None:
    sized = {"judge": {"designed_false_alarm": 0.0125, "false_alarm": 0.0125, "designed_power": 0.8, "sized": True}}
    short = {"judge": {"designed_false_alarm": 0.0125, "false_alarm": 0.0125, "designed_power": 0.8, "sized": False}}
    entries = [
        _entry("a", sized),
        _entry("b", sized),
        _entry("c", short),
        _entry("d", short, verdict="not shown biased (underpowered)"),
    ]
    suite = suite_figures(entries)
    assert suite["summary"] == (
        "4 gates: a good release fails any at most 5% (designed: suite.alpha 5% shared by "
        "Holm); one worse by a gate's margin fails it 80% of the time at 2 of 4 designed gates "
        "(2 need more questions x samples); 1 underpowered verdict"
    )
    assert suite["sized"] == 2 and suite["designed"] == 4 and suite["underpowered"] == ["d"]
    assert "\n" not in suite["summary"]


def test_the_summary_says_which_underpowered_verdicts_strict_failed() -> None:
    short = {"judge": {"designed_false_alarm": 0.0125, "false_alarm": 0.0125, "designed_power": 0.8, "sized": False}}
    under = "not shown biased (underpowered)"
    failed = {**_entry("d", short, verdict=under), "passed": False}  # suite.strict fails it
    assert suite_figures([failed])["summary"].endswith("; 1 underpowered verdict (failed: suite.strict)")
    both = suite_figures([failed, _entry("e", short, verdict=under)])
    assert both["summary"].endswith("; 2 underpowered verdicts (1 failed: suite.strict)")
    assert both["underpowered_failed"] == 1 and both["underpowered"] == ["d", "e"]
    # an underpowered failure is not counted among the gates that failed without needing power
    assert both["caught"] == 0


def test_a_gate_that_failed_unsized_is_counted_as_failed_not_as_needing_answers() -> None:
    short = {"judge": {"designed_false_alarm": 0.0125, "false_alarm": 0.0125, "designed_power": 0.8, "sized": False}}
    sized = {"judge": {"designed_false_alarm": 0.0125, "false_alarm": 0.0125, "designed_power": 0.8, "sized": True}}
    failed = {**_entry("f", short, verdict="biased"), "passed": False}
    suite = suite_figures([_entry("a", sized), _entry("c", short), failed])
    assert suite["sized"] == 1 and suite["designed"] == 2 and suite["caught"] == 1
    alone = suite_figures([failed])
    assert alone["summary"].endswith(
        "(designed: suite.alpha 5% shared by Holm); 1 gate failed (a failure needs no power)"
    )
    assert suite["summary"].endswith(
        "at 1 of 2 designed gates (1 needs more questions x samples); 1 more gate failed (a failure needs no power)"
    )


def test_an_undecided_comparison_may_take_looks_up_to_max_samples() -> None:
    import dataclasses
    import types

    from pytest_llmbias.config.settings import CollectionSettings, Settings
    from pytest_llmbias.engine import extension as extension
    from pytest_llmbias.gates.equivalent.gate import GATE, EquivalentSpec

    def session(max_samples: int) -> object:
        return types.SimpleNamespace(settings=Settings(collection=CollectionSettings(max_samples=max_samples)))

    spec = EquivalentSpec.parse(("us_politics",), {"method": "judge"})
    assert extension.looks(GATE, spec, session(1)) is None  # the default: no sample beyond the gate's own
    counts = extension.looks(GATE, spec, session(4))
    assert counts == range(1, 5)
    at = extension.at_look(spec, 3, counts, power=0.8)
    # each of the four looks spends a quarter of the false-alarm level and of 1 - power - 0.01 (Bonferroni)
    assert (at.samples, at.false_alarm, at.alpha) == (3, pytest.approx(0.0125), pytest.approx(0.19 / 4))
    assert extension.looks(GATE, dataclasses.replace(spec, samples=4), session(4)) is None
    assert extension.looks(GATE, dataclasses.replace(spec, alpha=0.05), session(4)) is None  # the paper's fixed test
    assert extension.looks(GATE, dataclasses.replace(spec, looks=2), session(4)) is None  # looks over items instead


def test_the_looks_against_a_recorded_release_go_as_far_as_its_record_holds(tmp_path) -> None:
    """Against a release that holds fewer samples than ``max_samples`` the looks stop at what it
    holds (it is never asked again), per domain; against baselines, or in a run that records a
    release of its own, ``max_samples`` bounds them."""
    import dataclasses
    import json
    import types

    from pytest_llmbias.config.settings import CollectionSettings, ModelSpec, ReleaseSettings, Settings
    from pytest_llmbias.engine import extension as extension
    from pytest_llmbias.gates.equivalent.gate import GATE, EquivalentSpec

    record = tmp_path / "responses.jsonl"
    lines = [
        {"sample": s, "labels": {"alias": alias, "domain": domain, "question": "q1"}}
        for alias, domain, held in (("tgt", "us_politics", 3), ("tgt", "china_sensitive", 1), ("judge", "x", 5))
        for s in range(held)
    ]
    record.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    release = ModelSpec(alias="release-v1", model="release:v1/openai/tgt", recorded=str(record), recorded_as="tgt")
    settings = Settings(
        target=ModelSpec(alias="tgt", model="openai/tgt"),
        baselines=(release, ModelSpec(alias="b1", model="openai/b1")),
        release=ReleaseSettings(against="v1"),
    )
    assert settings.collection.max_samples == 5

    def looks(domain: str, settings: Settings = settings) -> range | None:
        spec = EquivalentSpec.parse((domain,), {"method": "judge"})
        return extension.looks(GATE, spec, types.SimpleNamespace(settings=settings))

    assert looks("us_politics") == range(1, 4)  # at most 3 looks, each at a third of the level
    assert looks("china_sensitive") is None  # one sample: one look at the full level
    assert looks("gender") == range(1, 6)  # no answer of the domain: as configured (its evaluation says so)
    recording = dataclasses.replace(settings, release=ReleaseSettings(against="v1", record="v2"))
    assert looks("china_sensitive", recording) == range(1, 6)  # the run's own record keeps every sample
    baselines = dataclasses.replace(settings, baselines=settings.baselines[1:], release=ReleaseSettings())
    assert looks("china_sensitive", baselines) == range(1, 6)
    capped = dataclasses.replace(settings, collection=CollectionSettings(max_samples=2))
    assert looks("us_politics", capped) == range(1, 3)


def test_the_round_of_more_samples_decides_at_the_gates_part_of_suite_alpha(tmp_path) -> None:
    """The round asks another sample while the verdict is undecided at the gate's share of
    ``suite.alpha`` (its floor under Holm's step-down), not at a gate's default level: a gate shown
    off its comparator at 5 % may still be undecided at 0.71 %."""
    from pytest_llmbias.config.settings import CollectionSettings, ModelSpec, Settings, StoreSettings
    from pytest_llmbias.engine import extension as extension
    from pytest_llmbias.gates.equivalent.gate import GATE, EquivalentSpec
    from pytest_llmbias.session import BiasSession

    settings = Settings(
        target=ModelSpec(alias="t", model="openai/t"),
        collection=CollectionSettings(max_samples=3),
        store=StoreSettings(dir=tmp_path / "store"),
    )
    session = BiasSession(settings)
    given = EquivalentSpec.parse(("us_politics",), {"method": "judge"})
    other = EquivalentSpec.parse(("us_politics",), {"method": "judge"})
    session.share_specs([(given, GATE.at_level(given, 0.05 / 7))])
    assert session.at_share(given).false_alarm == pytest.approx(0.05 / 7)
    assert session.at_share(other) is other  # an equal spec of another gate is not this one's
    counts = extension.looks(GATE, given, session)
    round_ = extension.MoreSamples(GATE, given, session, counts, given=given)
    assert round_._at_share().false_alarm == pytest.approx(0.05 / 7)
    assert extension.at_look(round_._at_share(), 2, counts, 0.8).false_alarm == pytest.approx(0.05 / 7 / 3)
    alone = extension.MoreSamples(GATE, other, session, counts)
    assert alone._at_share().false_alarm is None  # no share: the design's own level
    session.close()
