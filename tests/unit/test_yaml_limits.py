"""YAML that cannot explode: every file the plugin reads is refused, fast and by name, when it nests
too deeply, when its aliases stand for too many values, or when an alias contains itself."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest
import yaml

from pytest_llmbias.config import yamlutil
from pytest_llmbias.config.rubric_file import load_rubric
from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.config.yamlutil import (
    MAX_DEPTH,
    MAX_NODES,
    compose_bounded,
    load_inline_mapping,
    load_yaml_text,
    load_yaml_with_lines,
)
from pytest_llmbias.domains.loader import load_domain
from pytest_llmbias.errors import ConfigError, DomainError

SRC = Path(__file__).resolve().parents[2] / "src" / "pytest_llmbias"


def alias_bomb(levels: int = 9, fan: int = 9) -> str:
    """``levels`` anchors, each a list of ``fan`` aliases of the one before: ``fan ** levels`` strings."""
    rows = [f"a0: &a0 [{', '.join(['lol'] * fan)}]"]
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)]
    return "\n".join(rows) + "\n"


def nested_flow(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_block(depth: int) -> str:
    return "".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + "v\n"


def test_an_alias_bomb_in_a_domain_file_is_refused_in_well_under_a_second(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text("name: bomb\n" + alias_bomb(), encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(DomainError, match=r"bomb\.yaml:\d+: the YAML's aliases expand it to more than 250,000"):
        load_domain(path)
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize(
    "text", [nested_flow(500), nested_flow(5000), nested_block(200)], ids=["flow", "deep", "block"]
)
def test_deeply_nested_settings_are_a_config_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "llmbias.yaml"
    path.write_text("generation: " + text if text.startswith("[") else text, encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"llmbias\.yaml(:\d+)?: .*(nests deeper than {MAX_DEPTH}|nesting depth)"):
        resolve_settings(config_path=path, environ={}, cwd=tmp_path)
    assert time.perf_counter() - start < 0.5


def test_the_pure_python_parser_refuses_deep_nesting_as_too_deep_not_a_recursion_error() -> None:
    # the parser used when libyaml's binding cannot be (see yamlutil._safe_loader)
    loader = yaml.SafeLoader(nested_flow(5000))
    try:
        with pytest.raises(ConfigError, match=rf"^x\.yaml: the YAML nests deeper than {MAX_DEPTH} levels"):
            compose_bounded(loader, "x.yaml", ConfigError)
    finally:
        loader.dispose()


def test_nesting_at_the_bound_is_read_and_one_level_more_is_not() -> None:
    # MAX_DEPTH - 1 lists around one scalar: MAX_DEPTH nodes deep
    data, _ = load_yaml_text("[" * (MAX_DEPTH - 1) + "x" + "]" * (MAX_DEPTH - 1), source="ok", error=ConfigError)
    depth = 0
    while isinstance(data, list):
        data, depth = data[0], depth + 1
    assert (depth, data) == (MAX_DEPTH - 1, "x")
    with pytest.raises(ConfigError, match="nests deeper"):
        load_yaml_text("[" * MAX_DEPTH + "x" + "]" * MAX_DEPTH, source="deep", error=ConfigError)


def test_aliases_that_expand_to_the_bound_are_read_and_beyond_it_are_not() -> None:
    # four levels of 20-fold aliases: 20 + 400 + 8,000 + 160,000 strings, with the lists and keys
    data, _ = load_yaml_text(alias_bomb(levels=4, fan=20), source="ok", error=ConfigError)
    assert len(data["a3"]) == 20 and data["a3"][0][0][0][0] == "lol"
    with pytest.raises(ConfigError, match=f"more than {MAX_NODES:,} values"):
        load_yaml_text(alias_bomb(levels=5, fan=20), source="big", error=ConfigError)


def test_a_recursive_alias_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "llmbias.yaml"
    path.write_text("target: openai/x\ngeneration:\n  seed: &a [1, *a]\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"llmbias\.yaml:3: a YAML alias refers to a mapping or list that contains it"
    ):
        load_yaml_with_lines(path, error=ConfigError)


def test_ordinary_aliases_still_work(tmp_path: Path) -> None:
    path = tmp_path / "llmbias.yaml"
    path.write_text(
        "models:\n  - &base {model: openai/a, alias: a}\ntarget: a\nbaselines: [{model: openai/b}, *base]\n",
        encoding="utf-8",
    )
    data, lines = load_yaml_with_lines(path, error=ConfigError)
    assert data["baselines"][1] == {"model": "openai/a", "alias": "a"}
    assert lines["baselines"] == 4


def test_an_inline_model_bomb_names_the_option_and_no_line() -> None:
    text = "{" + alias_bomb().replace("\n", ", ").rstrip(", ") + "}"
    with pytest.raises(ConfigError, match=r"^--llmbias-target: the inline model .*more than 250,000 values"):
        load_inline_mapping(text, what="--llmbias-target", error=ConfigError)


def test_a_rubric_bomb_is_a_config_error_naming_the_rubric(tmp_path: Path) -> None:
    path = tmp_path / "rubric.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"rubric\.yaml:\d+: the YAML's aliases"):
        load_rubric(path)


def test_every_yaml_parse_of_the_package_goes_through_the_bounded_loader() -> None:
    """No module but yamlutil builds a YAML loader or calls yaml.load/safe_load/full_load."""
    direct = {"load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all", "compose", "parse"}
    found = []
    for path in SRC.rglob("*.py"):
        if path == Path(yamlutil.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "yaml":
                if node.attr in direct or node.attr.endswith("Loader"):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}: yaml.{node.attr}")
    assert found == []


# -- published data: JSON lines and CSV ---------------------------------------------------------------


def test_a_json_line_nested_too_deeply_in_published_data_is_a_domain_error(tmp_path: Path) -> None:
    from pytest_llmbias.domains.bbq_file import read_bbq
    from pytest_llmbias.domains.discrim_file import read_discrim

    path = tmp_path / "data.jsonl"
    path.write_text('{"a": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    for read in (read_bbq, read_discrim):
        with pytest.raises(DomainError, match=r"data\.jsonl:(1|2): "):
            read(path)
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    for read in (read_bbq, read_discrim):
        with pytest.raises(DomainError, match=r"data\.jsonl:1: not a JSON line \(maximum recursion depth"):
            read(path)


@pytest.mark.parametrize(
    "body", [b"a,b\n" + b"x" * 200_000 + b",y\n", b"a,b\n\xff\xfe,y\n"], ids=["over-the-field-limit", "not-utf-8"]
)
def test_a_published_csv_that_cannot_be_read_is_a_domain_error_naming_it(tmp_path: Path, body: bytes) -> None:
    from pytest_llmbias.domains.pairs import COLUMNS, read_pairs_csv

    path = tmp_path / "eval_set.csv"
    path.write_bytes(",".join(COLUMNS).encode() + b"\n" + body.split(b"\n", 1)[1])
    with pytest.raises(DomainError, match=r"eval_set\.csv:\d+: "):
        read_pairs_csv(path)
