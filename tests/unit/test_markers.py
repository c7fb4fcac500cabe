from __future__ import annotations

from typing import Any

import pytest

from pytest_llmbias.errors import ConfigError
from pytest_llmbias.markers import MARKERS, ResponsesSpec, parse_marker


def parse(*args: Any, **kwargs: Any) -> ResponsesSpec:
    return parse_marker("bias_responses", args, kwargs)


def error(*args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        parse(*args, **kwargs)
    return str(info.value)


def test_domain_positional_or_keyword() -> None:
    expected = ResponsesSpec(domain="china_sensitive", models="all", categories=None, samples=None)
    assert parse("china_sensitive") == expected
    assert parse(domain="china_sensitive") == expected


def test_all_arguments() -> None:
    spec = parse("d", models=["gpt-4o", "llama"], categories=["a", "b"], samples=3)
    assert spec == ResponsesSpec(domain="d", models=("gpt-4o", "llama"), categories=("a", "b"), samples=3)
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


def test_two_positionals() -> None:
    msg = error("d", "all")
    assert "positional" in msg and "models" in msg


def test_domain_given_twice() -> None:
    assert "twice" in error("d", domain="e")


@pytest.mark.parametrize(("args", "kwargs"), [((), {}), ((), {"models": "all"}), (("",), {}), ((3,), {}), (("  ",), {})])
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
    assert parse("d", categories=None, samples=None) == ResponsesSpec(domain="d")


def test_marker_line_for_pytest_markers() -> None:
    line = MARKERS["bias_responses"].line
    assert line.startswith("bias_responses(domain")
    assert "samples" in line
