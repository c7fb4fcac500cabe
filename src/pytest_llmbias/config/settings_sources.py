"""Where :class:`~pytest_llmbias.config.settings.Settings` come from: the file, the environment, the ini
file and the command line, resolved once per session (command line > environment > ini >
``llmbias.yaml`` > defaults), each value parsed and checked.

Which settings can be given outside the file, and how each is spelled, is declared once in
:data:`pytest_llmbias.config.option_table.OPTIONS`; this module parses and checks them from that table. The file
is found by ``--llmbias-config PATH``, the ini option ``llmbias_config``, the environment variable
``LLMBIAS_CONFIG``, or ``llmbias.yaml`` in the rootdir, in that order. Every error names the key and
where it came from (the file and line, the option, the environment variable or the ini key).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmbias.choices import CacheMode
from pytest_llmbias.config.benchmark_sources import parse_benchmark
from pytest_llmbias.config.mlflow_settings import MlflowSettings, parse_tags
from pytest_llmbias.config.model_entries import Where, parse_named_models
from pytest_llmbias.config.option_table import CONFIG, SETTINGS_OPTIONS
from pytest_llmbias.config.option_values import _check_kind, _check_option, _overrides
from pytest_llmbias.config.settings import (
    CONFIG_FILENAME,
    OPTION_BY_KEY,
    CollectionSettings,
    DomainSettings,
    EmbeddingSettings,
    FeatureSettings,
    GenerationSettings,
    JudgingSettings,
    ModelSpec,
    ReleaseSettings,
    ReportSettings,
    Settings,
    StoreSettings,
    SuiteSettings,
)
from pytest_llmbias.errors import ConfigError

_SECTIONS: dict[str, type] = {
    "generation": GenerationSettings,
    "collection": CollectionSettings,
    "store": StoreSettings,
    "report": ReportSettings,
    "mlflow": MlflowSettings,
    "release": ReleaseSettings,
    "suite": SuiteSettings,
    "judging": JudgingSettings,
    "embedding": EmbeddingSettings,
    "domains": DomainSettings,
}
#: the options that set a top-level key (a model or the baselines) rather than a section's field
_TOP_OPTIONS = tuple(o for o in SETTINGS_OPTIONS if "." not in o.key)
_TOP_KEYS = (*(o.key for o in _TOP_OPTIONS), "models", *_SECTIONS, "features", "margins")
_FEATURE_KEYS = ("classifier", "label", "weights", "batch_size", "max_length")

#: (section, field) -> kind, for the fields only the file sets; the other fields' kinds are in
#: pytest_llmbias.config.option_table.OPTIONS
_FILE_KINDS: dict[tuple[str, str], str] = {
    ("generation", "temperature"): "float",
    ("generation", "max_tokens"): "posint",
    ("generation", "samples"): "posint",
    ("generation", "seed"): "optint",
    ("collection", "rpm"): "nonnegint",
    ("collection", "tpm"): "nonnegint",
    ("collection", "timeout"): "posfloat",
    ("collection", "retries"): "nonnegint",
    ("collection", "lock_timeout"): "posfloat",
    ("collection", "fingerprint"): "bool",
    ("collection", "max_calls"): "posint",
    ("store", "password_env"): "optstr",
    ("embedding", "model"): "str",
    ("embedding", "instruction"): "optstr",
    ("embedding", "batch_size"): "posint",
    ("domains", "paths"): "paths",
    ("mlflow", "tracking_uri"): "optstr",
    ("mlflow", "experiment"): "str",
    ("mlflow", "alias"): "str",
    # a mapping of its own, checked by pytest_llmbias.config.mlflow_settings.parse_tags
    ("mlflow", "tags"): "tags",
    # a mapping of its own, checked by pytest_llmbias.config.benchmark_sources.parse_benchmark
    ("domains", "bbq"): "benchmark",
    ("domains", "discrim_eval"): "benchmark",
    ("domains", "evenhandedness"): "benchmark",
}


def find_config(
    *, cli_path: str | None, ini_path: str | None, environ: Mapping[str, str], rootdir: Path, cwd: Path
) -> Path | None:
    """The config file to read, or None. An explicitly named file that does not exist is an error."""
    for given, origin, base in (
        (cli_path, CONFIG.flag, cwd),
        (ini_path, f"ini option {CONFIG.ini}", rootdir),
        (environ.get(CONFIG.env), f"${CONFIG.env}", cwd),
    ):
        if given:
            path = (base / given).resolve()
            if not path.is_file():
                raise ConfigError(f"{origin} names {given!r}, which is not a file ({path})")
            return path
    default = rootdir / CONFIG_FILENAME
    return default if default.is_file() else None


def load_config_file(path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """Parse a settings file into a mapping and the line of each dotted key."""
    from pytest_llmbias.config.yamlutil import load_yaml_with_lines

    data, lines = load_yaml_with_lines(path, error=ConfigError)
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the settings file must be a mapping of keys, got {type(data).__name__}")
    return data, lines


def resolve_settings(
    *,
    cli: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: Path | None = None,
    cwd: Path | None = None,
    ini: Mapping[str, Any] | None = None,
    ini_dir: Path | None = None,
    ini_file: Path | str | None = None,
) -> Settings:
    """Resolve settings: command line > environment > ini > config file > defaults.

    ``cli`` and ``ini`` are keyed by option name (:attr:`Option.name <pytest_llmbias.config.options.Option.name>`:
    "target", "baselines", "offline"...). ``cli`` holds the values argparse produced (None, ``[]``
    or False where an option was not given); ``ini`` the values ``config.getini`` returned (strings,
    or lists of lines for the list options; empty where a key is absent). Relative paths in the
    file are relative to the file; from the ini file, relative to ``ini_dir`` (the rootdir); from
    the command line or environment, relative to ``cwd``. ``ini_file`` only names the ini file in
    error messages. Raises :class:`ConfigError` naming the key and where the bad value came from.
    """
    cli = dict(cli or {})
    ini = dict(ini or {})
    environ = os.environ if environ is None else environ
    cwd = cwd or Path.cwd()
    names = {o.name for o in SETTINGS_OPTIONS}
    for given in (cli, ini):
        unknown = sorted(set(given) - names)
        if unknown:
            raise ValueError(f"unknown option name(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")

    file_data: dict[str, Any] = {}
    lines: dict[str, int] = {}
    if config_path is not None:
        file_data, lines = load_config_file(config_path)
    where = Where(str(config_path) if config_path else "settings", lines)
    base_dir = config_path.parent if config_path else cwd

    if file_data.get("judge") is not None and file_data.get("judges") is not None:
        raise ConfigError(f"{where('judges')}: give 'judge' (one judge) or 'judges' (several), not both")
    unknown = [k for k in file_data if k not in _TOP_KEYS]
    if unknown:
        raise ConfigError(f"{where(unknown[0])}: unknown key {unknown[0]!r}; accepted keys: {', '.join(_TOP_KEYS)}")

    named = parse_named_models(file_data.get("models"), where, base_dir)
    top: dict[str, Any] = {
        o.key: _check_option(o, file_data[o.key], where, base_dir, named)
        for o in _TOP_OPTIONS
        if file_data.get(o.key) not in (None, "")
    }
    sections = {name: _parse_section(name, file_data.get(name), where, base_dir) for name in _SECTIONS}
    features = _parse_features(file_data.get("features"), where, base_dir)
    from pytest_llmbias.config.margins import check_margins

    try:
        margins = check_margins(file_data.get("margins"))
    except ConfigError as exc:
        raise ConfigError(f"{where('margins')}: {exc}") from None

    overrides = _overrides(cli, environ, cwd, ini, ini_dir or cwd, ini_file)
    origins: dict[str, Where] = {}  # where each overridden key came from, for later checks' errors
    for option, value, origin, base in overrides:
        value = _check_option(option, value, origin, base, named)
        origins[option.key] = origin
        section, _, name = option.key.partition(".")
        if name:
            sections[section] = dataclasses.replace(sections[section], **{name: value})
        else:
            top[section] = value

    store: StoreSettings = sections["store"]
    if store.offline and store.cache == CacheMode.REFRESH:
        raise ConfigError("offline mode cannot be combined with cache mode 'refresh' (it re-asks every model)")
    if store.offline and store.cache == CacheMode.OFF:  # off reads neither the store nor a snapshot
        raise ConfigError(
            "offline mode with cache mode 'off' has nothing to read responses from (off reads "
            "neither the store nor a snapshot); use cache mode 'use' to replay a snapshot"
        )
    if store.url is not None and not store.url.startswith(("redis://", "rediss://", "unix://")):
        from pytest_llmbias.config.redaction import Redactor

        raise ConfigError(
            f"store.url must be a Redis URL (redis://HOST:PORT/DB, rediss:// for TLS, or unix://PATH), "
            f"got {Redactor()(store.url)!r}"
        )

    _check_aliases(top.get("target"), top.get("baselines", ()), where)
    _check_panel(top, sections["judging"], Where(where.source, where.lines, origins))
    return Settings(**top, features=features, margins=margins, source=config_path, **sections)


def _check_panel(top: dict[str, Any], judging: JudgingSettings, where: Where) -> None:
    """``judges`` and ``judge`` are one setting in two forms (the panel, from any source, replaces
    the one judge); several judges need distinct aliases, none a roster model's;
    ``judging.combine`` needs two judges or more. ``top["judge"]`` becomes the panel's first judge."""
    judges = top.get("judges", ())
    if judges:  # the panel replaces the one judge wherever that was given
        top["judge"] = judges[0]
    taken = {
        m.alias: "the target" if i == 0 and top.get("target") is m else "a baseline"
        for i, m in enumerate([*((top["target"],) if top.get("target") else ()), *top.get("baselines", ())])
    }
    for i, spec in enumerate(judges):
        if spec.alias in taken:
            raise ConfigError(
                f"{where(f'judges[{i}]')}: judges[{i}] has the alias {spec.alias!r} of {taken[spec.alias]}; "
                "give each model a distinct 'alias'"
            )
        taken[spec.alias] = f"judges[{i}]"
    if judging.rubric is not None:  # a bad rubric is a usage error at once, not a failed gate later
        from pytest_llmbias.config.rubric_file import rubric_for

        try:
            rubric_for(None, judging.rubric)
        except ConfigError as exc:
            raise ConfigError(f"{where('judging.rubric')}: 'judging.rubric': {exc}") from None
    if judging.combine is not None and len(judges) < 2:
        raise ConfigError(
            f"{where('judging.combine')}: 'judging.combine' combines the scores of several judges: "
            f"list two or more under 'judges' (or --llmbias-judge-panel); "
            f"{'only one judge is' if judges or top.get('judge') is not None else 'no judge is'} given"
        )


def _parse_features(raw: Any, where: Where, base_dir: Path) -> tuple[FeatureSettings, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where('features')}: 'features' must map a feature name to its settings "
            f"({', '.join(_FEATURE_KEYS)}), got {type(raw).__name__}"
        )
    out = []
    for name, body in raw.items():
        key = f"features.{name}"
        if not isinstance(name, str) or not name.strip() or name.startswith("classifier:"):
            raise ConfigError(f"{where('features')}: {name!r} is not a usable feature name")
        if isinstance(body, str):
            body = {"classifier": body}
        if not isinstance(body, Mapping):
            raise ConfigError(f"{where(key)}: '{key}' must be a mapping with keys {', '.join(_FEATURE_KEYS)}")
        unknown = [k for k in body if k not in _FEATURE_KEYS]
        if unknown:
            raise ConfigError(
                f"{where(f'{key}.{unknown[0]}')}: unknown key '{key}.{unknown[0]}'; accepted keys: "
                f"{', '.join(_FEATURE_KEYS)}"
            )
        classifier = _check_kind("str", body.get("classifier"), f"{key}.classifier", where)
        local = base_dir / classifier
        if not Path(classifier).is_absolute() and local.exists():
            classifier = str(local.resolve())
        label = _check_kind("optstr", body.get("label"), f"{key}.label", where)
        weights = body.get("weights")
        if weights is not None:
            if (
                not isinstance(weights, Mapping)
                or not weights
                or not all(
                    isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                    for k, v in weights.items()
                )
            ):
                raise ConfigError(
                    f"{where(f'{key}.weights')}: '{key}.weights' must map label names to numbers, got {weights!r}"
                )
            weights = {k: float(v) for k, v in weights.items()}
        if label is not None and weights is not None:
            raise ConfigError(f"{where(key)}: give '{key}.label' or '{key}.weights', not both")
        batch_size = _check_kind("posint", body.get("batch_size", 32), f"{key}.batch_size", where)
        max_length = body.get("max_length")
        if max_length is not None:
            max_length = _check_kind("posint", max_length, f"{key}.max_length", where)
        out.append(FeatureSettings(name.strip(), classifier, label, weights, batch_size, max_length))
    return tuple(out)


def _check_aliases(target: ModelSpec | None, baselines: tuple[ModelSpec, ...], where: Where) -> None:
    seen: dict[str, str] = {}
    for role, spec in [("target", target), *((f"baselines[{i}]", b) for i, b in enumerate(baselines))]:
        if spec is None:
            continue
        if spec.alias in seen:
            raise ConfigError(
                f"{where('baselines')}: {role} and {seen[spec.alias]} share the alias {spec.alias!r}; "
                "give each model a distinct 'alias'"
            )
        seen[spec.alias] = role


def _parse_section(name: str, raw: Any, where: Where, base_dir: Path) -> Any:
    cls = _SECTIONS[name]
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where(name)}: {name!r} must be a mapping, got {type(raw).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in names:
            raise ConfigError(
                f"{where(f'{name}.{key}')}: unknown key '{name}.{key}'; accepted keys: {', '.join(names)}"
            )
        option = OPTION_BY_KEY.get(f"{name}.{key}")
        if value is None and option is not None:  # `key: null` in the file: not set, as at the top level
            continue
        if _FILE_KINDS.get((name, key)) == "tags":
            values[key] = parse_tags(value, where(f"{name}.{key}"))
        elif _FILE_KINDS.get((name, key)) == "benchmark":
            if value is not None:
                values[key] = parse_benchmark(key, value, where(f"{name}.{key}"), base_dir)
        elif option is not None:
            values[key] = _check_option(option, value, where, base_dir)
        else:
            values[key] = _check_kind(_FILE_KINDS[(name, key)], value, f"{name}.{key}", where, base_dir=base_dir)
    if cls is MlflowSettings:  # its checks of model and alias, with the file's place
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(f"{where(name)}: {exc}") from None
    section = cls(**values)
    if name in ("store", "release") and not section.dir.is_absolute():
        section = dataclasses.replace(section, dir=(base_dir / section.dir).resolve())
    return section


def settings_from_pytest(
    *, option: Any, getini: Any, rootdir: Path, inipath: Path | None, cwd: Path, environ: Mapping[str, str]
) -> Settings:
    """The run's settings from pytest's parsed command line (``option``), its ini reader
    (``getini``), its rootdir and ini file, the invocation directory and the environment;
    ConfigError naming the option, variable, ini key or file line."""
    path = find_config(
        cli_path=getattr(option, CONFIG.dest),
        ini_path=getini(CONFIG.ini) or None,
        environ=environ,
        rootdir=rootdir,
        cwd=cwd,
    )
    return resolve_settings(
        cli={o.name: getattr(option, o.dest) for o in SETTINGS_OPTIONS},
        ini={o.name: getini(o.ini) for o in SETTINGS_OPTIONS},
        ini_dir=rootdir,
        ini_file=inipath,
        environ=environ,
        config_path=path,
        cwd=cwd,
    )
