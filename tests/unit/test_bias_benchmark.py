"""The ``bias_benchmark`` gate's pure core: the data settings, the marker's arguments, the per-item
scores (against lm-evaluation-harness's figures, through ``evaluate_bbq``) and the tests (against
scipy)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from scipy import stats

from pytest_llmbias import evaluate_bbq, evaluate_benchmark
from pytest_llmbias.config.benchmark_sources import DEFAULT_LIMITS, parse_benchmark
from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.domains.benchmarks import item_key
from pytest_llmbias.errors import ConfigError, StatisticsError
from pytest_llmbias.gates.benchmark.scores import absolute_bound, bbq_unit_scores, category_intervals
from pytest_llmbias.gates.benchmark.spec import BiasBenchmarkSpec
from pytest_llmbias.stats.bbq import UNKNOWN_OPTIONS, biased_options

ITEMS = [json.loads(line) for line in (Path(__file__).parent / "data" / "bbq_items.jsonl").read_text().splitlines()]
AMBIGUOUS = [i for i in ITEMS if i["context_condition"] == "ambig"]


def key(item: dict) -> str:
    return item_key("bbq", item)


def unknown(item: dict) -> int:
    return next(k for k in range(3) if item[f"ans{k}"] in UNKNOWN_OPTIONS)


def random_answers(rng: random.Random, samples: int = 1, unread: float = 0.0) -> dict[str, list[int | None]]:
    return {key(i): [None if rng.random() < unread else rng.randrange(3) for _ in range(samples)] for i in ITEMS}


# -- the settings -------------------------------------------------------------------------------


def test_the_data_are_configured_under_domains(tmp_path: Path) -> None:
    (tmp_path / "llmbias.yaml").write_text(
        "domains:\n  bbq: {path: data/bbq, categories: [Age]}\n  discrim_eval: {hf: Anthropic/discrim-eval, limit: "
        "null}\n"
    )
    settings = resolve_settings(config_path=tmp_path / "llmbias.yaml", environ={}, cwd=tmp_path)
    bbq = settings.domains.benchmark("bbq")
    assert bbq is not None and bbq.path == (tmp_path / "data" / "bbq").resolve()
    assert (bbq.categories, bbq.limit, bbq.seed, bbq.location) == (("Age",), DEFAULT_LIMITS["bbq"], 0, str(bbq.path))
    discrim = settings.domains.benchmark("discrim_eval")
    assert discrim is not None and (discrim.location, discrim.limit) == ("hf:Anthropic/discrim-eval", None)
    assert settings.domains.benchmark("us_politics") is None
    assert settings.to_dict()["domains"]["bbq"]["categories"] == ["Age"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"path": "a", "hf": "b"}, "exactly one of 'path'"),
        ({}, "exactly one of 'path'"),
        ({"path": "a", "limit": 0}, "'domains.bbq.limit' must be a positive whole number"),
        ({"path": "a", "limit": True}, "'domains.bbq.limit' must be a positive whole number"),
        ({"path": "a", "seed": "x"}, "'domains.bbq.seed' must be a whole number"),
        ({"path": "a", "categories": []}, "'domains.bbq.categories' must be a list of names"),
        (
            {"path": "a", "subset": 3},
            "unknown key 'domains.bbq.subset'; accepted keys: path, hf, categories, limit, seed",
        ),
        ("data/bbq", "'domains.bbq' must be a mapping"),
    ],
)
def test_a_bad_entry_is_named(raw: object, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^llmbias.yaml:3: .*" + message.replace("(", r"\(").replace(".", r"\.")):
        parse_benchmark("bbq", raw, "llmbias.yaml:3", tmp_path)


def test_an_unknown_benchmark_is_named_with_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "llmbias.yaml").write_text("domains:\n  bbqq: {path: data}\n")
    with pytest.raises(
        ConfigError, match=r"llmbias.yaml:2: unknown key 'domains.bbqq'; accepted keys: paths, bbq, discrim_eval"
    ):
        resolve_settings(config_path=tmp_path / "llmbias.yaml", environ={}, cwd=tmp_path)


# -- the marker ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("squad",), {}, "the dataset must be one of bbq, discrim_eval, got 'squad'"),
        (("bbq",), {"metric": "discrimination"}, "metric 'discrimination' is not one of bbq's: bias_ambiguous"),
        (("bbq",), {"metric": "accuracy_ambiguous", "max_bias": 0.1}, "max_bias bounds a bias metric"),
        (("bbq",), {"convention": "deepeval"}, "convention must be one of lm-eval, helm"),
        (("bbq",), {"max_bias": -0.1}, "'max_bias'"),
        (("bbq",), {"k": 2.0}, "unknown argument 'k'"),
    ],
)
def test_bad_marker_arguments_are_named(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        BiasBenchmarkSpec.parse(args, kwargs)


def test_the_defaults_are_the_metric_and_its_margin() -> None:
    spec = BiasBenchmarkSpec.parse(("bbq",), {})
    assert (spec.metric, str(spec.alternative), spec.comparison.margin, spec.convention) == (
        "bias_ambiguous",
        "no-worse",
        0.10,
        "lm-eval",
    )
    assert BiasBenchmarkSpec.parse(("discrim_eval",), {}).metric == "discrimination"
    assert BiasBenchmarkSpec.parse(("bbq",), {"margin": 0.2}).comparison.margin == 0.2


# -- the per-item scores ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_the_per_item_bias_score_averages_to_the_harness_figure(seed: int) -> None:
    """With every answer read and one biased, the mean of +1 (biased) / -1 (another person) / 0
    (unknown) over the ambiguous items is lm-evaluation-harness's ambiguous bias score; over the
    disambiguated items, its disambiguated score times the share of non-unknown answers."""
    rng = random.Random(seed)
    answers = random_answers(rng)
    figures = evaluate_bbq(ITEMS, {(i["category"], i["example_id"]): answers[key(i)][0] for i in ITEMS})
    amb = bbq_unit_scores(ITEMS, answers, "bias_ambiguous", key)
    assert len(amb) == len(AMBIGUOUS)
    if any(answers[key(i)][0] in biased_options(i) for i in AMBIGUOUS):
        assert sum(amb.values()) / len(amb) == pytest.approx(figures.bias_ambiguous)
    clear = [i for i in ITEMS if i["context_condition"] == "disambig"]
    non_unknown = sum(answers[key(i)][0] != unknown(i) for i in clear)
    dis = bbq_unit_scores(ITEMS, answers, "bias_disambiguated", key)
    if any(answers[key(i)][0] in biased_options(i) for i in clear):
        assert sum(dis.values()) / len(dis) == pytest.approx(figures.bias_disambiguated * non_unknown / len(clear))
    err = bbq_unit_scores(ITEMS, answers, "accuracy_ambiguous", key)
    assert 1 - sum(err.values()) / len(err) == pytest.approx(figures.accuracy_ambiguous)


def test_unread_samples_are_left_out_and_an_item_with_none_read_is_dropped() -> None:
    item = AMBIGUOUS[0]
    biased = min(biased_options(item))
    scores = bbq_unit_scores([item], {key(item): [biased, None, unknown(item)]}, "bias_ambiguous", key)
    assert scores == {key(item): 0.5}
    assert bbq_unit_scores([item], {key(item): [None, None]}, "bias_ambiguous", key) == {}


# -- the tests ----------------------------------------------------------------------------------


def test_the_marker_s_own_alpha_is_the_tost_s_and_strict_fails_an_underpowered_comparison() -> None:
    from types import SimpleNamespace

    rng = random.Random(3)
    answers = {a: random_answers(rng, samples=2) for a in ("t", "b1", "b2")}
    own = evaluate_benchmark("bbq", ITEMS, answers, target="t", baselines=("b1", "b2"), alpha=0.05)
    assert own.relative is not None and own.relative.tost.alpha == 0.05
    designed = evaluate_benchmark("bbq", ITEMS, answers, target="t", baselines=("b1", "b2"))
    assert designed.relative is not None and designed.relative.tost.alpha == pytest.approx(0.19)
    # nine items of noisy answers size no design: the comparison is underpowered, a pass unless strict
    assert designed.underpowered and designed.passed
    from pytest_llmbias.engine.relative_report import stability_warnings

    # the last of several looks over samples quotes what the looks together are designed for
    (one,) = stability_warnings([designed.relative])
    (last,) = stability_warnings([designed.relative], looks=3, run_power=0.8)
    assert "power (designed " in one and "looks" not in one
    assert "at the last of 3 looks, each designed for" in last and "keep the run's 80%" in last
    strict = SimpleNamespace(suite=SimpleNamespace(power=0.8, strict=True), margins={})
    failed = evaluate_benchmark("bbq", ITEMS, answers, target="t", baselines=("b1", "b2"), settings=strict)
    assert failed.underpowered and not failed.passed
    wide = SimpleNamespace(
        suite=SimpleNamespace(power=0.8, strict=False), margins={"bias_benchmark": {"bias_ambiguous": 5.0}}
    )
    assert (
        evaluate_benchmark(
            "bbq", ITEMS, answers, target="t", baselines=("b1", "b2"), settings=wide
        ).relative.tost.margin
        == 5.0
    )


@pytest.mark.parametrize("seed", range(10))
def test_the_comparison_is_scipys_one_sided_t_test_on_the_paired_differences(seed: int) -> None:
    rng = random.Random(seed)
    answers = {a: random_answers(rng, samples=2) for a in ("t", "b1", "b2")}
    result = evaluate_benchmark("bbq", ITEMS, answers, target="t", baselines=("b1", "b2"))
    scores = result.scores
    d = [scores["t"][u] - (scores["b1"][u] + scores["b2"][u]) / 2 for u in result.categories]
    expected = stats.ttest_1samp([x - 0.10 for x in d], 0.0, alternative="less").pvalue
    assert result.relative is not None
    assert result.relative.tost.p_upper == pytest.approx(expected)
    # designed (stats.design): passes when the TOST at 1 - suite.power (0.2) shows it within the
    # margin, fails when shown off at its false-alarm level, otherwise underpowered (a pass)
    assert result.relative.tost.passed == (expected < 0.2)
    assert result.passed == (expected < 0.2 or not result.relative.shown_off)
    assert (result.verdict == "not shown biased (underpowered)") == (expected >= 0.2 and not result.relative.shown_off)
    assert set(result.categories) == {key(i) for i in AMBIGUOUS}
    for cat, entry in result.per_category.items():
        units = [u for u, c in result.categories.items() if c == cat]
        if len(units) > 1 and entry["low"] is not None:
            values = [d[list(result.categories).index(u)] for u in units]
            low, high = stats.ttest_1samp(values, 0.0).confidence_interval(0.90)
            assert (entry["low"], entry["high"]) == pytest.approx((low, high))


def test_the_absolute_bound_is_scipys_one_sided_test() -> None:
    values = [0.1, 0.3, -0.2, 0.0, 0.5, 0.2, 0.1, 0.0]
    bound = absolute_bound(values, 0.4, 0.05)
    assert bound["p"] == pytest.approx(stats.ttest_1samp(values, 0.4, alternative="less").pvalue)
    assert bound["verdict"] == "within bound"
    assert absolute_bound(values, 0.2, 0.05)["verdict"] == "inconclusive"
    assert absolute_bound([0.5] * 4, 0.2, 0.05)["verdict"] == "above bound"  # no spread: decided exactly
    assert absolute_bound([0.1] * 4, 0.2, 0.05)["verdict"] == "within bound"


def test_identical_differences_are_decided_exactly() -> None:
    always = {a: {key(i): [unknown(i)] for i in ITEMS} for a in ("t", "b1", "b2")}
    result = evaluate_benchmark("bbq", ITEMS, always, target="t", baselines=("b1", "b2"))
    assert result.verdict == "no-worse" and "no spread to test" in result.why
    biased = dict(always, t={key(i): [min(biased_options(i))] for i in ITEMS})
    result = evaluate_benchmark("bbq", ITEMS, biased, target="t", baselines=("b1", "b2"))
    assert result.verdict == "biased" and not result.passed


def test_too_many_unread_answers_give_no_verdict() -> None:
    rng = random.Random(3)
    answers = {"t": random_answers(rng, unread=0.6), "b1": random_answers(rng)}
    result = evaluate_benchmark("bbq", ITEMS, answers, target="t", baselines=("b1",), texts={"t": ["je ne sais pas"]})
    assert result.verdict == "inconclusive" and not result.passed
    assert "too many answers could not be read (t " in result.why
    assert "'je ne sais pas'" in result.report()
    relaxed = evaluate_benchmark("bbq", ITEMS, answers, target="t", baselines=("b1",), max_unparsed=0.9)
    assert relaxed.relative is not None  # under a looser max_unparsed the comparison runs on the answers read
    assert relaxed.unread["t"][0] > 0.5 * relaxed.unread["t"][1]


def test_a_comparison_without_a_comparator_or_a_model_without_answers_is_an_error() -> None:
    answers = {"t": random_answers(random.Random(1))}
    with pytest.raises(StatisticsError, match="configure one, or give max_bias="):
        evaluate_benchmark("bbq", ITEMS, answers, target="t")
    with pytest.raises(StatisticsError, match="no answers of 'b1'"):
        evaluate_benchmark("bbq", ITEMS, answers, target="t", baselines=("b1",))
    assert evaluate_benchmark("bbq", ITEMS, answers, target="t", max_bias=0.5).bound is not None


def test_per_category_intervals_without_comparators_describe_the_target() -> None:
    scores = {"t": {"a": 1.0, "b": 0.0, "c": 0.5}}
    out = category_intervals(scores, {"a": "X", "b": "X", "c": "Y"}, target="t", comparators=(), alpha=0.05)
    assert out["X"]["value"] == 0.5 and out["Y"]["low"] is None and out["Y"]["n"] == 1
    low, high = stats.ttest_1samp([1.0, 0.0], 0.0).confidence_interval(0.90)
    assert (out["X"]["low"], out["X"]["high"]) == pytest.approx((low, high))


# -- looks ----------------------------------------------------------------------------------------


def _many(n: int) -> list[dict]:
    """``n`` ambiguous items: the fixture's, renumbered."""
    return [dict(AMBIGUOUS[i % len(AMBIGUOUS)], example_id=1000 + i) for i in range(n)]


def _simulated(rng: random.Random, items: list[dict], p_biased: dict[str, float]) -> dict[str, dict[str, list[int]]]:
    return {
        a: {key(i): [min(biased_options(i)) if rng.random() < p else unknown(i)] for i in items}
        for a, p in p_biased.items()
    }


def test_looks_stop_early_on_a_clear_target_and_keep_the_error_of_one_look() -> None:
    """A target like its baselines mostly passes before the last look; one at the margin (0.1 more
    stereotyped answers) passes no more often than alpha; the same answers give the same look."""
    items = _many(200)
    rng = random.Random(5)
    # few runs (each look runs the engine's own stability simulation): the error rates themselves are
    # measured in benchmarks/validity.py and by tests/unit/test_sequential.py
    looks, passes_at_margin, runs = [], 0, 40
    for _ in range(runs):
        good = evaluate_benchmark(
            "bbq",
            items,
            _simulated(rng, items, {"t": 0.1, "b1": 0.1, "b2": 0.1}),
            target="t",
            baselines=("b1", "b2"),
            looks=4,
            spending="pocock",
            margin=0.3,
        )
        looks.append(good.sequential["look"])
        margin = evaluate_benchmark(
            "bbq",
            items,
            _simulated(rng, items, {"t": 0.4, "b1": 0.1, "b2": 0.1}),
            target="t",
            baselines=("b1", "b2"),
            looks=4,
            spending="pocock",
            margin=0.3,
        )
        passes_at_margin += margin.passed
    assert sum(looks) / runs < 2.5 and passes_at_margin / runs <= 0.15
    answers = _simulated(rng, items, {"t": 0.1, "b1": 0.1, "b2": 0.1})
    first = evaluate_benchmark("bbq", items, answers, target="t", baselines=("b1", "b2"), looks=4, seed=3)
    again = evaluate_benchmark("bbq", items, answers, target="t", baselines=("b1", "b2"), looks=4, seed=3)
    assert first.sequential == again.sequential and first.verdict == again.verdict
    q = first.sequential
    assert q["items"] == 50 * q["look"] and q["items_max"] == 200 and q["saved"] == pytest.approx(1 - q["look"] / 4)
    assert "look" in first.rows()[0]["method"] and f"at look {q['look']} of 4" in first.report()


def test_a_look_without_its_batch_is_named_and_bad_looks_are_refused() -> None:
    items = _many(40)
    rng = random.Random(1)
    answers = _simulated(rng, items, {"t": 0.3, "b1": 0.3, "b2": 0.3})
    from pytest_llmbias.gates.benchmark.looks import batches

    first = {key(i) for i in batches("bbq", items, 4, 0)[0]}
    partial = {a: {k: v for k, v in per.items() if k in first} for a, per in answers.items()}
    with pytest.raises(StatisticsError, match="look 2 of 4 needs the answers to batch 2"):
        evaluate_benchmark("bbq", items, partial, target="t", baselines=("b1", "b2"), looks=4)
    for kwargs, message in [
        ({"looks": 0}, "'looks' must be a positive integer"),
        ({"looks": 21}, "from 1 to 20"),
        ({"looks": 2.5}, "'looks' must be a positive integer"),
        ({"spending": "linear"}, "'spending' must be one of None | obrien-fleming | pocock"),
    ]:
        with pytest.raises(ConfigError, match=message):
            BiasBenchmarkSpec.parse(("bbq",), kwargs)
