"""What a comparison needs before any call (gates.sizing), the extension's looks over samples
(gates.extension), and the run's one-line summary (report.suite)."""

from __future__ import annotations

import math

import pytest

from pytest_llmbias.gates.sizing import units_for
from pytest_llmbias.report.suite import suite_figures
from pytest_llmbias.stats.design import Design


@pytest.mark.parametrize(
    ("sd", "margin", "level", "power", "two_sided"),
    [
        (1.5, 1.0, 0.0125, 0.8, False),
        (1.5, 1.0, 0.0125, 0.8, True),
        (0.05, 0.02, 0.005, 0.9, True),
        (0.6, 0.1, 0.05, 0.8, False),
    ],
)
def test_the_units_are_statsmodels_one_sample_size(sd, margin, level, power, two_sided) -> None:
    from statsmodels.stats.power import NormalIndPower

    n = units_for(sd, margin, level=level, power=power, two_sided=two_sided)
    # a one-sample z test of the shift margin/sd at the one-sided level (two-sided: level / 2 a side)
    oracle = NormalIndPower().solve_power(
        effect_size=margin / sd, alpha=level / 2 if two_sided else level, power=power, ratio=0, alternative="larger"
    )
    assert n == max(2, math.ceil(oracle - 1e-9))
    # at that many units the design is sized (normal quantiles: df infinite), one unit fewer it is not
    for units, sized in ((n, True), (n - 1, False)):
        d = Design.of(
            margin=margin,
            se=sd / units**0.5,
            se_like=sd / units**0.5,
            df=math.inf,
            level=level,
            power=power,
            two_sided=two_sided,
        )
        assert d.sized is sized or units < 2


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


def test_an_undecided_comparison_may_take_looks_up_to_max_samples() -> None:
    import dataclasses
    import types

    from pytest_llmbias.config.settings import CollectionSettings, Settings
    from pytest_llmbias.gates import extension
    from pytest_llmbias.gates.bias_equivalent import GATE, EquivalentSpec

    def session(max_samples: int) -> object:
        return types.SimpleNamespace(settings=Settings(collection=CollectionSettings(max_samples=max_samples)))

    spec = EquivalentSpec.parse(("us_politics",), {"method": "judge"})
    assert extension.looks(GATE, spec, session(1)) is None  # the default: no sample beyond the gate's own
    counts = extension.looks(GATE, spec, session(4))
    assert counts == range(1, 5)
    at = extension.at_look(spec, 3, counts, power=0.8)
    # each of the four looks spends a quarter of the false-alarm level and of 1 - power (Bonferroni)
    assert (at.samples, at.false_alarm, at.alpha) == (3, pytest.approx(0.0125), pytest.approx(0.05))
    assert extension.looks(GATE, dataclasses.replace(spec, samples=4), session(4)) is None
    assert extension.looks(GATE, dataclasses.replace(spec, alpha=0.05), session(4)) is None  # the paper's fixed test
    assert extension.looks(GATE, dataclasses.replace(spec, looks=2), session(4)) is None  # looks over items instead


def test_the_round_of_more_samples_decides_at_the_gates_part_of_suite_alpha(tmp_path) -> None:
    """The round asks another sample while the verdict is undecided at the gate's share of
    ``suite.alpha`` (its floor under Holm's step-down), not at a gate's default level: a gate shown
    off its comparator at 5 % may still be undecided at 0.71 %."""
    from pytest_llmbias.config.settings import CollectionSettings, ModelSpec, Settings, StoreSettings
    from pytest_llmbias.gates import extension
    from pytest_llmbias.gates.bias_equivalent import GATE, EquivalentSpec
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
