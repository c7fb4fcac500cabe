"""Endpoints from the command line: a model option takes a litellm model string, the alias of one
of the file's ``models:``, or an inline YAML flow mapping validated like the file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.errors import ConfigError

FILE = """
models:
  - {model: openai/acme, alias: acme-next, api_base: "http://127.0.0.1:8000/v1", system: "Be brief."}
  - {model: openai/acme, alias: acme-v1, api_base: "http://127.0.0.1:8000/v1"}
  - {model: openai/acme, alias: acme-v2, api_base: "http://127.0.0.1:8000/v1", system: "Be neutral."}
target: acme-next
baselines: [acme-v1, acme-v2]
"""


def resolve(tmp_path: Path, text: str = FILE, **kw):
    path = tmp_path / "llmbias.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return resolve_settings(config_path=path, cwd=tmp_path, **kw)


def error(tmp_path: Path, text: str = FILE, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(tmp_path, text, **kw)
    return str(info.value)


def test_the_file_names_its_models_once_and_uses_them_by_alias(tmp_path: Path) -> None:
    s = resolve(tmp_path)
    assert s.target.alias == "acme-next" and s.target.system == "Be brief."
    assert [b.alias for b in s.baselines] == ["acme-v1", "acme-v2"] and s.baselines[1].system == "Be neutral."


def test_the_command_line_names_a_defined_model_or_writes_one_inline(tmp_path: Path) -> None:
    s = resolve(tmp_path, cli={"target": "acme-v2", "baselines": ["acme-v1", "acme-next"]})
    assert s.target.alias == "acme-v2" and s.target.system == "Be neutral."
    assert "share the alias 'acme-v1'" in error(tmp_path, cli={"target": "acme-v1"})
    inline = '{model: openai/x, alias: x-local, api_base: "http://127.0.0.1:9000/v1", system: "You are X."}'
    s = resolve(tmp_path, cli={"target": inline, "judge": "{model: openai/j, structured: false}"})
    assert (s.target.model, s.target.alias, s.target.api_base, s.target.system) == (
        "openai/x",
        "x-local",
        "http://127.0.0.1:9000/v1",
        "You are X.",
    )
    assert s.judge.structured is False
    s = resolve(tmp_path, cli={"baselines": ["acme-v1", "{model: openai/y, alias: y}"]})
    assert [b.alias for b in s.baselines] == ["acme-v1", "y"]


def test_the_environment_takes_inline_models_between_commas(tmp_path: Path) -> None:
    env = {"LLMBIAS_BASELINES": '{model: openai/y, alias: y, api_base: "http://h:1/v1"},acme-v1'}
    s = resolve(tmp_path, environ=env)
    assert [b.alias for b in s.baselines] == ["y", "acme-v1"] and s.baselines[0].api_base == "http://h:1/v1"
    s = resolve(tmp_path, environ={"LLMBIAS_TARGET": "{model: openai/z, alias: z}"})
    assert s.target.alias == "z"


def test_a_bad_inline_model_names_the_option_and_the_column(tmp_path: Path) -> None:
    msg = error(tmp_path, cli={"target": "{model: openai/x, api_base: [unclosed}"})
    assert msg.startswith("--llmbias-target: the inline model") and "does not parse as YAML at column" in msg
    msg = error(tmp_path, cli={"target": "{model: openai/x, colour: red}"})
    assert "--llmbias-target" in msg and "unknown key 'colour'" in msg
    msg = error(tmp_path, environ={"LLMBIAS_TARGET": "{model: openai/x, system: 3}"})
    assert "$LLMBIAS_TARGET" in msg and "'target.system' must be a non-empty string" in msg


def test_an_alias_that_is_not_defined_is_a_model_string(tmp_path: Path) -> None:
    # a plain string that names no defined model is a litellm model string, as before
    assert resolve(tmp_path, cli={"target": "openai/gpt-4o-mini"}).target.model == "openai/gpt-4o-mini"


def test_models_must_be_a_list_with_unique_aliases(tmp_path: Path) -> None:
    assert "'models' must be a list" in error(tmp_path, "models: openai/x\n")
    msg = error(tmp_path, "models:\n  - {model: openai/a, alias: a}\n  - {model: openai/b, alias: a}\n")
    assert "the alias 'a' is defined twice in 'models'" in msg and "llmbias.yaml:3" in msg
