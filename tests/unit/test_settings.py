from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_llmbias.choices import CacheMode
from pytest_llmbias.config.settings import CollectionSettings, ModelSpec, Settings, StoreSettings
from pytest_llmbias.config.settings_sources import find_config, resolve_settings
from pytest_llmbias.errors import ConfigError


def write_config(tmp_path: Path, text: str, name: str = "llmbias.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def resolve(tmp_path: Path, text: str | None = None, *, cli=None, env=None) -> Settings:
    config = write_config(tmp_path, text) if text is not None else None
    return resolve_settings(cli=cli or {}, environ=env or {}, config_path=config, cwd=tmp_path)


def config_error(tmp_path: Path, text: str, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(tmp_path, text, **kwargs)
    return str(info.value)


# --------------------------------------------------------------------------------------------
# Defaults and precedence


def test_defaults_without_any_source(tmp_path: Path) -> None:
    settings = resolve(tmp_path)
    assert settings.target is None
    assert settings.baselines == ()
    assert settings.collection == CollectionSettings()
    assert settings.store.cache == "use"
    assert settings.store.offline is False
    assert settings.store.dir == (tmp_path / ".llmbias").resolve()
    assert settings.source is None


FILE = """
target: openai/file-target
baselines: [openai/file-b1, openai/file-b2]
collection:
  concurrency: 3
store:
  dir: file-store
  cache: refresh
  offline: false
"""


def test_file_overrides_defaults(tmp_path: Path) -> None:
    settings = resolve(tmp_path, FILE)
    assert settings.target is not None and settings.target.model == "openai/file-target"
    assert [b.model for b in settings.baselines] == ["openai/file-b1", "openai/file-b2"]
    assert settings.collection.concurrency == 3
    assert settings.store.dir == (tmp_path / "file-store").resolve()
    assert settings.store.cache == "refresh"
    assert settings.source == tmp_path / "llmbias.yaml"


ENV = {
    "LLMBIAS_TARGET": "openai/env-target",
    "LLMBIAS_BASELINES": "openai/env-b1, openai/env-b2 ,,openai/env-b3",
    "LLMBIAS_STORE": "env-store",
    "LLMBIAS_CONCURRENCY": "7",
    "LLMBIAS_CACHE": "use",
    "LLMBIAS_OFFLINE": "true",
}


def test_env_overrides_file(tmp_path: Path) -> None:
    settings = resolve(tmp_path, FILE, env=ENV)
    assert settings.target is not None and settings.target.model == "openai/env-target"
    assert [b.model for b in settings.baselines] == ["openai/env-b1", "openai/env-b2", "openai/env-b3"]
    assert settings.store.dir == (tmp_path / "env-store").resolve()
    assert settings.collection.concurrency == 7
    assert settings.store.cache == "use"
    assert settings.store.offline is True


def test_cli_overrides_env_and_file(tmp_path: Path) -> None:
    cli = {
        "target": "openai/cli-target",
        "baselines": ["openai/cli-b1"],
        "store": "cli-store",
        "concurrency": 11,
        "cache": "off",
        "offline": False,  # a flag left off is not an override
    }
    env = dict(ENV, LLMBIAS_OFFLINE="false", LLMBIAS_CACHE="refresh")
    settings = resolve(tmp_path, FILE, env=env, cli=cli)
    assert settings.target is not None and settings.target.model == "openai/cli-target"
    assert [b.model for b in settings.baselines] == ["openai/cli-b1"]
    assert settings.store.dir == (tmp_path / "cli-store").resolve()
    assert settings.collection.concurrency == 11
    assert settings.store.cache == "off"
    assert settings.store.offline is False


def test_cli_offline_overrides_env_false(tmp_path: Path) -> None:
    settings = resolve(tmp_path, env={"LLMBIAS_OFFLINE": "false"}, cli={"offline": True})
    assert settings.store.offline is True


def test_env_offline_false_overrides_file_true(tmp_path: Path) -> None:
    settings = resolve(tmp_path, "store: {offline: true}\n", env={"LLMBIAS_OFFLINE": "0"})
    assert settings.store.offline is False
    assert resolve(tmp_path, "store: {offline: true}\n").store.offline is True


def test_cli_none_values_do_not_override(tmp_path: Path) -> None:
    cli = {"target": None, "baselines": [], "concurrency": None, "cache": None, "store": None}
    settings = resolve(tmp_path, FILE, cli=cli)
    assert settings.target is not None and settings.target.model == "openai/file-target"
    assert len(settings.baselines) == 2
    assert settings.collection.concurrency == 3
    assert settings.store.cache == "refresh"


def test_empty_env_values_are_ignored(tmp_path: Path) -> None:
    settings = resolve(tmp_path, FILE, env={"LLMBIAS_TARGET": "", "LLMBIAS_CONCURRENCY": ""})
    assert settings.target is not None and settings.target.model == "openai/file-target"
    assert settings.collection.concurrency == 3


# --------------------------------------------------------------------------------------------
# Model entries


def test_model_entries_as_strings_and_mappings(tmp_path: Path) -> None:
    settings = resolve(
        tmp_path,
        """
        target: openai/gpt-4o-mini
        baselines:
          - hosted_vllm/meta-llama/Llama-3-8B
          - model: openai/local-model
            alias: local
            api_base: http://127.0.0.1:8000/v1///
            api_key_env: LOCAL_KEY
            params: {top_p: 0.9, extra_body: {x: 1}}
          - model: anthropic/claude-x
        """,
    )
    assert settings.target == ModelSpec(model="openai/gpt-4o-mini", alias="gpt-4o-mini")
    b0, b1, b2 = settings.baselines
    assert b0.alias == "Llama-3-8B"
    assert b0.api_base is None and b0.api_key_env is None and dict(b0.params) == {}
    assert b1.alias == "local"
    assert b1.api_base == "http://127.0.0.1:8000/v1"
    assert b1.api_key_env == "LOCAL_KEY"
    assert dict(b1.params) == {"top_p": 0.9, "extra_body": {"x": 1}}
    assert b2.alias == "claude-x"
    assert settings.roster == (settings.target, b0, b1, b2)


def test_model_without_provider_prefix_is_its_own_alias(tmp_path: Path) -> None:
    settings = resolve(tmp_path, "target: gpt-4o\n")
    assert settings.target is not None and settings.target.alias == "gpt-4o"


def test_settings_model_lookup(tmp_path: Path) -> None:
    settings = resolve(tmp_path, "target: openai/a\nbaselines: [openai/b]\njudge: openai/j\n")
    assert settings.model("b").model == "openai/b"
    assert settings.model("j").model == "openai/j"
    with pytest.raises(ConfigError, match="'nope'.*known: a, b"):
        settings.model("nope")


# --------------------------------------------------------------------------------------------
# Errors name the key, the file and the line


def test_unknown_top_level_key(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "target: openai/a\n\ntargte: openai/b\n")
    assert "'targte'" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:3" in msg
    assert "baselines" in msg  # lists accepted keys


def test_unknown_key_inside_section(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "collection:\n  concurrency: 4\n  bogus: 1\n")
    assert "collection.bogus" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:3" in msg
    assert "concurrency" in msg and "retries" in msg


def test_wrong_type_concurrency(tmp_path: Path) -> None:
    msg = config_error(tmp_path, 'target: openai/a\ncollection: {concurrency: "many"}\n')
    assert "collection.concurrency" in msg
    assert "'many'" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:2" in msg


def test_samples_zero(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "generation:\n  temperature: 0\n  samples: 0\n")
    assert "generation.samples" in msg
    assert "positive integer" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:3" in msg


@pytest.mark.parametrize("text", ["collection: {concurrency: true}\n", "collection: {concurrency: 1.5}\n"])
def test_concurrency_rejects_bool_and_float(tmp_path: Path, text: str) -> None:
    msg = config_error(tmp_path, text)
    assert "collection.concurrency" in msg and f"{tmp_path / 'llmbias.yaml'}:1" in msg


def test_bad_cache_mode(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "store:\n  cache: sometimes\n")
    assert "store.cache" in msg
    assert "use | refresh | off" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:2" in msg


def test_section_must_be_mapping(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "# settings\ngeneration: 3\n")
    assert "'generation'" in msg and f"{tmp_path / 'llmbias.yaml'}:2" in msg


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "target: openai/a\nbaselines: []\ntarget: openai/b\n")
    assert "duplicate key 'target'" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:3" in msg
    assert "line 1" in msg


def test_invalid_yaml_syntax(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "target: openai/a\nbaselines: [openai/b\ncollection: {}\n")
    assert "invalid YAML" in msg
    assert str(tmp_path / "llmbias.yaml") + ":" in msg


def test_an_unsafe_yaml_tag_is_refused_with_its_line(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "target: openai/a\nbaselines:\n  - !!python/object/apply:os.system ['true']\n")
    assert "invalid YAML" in msg and "python/object/apply:os.system" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:3:" in msg


def test_settings_file_must_be_a_mapping(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "- a\n- b\n")
    assert str(tmp_path / "llmbias.yaml") in msg and "mapping" in msg


def test_empty_settings_file_is_defaults(tmp_path: Path) -> None:
    settings = resolve(tmp_path, "# nothing\n")
    assert settings.target is None and settings.collection == CollectionSettings()


def test_api_key_in_params_refused(tmp_path: Path) -> None:
    msg = config_error(
        tmp_path,
        """
        target: openai/a
        baselines:
          - model: openai/b
            params: {api_key: sk-secret}
        """,
    )
    assert "baselines[0].params.api_key" in msg
    assert "api_key_env" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:3" in msg
    assert "sk-secret" not in msg


@pytest.mark.parametrize("reserved", ["messages", "model", "stream"])
def test_other_reserved_params_refused(tmp_path: Path, reserved: str) -> None:
    msg = config_error(tmp_path, f"target:\n  model: openai/a\n  params: {{{reserved}: 1}}\n")
    assert f"target.params.{reserved}" in msg and f"{tmp_path / 'llmbias.yaml'}:1" in msg


def test_unknown_key_in_model_mapping(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "target:\n  model: openai/a\n  api_key: sk-x\n")
    assert "'api_key'" in msg and "'target'" in msg and f"{tmp_path / 'llmbias.yaml'}:1" in msg


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False), ("auto", None), ("null", None)])
def test_a_judge_may_be_told_whether_to_answer_in_json(tmp_path: Path, value: str, expected: bool | None) -> None:
    settings = resolve(tmp_path, f"judge: {{model: openai/j, structured: {value}}}\n")
    assert settings.judge is not None and settings.judge.structured is expected
    assert settings.to_dict()["judge"]["structured"] is expected


def test_structured_must_be_a_boolean_or_auto(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "judge:\n  model: openai/j\n  structured: sometimes\n")
    assert "'judge.structured' must be true, false or auto" in msg and "'sometimes'" in msg


def test_model_mapping_without_model(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "baselines:\n  - alias: x\n")
    assert "baselines[0]" in msg and "'model'" in msg and f"{tmp_path / 'llmbias.yaml'}:2" in msg


def test_baselines_must_be_a_list(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "target: openai/a\nbaselines: openai/b\n")
    assert "'baselines' must be a list" in msg and f"{tmp_path / 'llmbias.yaml'}:2" in msg


def test_duplicate_aliases(tmp_path: Path) -> None:
    msg = config_error(
        tmp_path,
        """
        target: openai/gpt-4o
        baselines:
          - azure/gpt-4o
        """,
    )
    assert "'gpt-4o'" in msg
    assert "target" in msg and "baselines[0]" in msg
    assert "alias" in msg
    assert f"{tmp_path / 'llmbias.yaml'}:2" in msg


def test_duplicate_aliases_resolved_by_explicit_alias(tmp_path: Path) -> None:
    settings = resolve(tmp_path, "target: openai/gpt-4o\nbaselines:\n  - {model: azure/gpt-4o, alias: az}\n")
    assert [s.alias for s in settings.roster] == ["gpt-4o", "az"]


def test_duplicate_aliases_from_env(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="share the alias 'm'"):
        resolve(tmp_path, env={"LLMBIAS_TARGET": "a/m", "LLMBIAS_BASELINES": "b/m"})


# --------------------------------------------------------------------------------------------
# Paths


def test_relative_store_dir_is_relative_to_config_file(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    config = write_config(conf_dir, "store:\n  dir: ../data/store\n  snapshots: [snaps/a.jsonl]\n")
    settings = resolve_settings(cli={}, environ={}, config_path=config, cwd=cwd)
    assert settings.store.dir == (tmp_path / "data" / "store").resolve()
    assert settings.store.snapshots == ((conf_dir / "snaps" / "a.jsonl").resolve(),)


def test_default_store_dir_is_beside_config_file(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    config = write_config(conf_dir, "target: openai/a\n")
    settings = resolve_settings(cli={}, environ={}, config_path=config, cwd=tmp_path)
    assert settings.store.dir == (conf_dir / ".llmbias").resolve()


def test_absolute_store_dir_kept(tmp_path: Path) -> None:
    target = tmp_path / "abs-store"
    settings = resolve(tmp_path, f"store:\n  dir: {json.dumps(str(target))}\n")
    assert settings.store.dir == target


def test_cli_and_env_store_paths_are_relative_to_cwd(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    config = write_config(conf_dir, "store: {dir: from-file}\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env_only = resolve_settings(cli={}, environ={"LLMBIAS_STORE": "s"}, config_path=config, cwd=cwd)
    assert env_only.store.dir == (cwd / "s").resolve()
    cli = resolve_settings(cli={"store": "c"}, environ={"LLMBIAS_STORE": "s"}, config_path=config, cwd=cwd)
    assert cli.store.dir == (cwd / "c").resolve()


# --------------------------------------------------------------------------------------------
# Environment parsing


def test_env_baselines_comma_list(tmp_path: Path) -> None:
    settings = resolve(tmp_path, env={"LLMBIAS_BASELINES": " openai/x ,anthropic/y,, "})
    assert [(b.model, b.alias) for b in settings.baselines] == [("openai/x", "x"), ("anthropic/y", "y")]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("0", False),
        ("no", False),
        ("Off", False),
    ],
)
def test_env_offline_values(tmp_path: Path, raw: str, expected: bool) -> None:
    assert resolve(tmp_path, env={"LLMBIAS_OFFLINE": raw}).store.offline is expected


def test_env_offline_bad_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(tmp_path, env={"LLMBIAS_OFFLINE": "maybe"})
    assert "$LLMBIAS_OFFLINE" in str(info.value) and "'maybe'" in str(info.value)


def test_env_concurrency_not_an_int(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(tmp_path, env={"LLMBIAS_CONCURRENCY": "lots"})
    assert "$LLMBIAS_CONCURRENCY" in str(info.value) and "'lots'" in str(info.value)


def test_env_concurrency_zero(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\$LLMBIAS_CONCURRENCY.*positive integer"):
        resolve(tmp_path, env={"LLMBIAS_CONCURRENCY": "0"})


def test_env_bad_cache_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\$LLMBIAS_CACHE"):
        resolve(tmp_path, env={"LLMBIAS_CACHE": "always"})


def test_cli_bad_values_name_the_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--llmbias-concurrency"):
        resolve(tmp_path, cli={"concurrency": 0})
    with pytest.raises(ConfigError, match="--llmbias-cache"):
        resolve(tmp_path, cli={"cache": "always"})


# --------------------------------------------------------------------------------------------
# Ini options: between the environment and the file


def resolve_ini(tmp_path: Path, text: str | None = None, *, ini, env=None, cli=None, ini_dir=None) -> Settings:
    config = write_config(tmp_path, text) if text is not None else None
    return resolve_settings(
        cli=cli or {},
        environ=env or {},
        config_path=config,
        cwd=tmp_path,
        ini=ini,
        ini_dir=ini_dir or tmp_path,
        ini_file=tmp_path / "pytest.ini",
    )


INI = {
    "target": "openai/ini-target",
    "baselines": ["openai/ini-b1", "openai/ini-b2"],
    "concurrency": "5",
    "cache": "off",
    "offline": "false",
    "store": "ini-store",
    "snapshots": [],  # what getini returns for an absent key: not set
    "judge": "",
}


def test_ini_overrides_file(tmp_path: Path) -> None:
    settings = resolve_ini(tmp_path, FILE, ini=INI)
    assert settings.target is not None and settings.target.model == "openai/ini-target"
    assert [b.model for b in settings.baselines] == ["openai/ini-b1", "openai/ini-b2"]
    assert settings.collection.concurrency == 5
    assert settings.store.cache == "off"
    assert settings.store.offline is False
    assert settings.store.dir == (tmp_path / "ini-store").resolve()
    assert settings.judge is None


def test_env_and_cli_override_ini(tmp_path: Path) -> None:
    settings = resolve_ini(tmp_path, FILE, ini=INI, env={"LLMBIAS_CONCURRENCY": "7", "LLMBIAS_TARGET": "openai/env-t"})
    assert settings.collection.concurrency == 7
    assert settings.target is not None and settings.target.model == "openai/env-t"
    assert settings.store.cache == "off"  # from the ini: no variable, no option
    settings = resolve_ini(
        tmp_path, FILE, ini=INI, env={"LLMBIAS_CONCURRENCY": "7"}, cli={"concurrency": 11, "cache": "use"}
    )
    assert settings.collection.concurrency == 11
    assert settings.store.cache == "use"


def test_ini_values_as_pyproject_ini_options_gives_them(tmp_path: Path) -> None:
    """[tool.pytest.ini_options] turns `llmbias_offline = true` into the string "True"."""
    settings = resolve_ini(tmp_path, ini={"offline": "True", "snapshots": ["a.jsonl", "sub/b.jsonl"]})
    assert settings.store.offline is True
    assert settings.store.snapshots == ((tmp_path / "a.jsonl").resolve(), (tmp_path / "sub" / "b.jsonl").resolve())


def test_ini_paths_are_relative_to_the_ini_dir(tmp_path: Path) -> None:
    root = tmp_path / "root"
    settings = resolve_ini(tmp_path, ini={"export": "out/used.jsonl", "store": "s"}, ini_dir=root)
    assert settings.store.export == (root / "out" / "used.jsonl").resolve()
    assert settings.store.dir == (root / "s").resolve()
    cli = resolve_ini(tmp_path, ini={"export": "out/used.jsonl"}, cli={"export": "x.jsonl"}, ini_dir=root)
    assert cli.store.export == (tmp_path / "x.jsonl").resolve()


@pytest.mark.parametrize(
    ("ini", "expected"),
    [
        (
            {"cache": "sometimes"},
            "ini option llmbias_cache ({ini}): 'store.cache' must be one of use | refresh | off, got 'sometimes'",
        ),
        (
            {"offline": "maybe"},
            "ini option llmbias_offline ({ini}): 'store.offline' must be true or false, got 'maybe'",
        ),
        (
            {"concurrency": "lots"},
            "ini option llmbias_concurrency ({ini}): 'collection.concurrency' must be a positive integer, got 'lots'",
        ),
    ],
)
def test_bad_ini_value_names_the_ini_key_and_what_it_accepts(tmp_path: Path, ini, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_ini(tmp_path, ini=ini)
    assert str(info.value) == expected.format(ini=tmp_path / "pytest.ini")


def test_bad_ini_value_is_an_error_even_when_the_environment_overrides_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="llmbias_cache"):
        resolve_ini(tmp_path, ini={"cache": "sometimes"}, env={"LLMBIAS_CACHE": "use"})


def test_unknown_option_names_are_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown option name.*offlin"):
        resolve(tmp_path, cli={"offlin": True})
    with pytest.raises(ValueError, match="unknown option name.*config"):
        resolve_ini(tmp_path, ini={"config": "x.yaml"})  # the file is found by find_config


def test_cache_mode_is_a_cache_mode_member(tmp_path: Path) -> None:
    settings = resolve(tmp_path, "store: {cache: refresh}\n")
    assert settings.store.cache is CacheMode.REFRESH
    assert settings.to_dict()["store"]["cache"] == "refresh"


# --------------------------------------------------------------------------------------------
# Cross-field checks


def test_offline_with_refresh_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="offline.*refresh"):
        resolve(tmp_path, "store: {cache: refresh}\n", cli={"offline": True})
    with pytest.raises(ConfigError, match="offline.*refresh"):
        resolve(tmp_path, env={"LLMBIAS_OFFLINE": "1", "LLMBIAS_CACHE": "refresh"})


def test_offline_with_cache_off_is_rejected_even_with_a_snapshot(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nothing to read"):
        resolve(tmp_path, cli={"offline": True, "cache": "off"})
    # off reads no snapshot either (see the store's tests): every call would be missing
    snap = tmp_path / "s.jsonl"
    with pytest.raises(ConfigError, match="nothing to read.*use cache mode 'use' to replay a snapshot"):
        resolve(tmp_path, cli={"offline": True, "cache": "off", "snapshots": [str(snap)]})
    settings = resolve(tmp_path, cli={"offline": True, "snapshots": [str(snap)]})
    assert settings.store.snapshots == (snap.resolve(),)


def test_require_roster_no_target(tmp_path: Path) -> None:
    settings = resolve(tmp_path, "baselines: [openai/b]\n")
    with pytest.raises(ConfigError) as info:
        settings.require_roster()
    msg = str(info.value)
    assert "no target" in msg
    assert "--llmbias-target" in msg and "LLMBIAS_TARGET" in msg and "llmbias.yaml" in msg
    assert str(tmp_path / "llmbias.yaml") in msg


def test_require_roster_too_few_baselines(tmp_path: Path) -> None:
    settings = resolve(tmp_path, "target: openai/a\nbaselines: [openai/b]\n")
    settings.require_roster(min_baselines=1)
    with pytest.raises(ConfigError) as info:
        settings.require_roster(min_baselines=2)
    msg = str(info.value)
    assert "1 baseline" in msg and "at least 2" in msg
    assert "--llmbias-baseline" in msg and "'baselines'" in msg


def test_require_roster_zero_baselines_allowed(tmp_path: Path) -> None:
    settings = resolve(tmp_path, env={"LLMBIAS_TARGET": "openai/a"})
    settings.require_roster(min_baselines=0)
    with pytest.raises(ConfigError, match="0 baseline"):
        settings.require_roster()


# --------------------------------------------------------------------------------------------
# Secrets


def test_api_key_read_from_named_env_var() -> None:
    spec = ModelSpec(model="openai/a", alias="a", api_key_env="MY_KEY")
    assert spec.api_key({"MY_KEY": "sk-123"}) == "sk-123"
    assert ModelSpec(model="openai/a", alias="a").api_key({"MY_KEY": "sk-123"}) is None


@pytest.mark.parametrize("environ", [{}, {"MY_KEY": ""}])
def test_api_key_unset_is_a_clear_error(environ: dict[str, str]) -> None:
    spec = ModelSpec(model="openai/a", alias="a", api_key_env="MY_KEY")
    with pytest.raises(ConfigError) as info:
        spec.api_key(environ)
    msg = str(info.value)
    assert "$MY_KEY" in msg and "not set" in msg and "'a'" in msg


def test_api_key_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMBIAS_TEST_KEY_XYZ", "sk-from-os")
    spec = ModelSpec(model="openai/a", alias="a", api_key_env="LLMBIAS_TEST_KEY_XYZ")
    assert spec.api_key() == "sk-from-os"


def test_to_dict_has_no_secret_values(tmp_path: Path) -> None:
    secret = "sk-very-secret-value-123"
    settings = resolve(
        tmp_path,
        """
        target: {model: openai/a, api_key_env: A_KEY}
        baselines:
          - {model: openai/b, api_key_env: B_KEY, params: {top_p: 0.5}}
        """,
        env={"A_KEY": secret, "B_KEY": secret},
    )
    data = settings.to_dict()
    blob = json.dumps(data)  # also proves it is JSON-friendly
    assert secret not in blob
    assert data["target"]["api_key_env"] == "A_KEY"
    assert data["baselines"][0]["params"] == {"top_p": 0.5}
    assert data["store"]["dir"] == str((tmp_path / ".llmbias").resolve())
    assert "api_key" not in data["target"]


# --------------------------------------------------------------------------------------------
# find_config


def make_configs(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "root"
    cwd = tmp_path / "cwd"
    root.mkdir()
    cwd.mkdir()
    paths = {
        "cli": cwd / "cli.yaml",
        "ini": root / "ini.yaml",
        "env": cwd / "env.yaml",
        "default": root / "llmbias.yaml",
    }
    for p in paths.values():
        p.write_text("{}\n", encoding="utf-8")
    return {"root": root, "cwd": cwd, **paths}


def test_find_config_order(tmp_path: Path) -> None:
    p = make_configs(tmp_path)
    env = {"LLMBIAS_CONFIG": "env.yaml"}

    def find(cli, ini, environ):
        return find_config(cli_path=cli, ini_path=ini, environ=environ, rootdir=p["root"], cwd=p["cwd"])

    assert find("cli.yaml", "ini.yaml", env) == p["cli"].resolve()
    assert find(None, "ini.yaml", env) == p["ini"].resolve()
    assert find(None, None, env) == p["env"].resolve()
    assert find(None, None, {}) == p["default"]
    p["default"].unlink()
    assert find(None, None, {}) is None


@pytest.mark.parametrize(
    ("kwargs", "origin"),
    [
        ({"cli_path": "missing.yaml", "ini_path": None, "environ": {}}, "--llmbias-config"),
        ({"cli_path": None, "ini_path": "missing.yaml", "environ": {}}, "llmbias_config"),
        ({"cli_path": None, "ini_path": None, "environ": {"LLMBIAS_CONFIG": "missing.yaml"}}, "$LLMBIAS_CONFIG"),
    ],
)
def test_find_config_named_missing_file_is_error(tmp_path: Path, kwargs, origin: str) -> None:
    (tmp_path / "llmbias.yaml").write_text("{}\n", encoding="utf-8")  # not a fallback
    with pytest.raises(ConfigError) as info:
        find_config(rootdir=tmp_path, cwd=tmp_path, **kwargs)
    assert origin in str(info.value) and "missing.yaml" in str(info.value)


def test_find_config_directory_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    with pytest.raises(ConfigError, match="not a file"):
        find_config(cli_path="adir", ini_path=None, environ={}, rootdir=tmp_path, cwd=tmp_path)


def test_store_settings_defaults_are_sane() -> None:
    assert StoreSettings().cache == "use"
    assert StoreSettings().snapshots == ()


# --------------------------------------------------------------------------------------------
# Named features


def test_features_section(tmp_path: Path) -> None:
    (tmp_path / "models" / "clf").mkdir(parents=True)
    settings = resolve(
        tmp_path,
        """
        features:
          toxicity: {classifier: unitary/toxic-bert, label: toxic}
          stars: {classifier: models/clf, weights: {positive: 1, negative: -1}, batch_size: 8, max_length: 128}
          plain: some/hub-model
        """,
    )
    toxicity, stars, plain = settings.features
    assert (toxicity.name, toxicity.classifier, toxicity.label, toxicity.weights) == (
        "toxicity",
        "unitary/toxic-bert",
        "toxic",
        None,
    )
    assert stars.classifier == str((tmp_path / "models" / "clf").resolve())
    assert dict(stars.weights) == {"positive": 1.0, "negative": -1.0}
    assert (stars.batch_size, stars.max_length) == (8, 128)
    assert plain.classifier == "some/hub-model" and plain.label is None
    assert settings.to_dict()["features"][0]["label"] == "toxic"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("features: [a, b]", "'features' must map a feature name to its settings"),
        ("features:\n  tox: {model: x}", "unknown key 'features.tox.model'; accepted keys: classifier, label"),
        ("features:\n  tox: {label: toxic}", "'features.tox.classifier' must be a non-empty string"),
        (
            "features:\n  tox: {classifier: x, label: a, weights: {a: 1}}",
            "give 'features.tox.label' or 'features.tox.weights', not both",
        ),
        (
            "features:\n  tox: {classifier: x, weights: {a: yes}}",
            "'features.tox.weights' must map label names to numbers",
        ),
        ("features:\n  tox: {classifier: x, batch_size: 0}", "'features.tox.batch_size' must be a positive integer"),
        ("features:\n  'classifier:x': {classifier: x}", "is not a usable feature name"),
    ],
)
def test_bad_features_section(tmp_path: Path, body: str, message: str) -> None:
    assert message in config_error(tmp_path, body)


def test_yaml_still_loads_after_the_yaml_package_is_imported_afresh(tmp_path, monkeypatch):
    """pytester restores sys.modules after each test, so a later test can import ``yaml`` anew
    while libyaml's C binding keeps the first import's node classes: the loader must notice and
    parse with the pure-Python parser, not resolve every tag to None."""
    import sys

    from pytest_llmbias.config.yamlutil import load_yaml_with_lines

    path = tmp_path / "llmbias.yaml"
    path.write_text("target: openai/x\nbaselines: [openai/a, openai/b]\n")
    import yaml  # noqa: F401  (the first import, whose nodes libyaml's binding keeps)

    for name in [m for m in sys.modules if m == "yaml" or m.startswith("yaml.")]:
        monkeypatch.delitem(sys.modules, name)
    data, lines = load_yaml_with_lines(path, error=ValueError)
    assert data == {"target": "openai/x", "baselines": ["openai/a", "openai/b"]}
    assert lines["baselines"] == 2


def test_the_documented_configuration_example_is_a_valid_file(tmp_path: Path) -> None:
    """Every key of docs/configuration.md's example, with the defaults it shows (`null`: not set)."""
    from markdown_it import MarkdownIt

    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = next(
        t.content for t in MarkdownIt("commonmark").parse(page) if t.type == "fence" and "collection: {" in t.content
    )
    (tmp_path / "llmbias.yaml").write_text(block, encoding="utf-8")
    settings = resolve_settings(config_path=tmp_path / "llmbias.yaml", environ={}, cwd=tmp_path)
    assert settings.collection.max_cost is None and settings.collection.looks == 1
    assert settings.report.history is None and settings.release.record is None
    assert [b.alias for b in settings.baselines] == ["claude", "llama3"]
