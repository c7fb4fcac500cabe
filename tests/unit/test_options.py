"""The table of options (pytest_llmbias.config.option_table): complete, consistently named, in step with the
settings and the documentation."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from pytest_llmbias.choices import CacheMode, Choice
from pytest_llmbias.cli.command import markdown_table
from pytest_llmbias.config import settings_sources as settings_module
from pytest_llmbias.config.option_table import CONFIG, OPTIONS, SETTINGS_OPTIONS
from pytest_llmbias.config.options import KINDS, Option
from pytest_llmbias.config.settings import Settings

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_every_option_has_every_spelling(option: Option) -> None:
    for value in (option.name, option.key, option.flag, option.env, option.ini, option.help):
        assert isinstance(value, str) and value.strip()
    assert option.kind in KINDS


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_spellings_follow_the_name(option: Option) -> None:
    # A repeatable flag takes one value per use, so it is singular: --llmbias-baseline. A name's
    # underscore is a hyphen on the command line: --llmbias-max-cost, LLMBIAS_MAX_COST.
    flag_name = option.name.removesuffix("s") if option.repeatable else option.name
    assert option.flag == f"--llmbias-{flag_name.replace('_', '-')}"
    assert option.env == f"LLMBIAS_{option.name.upper()}"
    assert option.ini == f"llmbias_{option.name}"
    assert option.dest == f"llmbias_{flag_name}"


def test_names_and_keys_are_unique() -> None:
    for attribute in ("name", "key", "flag", "env", "ini"):
        values = [getattr(o, attribute) for o in OPTIONS]
        assert len(values) == len(set(values)), attribute


def test_the_options_today() -> None:
    assert [o.name for o in OPTIONS] == [
        "config",
        "target",
        "baselines",
        "judge",
        "judge_panel",
        "judge_combine",
        "judge_rubric",
        "judge_retest",
        "min_judge_agreement",
        "store",
        "store_url",
        "concurrency",
        "cache",
        "offline",
        "snapshots",
        "export",
        "max_cost",
        "batch",
        "batch_wait",
        "max_unparsed",
        "looks",
        "max_samples",
        "spending",
        "plan",
        "no_fingerprint",
        "record_release",
        "force",
        "against",
        "anchor",
        "release_dir",
        "markdown",
        "suite_alpha",
        "suite_power",
        "strict",
        "history",
        "json",
        "html",
        "mlflow",
        "mlflow_model",
        "mlflow_strict",
    ]
    assert CONFIG.ini == "llmbias_config"  # the ini key projects already use
    assert CONFIG not in SETTINGS_OPTIONS and len(SETTINGS_OPTIONS) == len(OPTIONS) - 1


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_choices_and_separators_go_with_their_kind(option: Option) -> None:
    assert (option.choices is not None) == (option.kind == "choice")
    if option.choices is not None:
        assert issubclass(option.choices, Choice)
    assert (option.separator is not None) == option.repeatable


def test_cache_takes_the_cache_modes() -> None:
    (cache,) = [o for o in OPTIONS if o.name == "cache"]
    assert cache.choices is CacheMode
    assert cache.argparse_kwargs()["choices"] == ("use", "refresh", "off")


def _settings_default(key: str) -> object:
    value: object = Settings()
    for part in key.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("option", SETTINGS_OPTIONS, ids=lambda o: o.name)
def test_defaults_are_the_settings_defaults(option: Option) -> None:
    assert option.default == _settings_default(option.key)


def test_each_settings_field_has_its_kind_declared_once() -> None:
    """A field that an option sets takes its kind from the table; only the others are in
    settings' own table of file-only kinds."""
    option_keys = {o.key for o in SETTINGS_OPTIONS}
    file_only = {f"{section}.{name}" for section, name in settings_module._FILE_KINDS}
    assert not option_keys & file_only
    fields = {
        f"{section}.{f.name}" for section, cls in settings_module._SECTIONS.items() for f in dataclasses.fields(cls)
    }
    assert fields == (option_keys | file_only) - {"target", "baselines", "judge", "judges"}


def test_argparse_options_from_the_table() -> None:
    parser = argparse.ArgumentParser()
    for option in OPTIONS:
        parser.add_argument(option.flag, **option.argparse_kwargs())
    assert "80% power" in parser.format_help()  # a percent sign in a help text is not a format
    unset = vars(parser.parse_args([]))
    assert unset == {
        "llmbias_config": None,
        "llmbias_target": None,
        "llmbias_baseline": [],
        "llmbias_judge": None,
        "llmbias_judge_panel": [],
        "llmbias_judge_combine": None,
        "llmbias_judge_rubric": None,
        "llmbias_judge_retest": None,
        "llmbias_min_judge_agreement": None,
        "llmbias_store": None,
        "llmbias_store_url": None,
        "llmbias_concurrency": None,
        "llmbias_cache": None,
        "llmbias_offline": False,
        "llmbias_snapshot": [],
        "llmbias_export": None,
        "llmbias_max_cost": None,
        "llmbias_batch": False,
        "llmbias_batch_wait": None,
        "llmbias_max_unparsed": None,
        "llmbias_looks": None,
        "llmbias_max_samples": None,
        "llmbias_spending": None,
        "llmbias_plan": False,
        "llmbias_no_fingerprint": False,
        "llmbias_record_release": None,
        "llmbias_force": False,
        "llmbias_against": None,
        "llmbias_anchor": None,
        "llmbias_release_dir": None,
        "llmbias_markdown": None,
        "llmbias_suite_alpha": None,
        "llmbias_suite_power": None,
        "llmbias_strict": False,
        "llmbias_history": None,
        "llmbias_json": None,
        "llmbias_html": None,
        "llmbias_mlflow": False,
        "llmbias_mlflow_model": None,
        "llmbias_mlflow_strict": False,
    }
    given = vars(
        parser.parse_args(
            [
                "--llmbias-baseline",
                "a/x",
                "--llmbias-baseline",
                "b/y",
                "--llmbias-concurrency",
                "4",
                "--llmbias-cache",
                "off",
                "--llmbias-offline",
                "--llmbias-judge-retest",
                "0",
            ]
        )
    )
    assert given["llmbias_judge_retest"] == 0
    assert given["llmbias_baseline"] == ["a/x", "b/y"]
    assert given["llmbias_concurrency"] == 4
    assert given["llmbias_cache"] == "off"
    assert given["llmbias_offline"] is True


def test_ini_types_and_help() -> None:
    by_name = {o.name: o for o in OPTIONS}
    assert by_name["baselines"].ini_type == "linelist" and by_name["baselines"].ini_default == []
    assert by_name["offline"].ini_type == "string" and by_name["offline"].ini_default == ""
    assert "relative to the rootdir" in by_name["export"].ini_help
    assert "(default: use)" in by_name["cache"].help_text


def test_the_configuration_page_has_exactly_the_rendered_table() -> None:
    """docs/configuration.md's options table is markdown_table(): python scripts/readme_tables.py --write
    when an option changes."""
    text = CONFIGURATION.read_text(encoding="utf-8")
    header = markdown_table().splitlines()[0]
    assert text.count(header) == 1
    start = text.index(header)
    block = re.match(r"(?:\|.*\n)+", text[start:])
    assert block is not None
    assert block.group(0) == markdown_table()
    assert start > text.index("# Configuration")


def test_markdown_table_rows() -> None:
    rows = markdown_table().splitlines()
    assert rows[0] == "| command line | environment | ini | llmbias.yaml |"
    assert len(rows) == 2 + len(OPTIONS)
    assert "| `--llmbias-cache use\\|refresh\\|off` | `LLMBIAS_CACHE` | `llmbias_cache` | `store.cache` |" in rows
    assert any(r.startswith("| `--llmbias-snapshot PATH` (repeat") and "`os.pathsep`-separated" in r for r in rows)
