"""The project fuzzes itself: Hypothesis writes settings files, environment variables, domain files
and marker arguments, most of them wrong, and reading each must give a valid object or the plugin's
own clear error (:class:`ConfigError`, :class:`DomainError`), never another exception. What is
accepted must also keep the documented ranges (see :mod:`pytest_llmbias.config.bounds`).

The examples are few (a modest ``max_examples`` each) so the module runs in seconds; the values are
drawn near the edges that matter: empty strings, NaN, infinities, huge integers, URLs with bad
ports, aliases and deep or aliased YAML.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from pytest_llmbias.catalog import MARKERS
from pytest_llmbias.config.bounds import BOUNDS, PARAM_BOUNDS
from pytest_llmbias.config.model_entries import APP_KEYS, MODEL_KEYS
from pytest_llmbias.config.option_table import SETTINGS_OPTIONS
from pytest_llmbias.config.settings import Settings
from pytest_llmbias.config.settings_sources import _SECTIONS, _TOP_KEYS, resolve_settings
from pytest_llmbias.config.yamlutil import load_yaml_text
from pytest_llmbias.domains.domain import Domain
from pytest_llmbias.domains.loader import _TOP_KEYS as DOMAIN_KEYS, BUILTIN_DIR, parse_domain
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.gates import parse_marker

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

EDGE_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "openai/x",
        "x",
        "http://127.0.0.1:8000/v1",
        "http://h:99999/v1",
        "http://[::1",
        "ftp://h",
        "use",
        "off",
        "refresh",
        "judge",
        "embedding",
        "all",
        "target",
        "mean",
        "equivalent",
        "no-worse",
        "1",
        "0.5",
        "-1",
        "{model: openai/x, alias: ''}",
        "{model: [unclosed",
        "@no-such-file.txt",
        "hf:x/y",
        "$KEY",
        "python:pkg.mod:fn",
        "us_politics",
    ]
)
NUMBERS = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([0, 1, 2, -1, 10**9, 65536])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.5, -0.5, math.nan, math.inf, -math.inf])
)
SCALARS = st.none() | st.booleans() | NUMBERS | EDGE_STRINGS | st.text(max_size=12)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6) | EDGE_STRINGS, inner, max_size=4),
    max_leaves=12,
)


def entries() -> st.SearchStrategy[Any]:
    """A model entry: a string, or a mapping of model-entry keys (and a stray one) to values."""
    params = st.dictionaries(st.sampled_from([*PARAM_BOUNDS, "seed", "api_key", "stop"]), SCALARS, max_size=3)
    keyed = st.dictionaries(
        st.sampled_from([*MODEL_KEYS, *APP_KEYS, "python", "http", "bogus"]), SCALARS | params | VALUES, max_size=5
    )
    model = st.fixed_dictionaries(
        {"model": st.sampled_from(["openai/a", "openai/b", "hosted_vllm/c"])},
        optional={
            "alias": SCALARS,
            "api_base": EDGE_STRINGS | st.text(max_size=20),
            "api_key_env": EDGE_STRINGS,
            "params": params,
        },
    )
    return EDGE_STRINGS | model | keyed


def sections() -> st.SearchStrategy[dict[str, Any]]:
    """Each section as a mapping of its own keys (and sometimes a stray one) to values."""
    return st.fixed_dictionaries(
        {},
        optional={
            name: st.dictionaries(
                st.sampled_from([f.name for f in dataclasses.fields(cls)] + ["bogus"]), SCALARS | VALUES, max_size=4
            )
            for name, cls in _SECTIONS.items()
        },
    )


def config_files() -> st.SearchStrategy[dict[str, Any]]:
    top = st.fixed_dictionaries(
        {},
        optional={
            "target": entries(),
            "baselines": st.lists(entries(), max_size=3) | SCALARS,
            "judge": entries(),
            "judges": st.lists(entries(), max_size=2),
            "models": st.lists(entries(), max_size=2),
            "features": VALUES,
            "margins": VALUES,
            "bogus": SCALARS,
        },
    )
    return st.builds(lambda a, b: {**a, **b}, top, sections()) | st.dictionaries(
        st.sampled_from([*_TOP_KEYS, "bogus"]), VALUES, max_size=4
    )


def mutations(base: Any) -> st.SearchStrategy[Any]:
    """``base`` (a valid document) with up to three mutations at random places: a value replaced,
    a key or item deleted, or one added; most inputs then fail deep inside the checks, not at
    the first key."""

    @st.composite
    def mutate(draw: st.DrawFn) -> Any:
        data = copy.deepcopy(base)
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            node = data
            while True:
                slots = list(node) if isinstance(node, dict) else list(range(len(node)))
                if not slots:
                    break
                slot = draw(st.sampled_from(slots))
                child = node[slot]
                if isinstance(child, (dict, list)) and child and draw(st.integers(0, 2)):
                    node = child  # go deeper, two times in three
                    continue
                action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
                if action == "replace":
                    node[slot] = draw(VALUES)
                elif action == "delete":
                    del node[slot]
                elif isinstance(node, dict):
                    node[draw(EDGE_STRINGS | st.text(max_size=6))] = draw(VALUES)
                else:
                    node.append(draw(VALUES))
                break
        return data

    return mutate()


#: every built-in domain, one of each format (questions, counterfactual, topics, pairs)
BUILTIN_DOMAINS = [
    load_yaml_text(p.read_text(encoding="utf-8"), source=str(p), error=ConfigError)[0]
    for p in sorted(BUILTIN_DIR.glob("*.yaml"))
]

#: a settings file that sets most sections (every value valid)
FULL_SETTINGS: dict[str, Any] = yaml.safe_load(
    """
models:
  - {model: openai/named, alias: named, api_base: "http://127.0.0.1:8000/v1", api_key_env: LOCAL_KEY}
target: {model: openai/t, alias: t, params: {top_p: 0.9, temperature: 0.2, max_tokens: 64}, version: "1.2"}
baselines:
  - {model: anthropic/claude-x, alias: claude, system: "Be brief.", messages: [{role: user, content: hi}]}
  - named
  - {http: {url: "http://127.0.0.1:9000/chat", body: {q: "{prompt}"}, response: answer}, alias: app}
judge: {model: openai/judge, structured: auto, logprobs: true}
judging: {retest: 20, min_agreement: 0.5}
generation: {temperature: 0.7, max_tokens: 512, samples: 2, seed: 0}
collection: {concurrency: 32, rpm: 0, tpm: 0, timeout: 60, retries: 5, lock_timeout: 120, max_cost: 5,
             max_unparsed: 0.1, looks: 1, spending: obrien-fleming, plan: false, max_samples: 5, max_calls: 1000}
store: {dir: .llmbias, cache: use, offline: false, snapshots: [], export: null}
report: {json: null, html: null, markdown: null, history: null}
release: {dir: bias_releases, record: null, against: null, anchor: null, force: false}
suite: {alpha: 0.05, power: 0.8, strict: false}
embedding: {model: all-MiniLM-L6-v2, instruction: null, batch_size: 64}
domains: {paths: [bias_domains/]}
features:
  stars: {classifier: ./models/sentiment, weights: {positive: 1, negative: -1}, max_length: 256}
margins: {bias_equivalent: 0.5}
"""
)


def check_accepted(s: Settings) -> None:
    """What a run accepted keeps the documented ranges, aliases and URLs."""
    for key, bound in BOUNDS.items():
        section, _, name = key.partition(".")
        value = getattr(getattr(s, section), name)
        if value is not None:
            assert bound.admits(value), (key, value)
    for spec in (*s.roster, *s.panel):
        assert spec.alias.strip() == spec.alias and spec.alias, spec
        assert spec.api_key_env is None or spec.api_key_env.strip(), spec
        if spec.api_base is not None:
            parts = urlsplit(spec.api_base)
            assert parts.scheme in ("http", "https") and parts.hostname, spec.api_base
            assert parts.port is None or 1 <= parts.port <= 65535, spec.api_base
        for name, bound in PARAM_BOUNDS.items():
            if spec.params.get(name) is not None:
                assert bound.admits(spec.params[name]), (name, spec.params[name])


def read_settings(text: str, environ: dict[str, str] | None = None) -> Settings | None:
    """The settings of ``text`` as llmbias.yaml, or None for the plugin's clear error."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "llmbias.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            result = resolve_settings(config_path=path, environ=environ or {}, cwd=Path(folder))
        except ConfigError as exc:
            assert str(exc).strip(), "an empty error message"
            return None
    check_accepted(result)
    return result


@FUZZ
@given(config_files())
def test_a_generated_settings_file_is_read_or_refused_clearly(data: dict[str, Any]) -> None:
    read_settings(yaml.safe_dump(data, allow_unicode=True))


@FUZZ
@given(mutations(FULL_SETTINGS))
def test_a_settings_file_with_a_few_wrong_values_is_read_or_refused_clearly(data: Any) -> None:
    read_settings(yaml.safe_dump(data, allow_unicode=True))


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("ab:- &*[]{},'\"\n.#!|>%@`\t0") + ["\u00e9", "\x85"]), max_size=80))
def test_any_text_as_a_settings_file_is_read_or_refused_clearly(text: str) -> None:
    read_settings(text)


OPTION_ENVS = [o.env for o in SETTINGS_OPTIONS if o.env]


@FUZZ
@given(
    st.dictionaries(st.sampled_from(OPTION_ENVS), EDGE_STRINGS | st.text(max_size=12) | NUMBERS.map(str), max_size=4)
)
def test_generated_environment_variables_are_read_or_refused_clearly(environ: dict[str, str]) -> None:
    environ = {k: v for k, v in environ.items() if "\x00" not in v}
    read_settings("target: openai/t\nbaselines: [openai/b]\n", environ)


def questions() -> st.SearchStrategy[Any]:
    question = st.fixed_dictionaries(
        {"id": EDGE_STRINGS | st.text(max_size=6), "text": EDGE_STRINGS | st.text(max_size=20)},
        optional={"split": SCALARS, "reference": SCALARS, "bogus": SCALARS},
    )
    return st.lists(question | SCALARS, max_size=4)


def domains() -> st.SearchStrategy[Any]:
    category = st.fixed_dictionaries(
        {"id": EDGE_STRINGS | st.text(max_size=6), "questions": questions()},
        optional={"name": SCALARS, "weight": NUMBERS | SCALARS, "bogus": SCALARS},
    )
    text = st.text(min_size=1, max_size=20)
    return st.fixed_dictionaries(
        {"name": text | SCALARS, "description": text, "focus": text, "instruction": text},
        optional={
            "title": SCALARS,
            "categories": st.lists(category | SCALARS, max_size=3) | SCALARS,
            "languages": VALUES,
            "counterfactual": VALUES,
            "perspectives": VALUES,
            "topics": VALUES,
            "rubric": SCALARS,
            "anchors": VALUES,
            "anchor_misses": VALUES,
            "pairs": VALUES,
        },
    ) | st.dictionaries(st.sampled_from([*DOMAIN_KEYS, "bogus"]), VALUES, max_size=5)


def read_domain(data: Any) -> Domain | None:
    try:
        domain = parse_domain(data, path=Path("fuzzed.yaml"))
    except ConfigError as exc:  # DomainError among them
        assert str(exc).startswith("fuzzed.yaml"), str(exc)
        return None
    assert domain.name and domain.select(None) is not None
    return domain


@FUZZ
@given(domains())
def test_a_generated_domain_is_read_or_refused_clearly(data: Any) -> None:
    read_domain(data)


@FUZZ
@given(st.sampled_from(range(len(BUILTIN_DOMAINS))).flatmap(lambda i: mutations(BUILTIN_DOMAINS[i])))
def test_a_builtin_domain_with_a_few_wrong_values_is_read_or_refused_clearly(data: Any) -> None:
    read_domain(data)


@FUZZ
@given(domains(), st.integers(min_value=1, max_value=200))
def test_a_domain_file_nested_or_aliased_is_read_or_refused_clearly(data: Any, depth: int) -> None:
    """The same domains as YAML text, some wrapped ``depth`` lists deep, some with aliases."""
    text = yaml.safe_dump(data, allow_unicode=True)
    nested = "x: " + "[" * depth + "1" + "]" * depth + "\n"
    for body in (text, text + nested, "base: &b [1, 2, 3]\n" + text.replace("null", "*b")):
        try:
            parsed, _ = load_yaml_text(body, source="fuzzed.yaml", error=ConfigError)
        except ConfigError as exc:
            assert str(exc).startswith("fuzzed.yaml"), str(exc)
            continue
        read_domain(parsed)


def accepted_arguments(marker: str) -> list[str]:
    """The keyword arguments ``marker`` accepts, as its own error lists them."""
    with pytest.raises(ConfigError) as info:
        parse_marker(marker, ("us_politics",), {"zzz_bogus": 1})
    found = re.search(r"accepted: (.*)$", str(info.value))
    assert found, str(info.value)
    return found.group(1).split(", ")


MARKER_KEYS = {m.name: accepted_arguments(m.name) for m in MARKERS}


@st.composite
def marker_calls(draw: st.DrawFn) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    name = draw(st.sampled_from(sorted(MARKER_KEYS)))
    keys = [k for k in MARKER_KEYS[name] if k != "domain"]
    args = draw(st.sampled_from([("us_politics",), (), (draw(SCALARS),), ("us_politics", draw(SCALARS))]))
    kwargs = draw(st.dictionaries(st.sampled_from([*keys, "bogus"]), SCALARS | VALUES, max_size=4))
    return name, args, kwargs


@FUZZ
@given(marker_calls())
def test_generated_marker_arguments_parse_or_are_refused_clearly(
    call: tuple[str, tuple[Any, ...], dict[str, Any]],
) -> None:
    name, args, kwargs = call
    try:
        parse_marker(name, args, kwargs)
    except ConfigError as exc:
        assert str(exc).startswith(f"@pytest.mark.{name}"), str(exc)


def test_the_bases_of_the_mutations_are_valid_as_they_stand() -> None:
    """Mutations start from valid documents, so that a mutated input fails deep in the checks."""
    settings = read_settings(yaml.safe_dump(FULL_SETTINGS))
    assert settings is not None and [m.alias for m in settings.baselines] == ["claude", "named", "app"]
    assert [read_domain(d) is not None for d in BUILTIN_DOMAINS] == [True] * len(BUILTIN_DOMAINS)
