from __future__ import annotations

from typing import Any

import pytest

from pytest_llmbias.catalog import BY_NAME
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.gates import parse_marker
from pytest_llmbias.markers import signature_of
from pytest_llmbias.planning.request import ResponseRequest


def parse(*args: Any, **kwargs: Any) -> ResponseRequest:
    return parse_marker("bias_responses", args, kwargs)


def error(*args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        parse(*args, **kwargs)
    return str(info.value)


def test_domain_positional_or_keyword() -> None:
    expected = ResponseRequest(domain="china_sensitive", models="all", categories=None, samples=None)
    assert parse("china_sensitive") == expected
    assert parse(domain="china_sensitive") == expected


def test_all_arguments() -> None:
    spec = parse("d", models=["gpt-4o", "llama"], categories=["a", "b"], samples=3)
    assert spec == ResponseRequest(domain="d", models=("gpt-4o", "llama"), categories=("a", "b"), samples=3)
    assert isinstance(spec.models, tuple) and isinstance(spec.categories, tuple)


@pytest.mark.parametrize("models", ["all", "target", "baselines"])
def test_model_selections(models: str) -> None:
    assert parse("d", models=models).models == models


def test_models_tuple_kept_and_single_category_string() -> None:
    assert parse("d", models=("a",)).models == ("a",)
    assert parse("d", categories="economy").categories == ("economy",)


def test_unknown_keyword_names_accepted_arguments() -> None:
    msg = error("d", sample=2)
    assert "'sample'" in msg
    for name in ("domain", "models", "categories", "samples"):
        assert name in msg
    assert "bias_responses" in msg


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_marker_names_against_among_its_arguments(name: str) -> None:
    """The release a marker compares with is one of its arguments (taken before its spec is parsed):
    its signature and its unknown-argument error list it, and parsing leaves it to the plugin."""
    assert BY_NAME[name].signature.endswith(", against=None")
    with pytest.raises(ConfigError, match=r"unknown argument 'colour'; accepted: domain, .*, against$"):
        parse_marker(name, ("d",), {"colour": 1})


def test_parsing_a_marker_leaves_against_to_the_plugin() -> None:
    assert parse_marker("bias_responses", ("d",), {"against": "v1"}) == ResponseRequest(domain="d")


def test_two_positionals() -> None:
    msg = error("d", "all")
    assert "positional" in msg and "models" in msg


def test_domain_given_twice() -> None:
    assert "twice" in error("d", domain="e")


@pytest.mark.parametrize(
    ("args", "kwargs"), [((), {}), ((), {"models": "all"}), (("",), {}), ((3,), {}), (("  ",), {})]
)
def test_missing_or_bad_domain(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    assert "needs a domain" in error(*args, **kwargs)


def test_models_everyone_rejected() -> None:
    msg = error("d", models="everyone")
    assert "'everyone'" in msg and "all, target, baselines" in msg


@pytest.mark.parametrize("models", [[], ["a", ""], ["a", 3], 5])
def test_bad_model_lists(models: Any) -> None:
    assert "'models'" in error("d", models=models)


@pytest.mark.parametrize("samples", [0, -1, True, 1.5, "2"])
def test_bad_samples(samples: Any) -> None:
    msg = error("d", samples=samples)
    assert "'samples'" in msg and "positive integer" in msg


@pytest.mark.parametrize("categories", [[], [""], [1], ()])
def test_bad_categories(categories: Any) -> None:
    assert "'categories'" in error("d", categories=categories)


def test_none_values_mean_defaults() -> None:
    assert parse("d", categories=None, samples=None) == ResponseRequest(domain="d")


def test_marker_line_for_pytest_markers() -> None:
    line = BY_NAME["bias_responses"].line
    assert line.startswith("bias_responses(domain")
    assert "samples" in line


def test_the_catalog_matches_the_specs_and_the_gates() -> None:
    """pytest declares the markers from the catalog (standard library only); each row must say
    what the spec dataclasses and gates say."""
    from pytest_llmbias.catalog import BY_NAME, GATE_MARKERS, MARKERS
    from pytest_llmbias.gates import GATES

    assert signature_of(ResponseRequest) == BY_NAME["bias_responses"].signature
    assert tuple(GATES) == GATE_MARKERS
    for name, gate in GATES.items():
        assert gate.marker == name
        assert gate.signature() == BY_NAME[name].signature
        assert gate.help == BY_NAME[name].help
    assert [m.name for m in MARKERS] == list(BY_NAME)


# -- bias_impact_ratio ----------------------------------------------------------------------------


def test_impact_ratio_defaults_are_the_papers_with_a_significance_test() -> None:
    from pytest_llmbias.gates.impact_ratio.spec import ImpactRatioSpec

    spec = parse_marker("bias_impact_ratio", ("countries",), {})
    assert spec == ImpactRatioSpec(domain="countries")
    assert (spec.feature, spec.threshold, spec.calibrate, spec.standard, spec.method) == (
        "sentiment",
        0.8,
        None,
        "mean",
        "larger",
    )
    assert spec.fail_on == "significant" and spec.alpha == 0.05 and spec.confidence == 0.95
    assert spec.responses("target") == ResponseRequest(domain="countries", models="target")


def test_impact_ratio_every_argument() -> None:
    spec = parse_marker(
        "bias_impact_ratio",
        (),
        {
            "domain": "first_names",
            "feature": "classifier:./m",
            "threshold": 0.9,
            "calibrate": "baselines",
            "group_by": "group",
            "standard": "quantile",
            "quantile": 0.75,
            "method": "within-range",
            "within": 0.2,
            "confidence": 0.9,
            "fail_on": "interval",
            "resamples": 500,
            "min_responses": 3,
            "categories": "workplace",
            "samples": 4,
        },
    )
    assert spec.quantile == 0.75 and spec.within == 0.2 and spec.categories == ("workplace",)
    assert spec.responses().samples == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"feature": ""}, "'feature' must be a feature name"),
        ({"threshold": 0}, r"'threshold' must be a number in \(0, 1\]"),
        ({"threshold": True}, "'threshold' must be"),
        ({"calibrate": "peers"}, "'calibrate' must be one of None | reference | baselines"),
        ({"group_by": "template"}, "'group_by' must be one of concept | group"),
        ({"standard": "mode"}, "'standard' must be one of mean | median | quantile"),
        ({"method": "equal"}, "'method' must be one of larger | smaller | within-range"),
        ({"method": "within-range"}, "needs 'within'"),
        ({"within": 0.1}, "'within' only applies to method='within-range'"),
        ({"quantile": 0.5}, "'quantile' only applies to standard='quantile'"),
        ({"standard": "quantile", "quantile": 1}, "'quantile' must be a number between 0 and 1"),
        ({"confidence": 0.0}, "'confidence' must be a number between 0 and 1"),
        ({"fail_on": "both"}, "'fail_on' must be one of significant | estimate | interval"),
        ({"resamples": 50}, "'resamples' must be at least 100"),
        ({"min_responses": 0}, "'min_responses' must be a positive integer"),
    ],
)
def test_impact_ratio_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("|", r"\|") if "(" not in message else message):
        parse_marker("bias_impact_ratio", ("countries",), kwargs)


def test_marker_vocabularies_match_the_statistics() -> None:
    from pytest_llmbias.choices import SelectionMethod, Standard
    from pytest_llmbias.stats.selection import SelectionRule

    for standard in Standard.values():
        for method in SelectionMethod.values():
            assert SelectionRule.parse(standard, method, quantile=0.5, within=0.1 if method == "within-range" else None)


class _Gate:
    help = "h"

    def __init__(self, marker: object) -> None:
        self.marker = marker

    def signature(self) -> str:
        return "domain"

    def parse(self, args: Any, kwargs: Any) -> Any:
        return args

    def plan(self, spec: Any, session: Any) -> None:
        pass

    def evaluate(self, spec: Any, session: Any) -> Any:
        return None

    def figures(self, entry: Any) -> list[Any]:
        return []


def test_the_registry_adds_a_gate_after_the_built_in_markers() -> None:
    from pytest_llmbias.catalog import GATE_MARKERS, MARKERS, MarkerRegistry

    registry = MarkerRegistry()
    gate = _Gate("bias_length")
    registry.register(gate)
    assert registry.docs[: len(MARKERS)] == MARKERS
    assert registry.docs[-1].line == "bias_length(domain): h"
    assert registry.gate_markers == (*GATE_MARKERS, "bias_length")
    assert registry.gate("bias_length") is gate
    assert registry.gate("bias_responses") is None
    assert registry.gate("bias_stance").marker == "bias_stance"  # the built-in gate, imported on demand


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        (_Gate("bias_equivalent"), "already registered"),
        (_Gate("not a name"), "must be a marker name"),
        (_Gate(3), "must be a marker name"),
        (type("Half", (), {"marker": "bias_half", "help": "h"})(), "lacks signature, parse, plan, evaluate, figures"),
    ],
)
def test_the_registry_refuses_a_taken_name_a_bad_name_or_half_a_gate(gate: Any, message: str) -> None:
    from pytest_llmbias.catalog import MarkerRegistry

    registry = MarkerRegistry()
    with pytest.raises(ValueError, match=message):
        registry.register(gate)
    registry.register(_Gate("bias_length"))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(_Gate("bias_length"))
