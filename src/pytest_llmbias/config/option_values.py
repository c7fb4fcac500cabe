"""An option's value given outside the file (the command line, the environment, an ini key) read as
``llmbias.yaml`` would hold it, and a value checked and converted as its kind says."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.choices import Choice
from pytest_llmbias.config.bounds import check_bound
from pytest_llmbias.config.model_entries import Where, parse_baselines, parse_model
from pytest_llmbias.config.option_table import SETTINGS_OPTIONS
from pytest_llmbias.config.options import Option
from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.errors import ConfigError


def _overrides(
    cli: Mapping[str, Any],
    environ: Mapping[str, str],
    cwd: Path,
    ini: Mapping[str, Any],
    ini_dir: Path,
    ini_file: Path | str | None,
) -> Iterator[tuple[Option, Any, Where, Path]]:
    """Every value given outside the file, lowest precedence first (ini, environment, command
    line), as (option, value as the file would hold it, where it came from, base of relative paths)."""
    in_file = f" ({ini_file})" if ini_file else ""
    for option in SETTINGS_OPTIONS:
        raw = ini.get(option.name)
        if raw not in (None, "", []):
            yield option, _from_text(option, raw), Where(f"ini option {option.ini}{in_file}"), ini_dir
    for option in SETTINGS_OPTIONS:
        raw = environ.get(option.env)
        if raw:
            yield option, _from_text(option, raw), Where(f"${option.env}"), cwd
    for option in SETTINGS_OPTIONS:
        value = cli.get(option.name)
        # A switch left off is not an override: it cannot turn off what the file turned on.
        if value is None or value == [] or (option.kind == "bool" and value is False):
            continue
        yield option, _from_text(option, value) if option.kind == "alpha" else value, Where(option.flag), cwd


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _from_text(option: Option, raw: str | Sequence[str]) -> Any:
    """The value a string from the environment or an ini file stands for, as ``llmbias.yaml``
    would hold it. A list option's string is split on the option's separator (an ini list comes
    already split into lines). A string that does not parse is returned as it is, for
    :func:`_check_option` to refuse with the key, the place and what was expected."""
    if option.repeatable:
        items = _split_outside_braces(raw, option.separator) if isinstance(raw, str) else raw
        return [item.strip() for item in items if isinstance(item, str) and item.strip()]
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if option.kind == "bool":
        lowered = text.lower()
        return True if lowered in _TRUE else False if lowered in _FALSE else text
    if option.kind == "alpha" and text.lower() == "off":
        return "off"
    if option.kind in ("posint", "nonnegint", "posfloat", "fraction", "alpha"):
        try:
            return int(text) if option.kind in ("posint", "nonnegint") else float(text)
        except ValueError:
            return text
    return text


def _split_outside_braces(text: str, separator: str | None) -> list[str]:
    """``text`` split on ``separator`` where it stands outside ``{...}`` (an inline model's commas
    stay in it)."""
    if not separator:
        return [text]
    items, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if text[i] in "{}":
            depth += 1 if text[i] == "{" else -1
        elif depth == 0 and text.startswith(separator, i):
            items.append(text[start:i])
            start = i = i + len(separator)
            continue
        i += 1
    return [*items, text[start:]]


def _check_option(
    option: Option, value: Any, where: Where, base_dir: Path, named: Mapping[str, ModelSpec] | None = None
) -> Any:
    """``value`` checked and converted as the option's kind says; relative paths join ``base_dir``;
    a model may name one of the file's ``models:`` (``named``)."""
    if option.kind == "model":
        return parse_model(value, option.key, where, base_dir, named)
    if option.kind == "models":
        return parse_baselines(value, where, base_dir, named, key=option.key)
    return _check_kind(option.kind, value, option.key, where, base_dir=base_dir, choices=option.choices)


def _check_kind(
    kind: str, value: Any, key: str, where: Where, *, base_dir: Path | None = None, choices: type[Choice] | None = None
) -> Any:
    """``value`` checked as ``kind`` says and converted, then within the key's range (see
    :mod:`pytest_llmbias.config.bounds`); ConfigError naming the key and where it came from."""
    checked = _check_type(kind, value, key, where, base_dir=base_dir, choices=choices)
    check_bound(key, checked, where(key))
    return checked


def _check_type(
    kind: str, value: Any, key: str, where: Where, *, base_dir: Path | None = None, choices: type[Choice] | None = None
) -> Any:
    def fail(expected: str) -> ConfigError:
        return ConfigError(f"{where(key)}: '{key}' must be {expected}, got {value!r}")

    is_int = isinstance(value, int) and not isinstance(value, bool)
    # NaN and the infinities mean nothing any numeric setting documents
    if kind == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise fail("a finite number")
        return float(value)
    if kind == "posfloat":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise fail("a positive finite number")
        return float(value)
    if kind == "fraction":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1:
            raise fail("a share in [0, 1)")
        return float(value)
    if kind == "alpha":  # YAML 1.1 reads a bare off as False
        if value is False or value == "off":
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 1:
            raise fail("a share in (0, 1), or off")
        return float(value)
    if kind == "posint":
        if not is_int or value < 1:
            raise fail("a positive integer")
        return value
    if kind == "nonnegint":
        if not is_int or value < 0:
            raise fail("a non-negative integer")
        return value
    if kind == "optint":
        if value is not None and not is_int:
            raise fail("an integer or null")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if kind == "choice":
        assert choices is not None
        try:
            return choices.parse(value)
        except ValueError:
            raise fail(f"one of {choices.accepted()}") from None
    if kind in ("str", "optstr"):
        if value is None and kind == "optstr":
            return None
        if not isinstance(value, str) or not value:
            raise fail("a non-empty string")
        return value
    if kind in ("path", "optpath"):
        if value is None and kind == "optpath":
            return None
        if not isinstance(value, (str, Path)) or not str(value):
            raise fail("a path")
        path = Path(value)
        return path if path.is_absolute() or base_dir is None else (base_dir / path).resolve()
    if kind == "paths":
        if isinstance(value, (str, Path)):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, Path)) for v in value):
            raise fail("a list of paths")
        return tuple(Path(v) if Path(v).is_absolute() or base_dir is None else (base_dir / v).resolve() for v in value)
    raise AssertionError(kind)  # pragma: no cover
