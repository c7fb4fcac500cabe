"""Settings checked when read: every numeric setting in its documented range (NaN and the
infinities refused), aliases and key variables not empty, ``api_base`` a URL with a usable port,
and a plan too big to build refused, counted, before it is built."""

from __future__ import annotations

import dataclasses
import re
import textwrap
import time
from pathlib import Path

import pytest

from pytest_llmbias.config.bounds import BOUNDS, MAX_CALLS_DEFAULT, PARAM_BOUNDS, Bound, check_bound
from pytest_llmbias.config.settings import CollectionSettings, GenerationSettings, ModelSpec, Settings
from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.domains import load_domain
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.planning.request import ResponseRequest, grid

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def resolve(tmp_path: Path, text: str, *, env: dict[str, str] | None = None, cli: dict | None = None) -> Settings:
    path = tmp_path / "llmbias.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return resolve_settings(cli=cli or {}, environ=env or {}, config_path=path, cwd=tmp_path)


def error(tmp_path: Path, text: str, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(tmp_path, text, **kwargs)
    return str(info.value)


# -- the ranges of the sections' numbers --------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key", "value", "expected"),
    [
        ("generation", "temperature", "-1", r"a number in \[0, 2\]"),
        ("generation", "temperature", "2.5", r"a number in \[0, 2\]"),
        ("generation", "temperature", ".nan", "a finite number"),
        ("generation", "max_tokens", "0", "a positive integer"),
        ("generation", "max_tokens", "10000000", "an integer from 1 to 1,000,000"),
        ("generation", "samples", "1000000000", "an integer from 1 to 1,000"),
        ("collection", "max_samples", "5000", "an integer from 1 to 1,000"),
        ("collection", "concurrency", "100000", "an integer from 1 to 4,096"),
        ("collection", "timeout", ".nan", "a positive finite number"),
        ("collection", "timeout", ".inf", "a positive finite number"),
        ("collection", "timeout", "100000", r"a number in \(0, 86,400\]"),
        ("collection", "lock_timeout", "-.inf", "a positive finite number"),
        ("collection", "retries", "1000000000", "an integer from 0 to 100"),
        ("collection", "max_cost", ".inf", "a positive finite number"),
        ("collection", "max_calls", "0", "a positive integer"),
    ],
)
def test_a_value_out_of_range_names_the_file_line_key_and_range(
    tmp_path: Path, section: str, key: str, value: str, expected: str
) -> None:
    message = error(tmp_path, f"target: openai/x\n{section}:\n  {key}: {value}\n")
    assert re.match(rf"^.*llmbias\.yaml:3: '{section}\.{key}' must be {expected}", message), message


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("generation", "temperature", 0),
        ("generation", "temperature", 2),
        ("generation", "max_tokens", 1_000_000),
        ("generation", "samples", 1_000),
        ("collection", "concurrency", 4_096),
        ("collection", "timeout", 86_400),
        ("collection", "retries", 0),
        ("collection", "retries", 100),
        ("collection", "max_calls", 100_000_000),
    ],
)
def test_the_ends_of_each_range_are_accepted(tmp_path: Path, section: str, key: str, value: float) -> None:
    settings = resolve(tmp_path, f"{section}:\n  {key}: {value}\n")
    assert getattr(getattr(settings, section), key) == value


def test_a_bound_from_the_command_line_or_the_environment_names_them(tmp_path: Path) -> None:
    assert error(tmp_path, "target: openai/x\n", cli={"concurrency": 10**6}).startswith(
        "--llmbias-concurrency: 'collection.concurrency' must be an integer from 1 to 4,096"
    )
    assert error(tmp_path, "target: openai/x\n", env={"LLMBIAS_MAX_SAMPLES": "2000"}).startswith(
        "$LLMBIAS_MAX_SAMPLES: 'collection.max_samples' must be an integer from 1 to 1,000"
    )


def test_every_bound_is_listed_in_the_docs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    table = text[text.index("<!-- bounds -->") : text.index("<!-- /bounds -->")]
    for key, bound in BOUNDS.items():
        assert f"| `{key}` | {bound.describe()} |" in table, key
    for name, bound in PARAM_BOUNDS.items():
        assert f"| `params.{name}` | {bound.describe()} |" in table, name


def test_check_bound_refuses_what_its_kind_check_would_let_through() -> None:
    integer = Bound(1, 10, "why", integer=True)
    for bad in (True, 2.0, float("nan"), "3", None, 11, 0):
        with pytest.raises(ConfigError, match=r"^here: 'k' must be an integer from 1 to 10 \(why\), got "):
            check_bound("k", bad, "here", integer)
    check_bound("k", 10, "here", integer)
    check_bound("not.bounded", float("nan"), "here")  # a key with no range passes


# -- model entries ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("{model: openai/x, alias: ''}", r":2: 'target.alias' must be a non-empty string, got ''"),
        ("{model: openai/x, alias: '  '}", r"'target.alias' must be a non-empty string"),
        ("{python: 'pkg.mod:fn', alias: ''}", r"'target.alias' must be a non-empty string"),
        ("{model: openai/x, api_key_env: ''}", r"'target.api_key_env' must name an environment variable"),
        ("{model: openai/x, api_key_env: $KEY}", r"\(the name alone, without '\$'\), got '\$KEY'"),
        ("{model: openai/x, api_base: 'localhost:8000'}", r"'target.api_base' must be an http:// or https:// URL"),
        ("{model: openai/x, api_base: 'ftp://h/v1'}", r"the scheme is 'ftp'"),
        ("{model: openai/x, api_base: 'http:///v1'}", r"\(no host\)"),
        ("{model: openai/x, api_base: 'http://h:99999/v1'}", r"a port is a number from 1 to 65535"),
        ("{model: openai/x, api_base: 'http://h:0/v1'}", r"a port is a number from 1 to 65535"),
        ("{model: openai/x, api_base: 'http://h:port/v1'}", r"a port is a number from 1 to 65535"),
        ("{model: openai/x, api_base: ''}", r"\(it is empty\)"),
        ("{model: openai/x, params: {temperature: -1}}", r"'target.params.temperature' must be a number in \[0, 2\]"),
        ("{model: openai/x, params: {top_p: 0}}", r"'target.params.top_p' must be a number in \(0, 1\]"),
        ("{model: openai/x, params: {top_p: 1.5}}", r"'target.params.top_p' must be a number in \(0, 1\]"),
        ("{model: openai/x, params: {max_tokens: 0.5}}", r"'target.params.max_tokens' must be an integer"),
        ("{http: {url: 'http://h:70000/a', body: {q: '{prompt}'}, response: a}}", r"port outside 1-65535"),
    ],
)
def test_a_bad_model_entry_is_refused_when_read(tmp_path: Path, entry: str, expected: str) -> None:
    message = error(tmp_path, f"baselines: [openai/b]\ntarget: {entry}\n")
    assert re.search(expected, message), message
    assert "llmbias.yaml:2" in message


def test_an_api_base_with_a_password_is_not_shown_in_the_error(tmp_path: Path) -> None:
    message = error(tmp_path, "target: {model: openai/x, api_base: 'http://me:s3cret@h:123456/v1'}\n")
    assert "s3cret" not in message and "'http://h:123456/v1'" in message
    message = error(tmp_path, "target: {model: openai/x, api_base: 'http://me:s3cret@[::1/v1'}\n")
    assert "s3cret" not in message and "<not a URL>" in message


def test_an_alias_on_its_own_line_is_named_by_that_line(tmp_path: Path) -> None:
    message = error(tmp_path, "target:\n  model: openai/x\n  alias: ''\n")
    assert message.startswith(f"{tmp_path / 'llmbias.yaml'}:3: 'target.alias'")


def test_good_entries_still_read(tmp_path: Path) -> None:
    settings = resolve(
        tmp_path,
        """
        target: {model: openai/x, alias: ' mine ', api_base: 'https://h:8443/v1/', api_key_env: MY_KEY,
                 params: {temperature: 0, top_p: 1, max_tokens: 64}}
        baselines: [{model: openai/b, api_base: 'http://[::1]:8000/v1'}]
        """,
    )
    assert settings.target is not None
    assert (settings.target.alias, settings.target.api_base, settings.target.api_key_env) == (
        "mine",
        "https://h:8443/v1",
        "MY_KEY",
    )
    assert settings.baselines[0].api_base == "http://[::1]:8000/v1"


def test_an_inline_model_on_the_command_line_is_checked_too(tmp_path: Path) -> None:
    message = error(tmp_path, "baselines: [openai/b]\n", cli={"target": "{model: openai/x, api_base: 'http://h:0'}"})
    assert message.startswith("--llmbias-target: 'target.api_base' must be an http:// or https:// URL")


# -- the size of a plan -------------------------------------------------------------------------------


def roster(max_calls: int = MAX_CALLS_DEFAULT) -> Settings:
    return Settings(
        target=ModelSpec("openai/t", "t"),
        baselines=(ModelSpec("openai/b1", "b1"), ModelSpec("openai/b2", "b2")),
        generation=GenerationSettings(samples=1),
        collection=CollectionSettings(fingerprint=False, max_calls=max_calls),
    )


def test_a_plan_beyond_max_calls_is_refused_before_a_call_is_built() -> None:
    domain = load_domain("us_politics")
    questions = len(domain.select(None))
    request = ResponseRequest("us_politics", samples=10**9)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        grid(request, roster(), domain)
    assert time.perf_counter() - start < 0.5
    message = str(info.value)
    assert f"{3 * questions * 10**9:,} calls (3 model(s) x {questions} question(s) x 1,000,000,000 sample(s)" in message
    assert "from the marker's samples=" in message
    assert f"collection.max_calls ({MAX_CALLS_DEFAULT:,})" in message and "--llmbias-plan" in message


def test_max_calls_is_the_bound_itself() -> None:
    domain = load_domain("us_politics")
    questions = len(domain.select(None))
    request = ResponseRequest("us_politics", samples=2)
    assert len(grid(request, roster(max_calls=3 * questions * 2), domain)) == 3 * questions * 2
    with pytest.raises(ConfigError, match=r"from the marker's samples=\), more than collection.max_calls"):
        grid(request, roster(max_calls=3 * questions * 2 - 1), domain)
    with pytest.raises(ConfigError, match=r"sample\(s\) from generation.samples\)"):
        grid(ResponseRequest("us_politics"), roster(max_calls=1), domain)


@pytest.mark.parametrize(
    ("marker", "domain", "kwargs", "expected"),
    [
        ("bias_stance", "binary_opinions", {"rounds": 10**9}, r"x 1,000,000,000 round\(s\) from the marker's rounds="),
        ("bias_preference", "political_topics", {"articles": 10**9}, r"x 1,000,000,000 article\(s\) from the marker's"),
    ],
)
def test_a_gate_with_calls_of_its_own_is_held_to_max_calls_too(
    tmp_path: Path, marker: str, domain: str, kwargs: dict, expected: str
) -> None:
    from pytest_llmbias.config.settings import StoreSettings
    from pytest_llmbias.gates import GATES
    from pytest_llmbias.session import BiasSession

    session = BiasSession(dataclasses.replace(roster(), store=StoreSettings(dir=tmp_path / "store")))
    try:
        gate = GATES[marker]
        start = time.perf_counter()
        with pytest.raises(ConfigError, match=rf"^@pytest.mark.{marker} on domain '{domain}' would need .*{expected}"):
            gate.plan(gate.parse((domain,), kwargs), session)
        assert time.perf_counter() - start < 0.5
    finally:
        session.close()
