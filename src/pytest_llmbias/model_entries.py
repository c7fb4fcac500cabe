"""A model entry of the settings (``target``, ``baselines``, ``judge``): a litellm model string, or a
mapping with the model, its alias, endpoint, key variable, parameters, transport, structured
output, and — for a deployment — its system prompt and primer turns; and :class:`Where`, which
names the place a value came from in every settings error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.choices import Transport
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.settings import ModelSpec

MODEL_KEYS = ("model", "alias", "api_base", "api_key_env", "params", "transport", "structured", "system", "messages")


class Where:
    """Names the place a value came from, for error messages."""

    def __init__(self, source: str, lines: Mapping[str, int] | None = None,
                 overridden: Mapping[str, Where] | None = None) -> None:
        self.source = source
        self.lines = lines or {}
        #: keys whose value came from elsewhere (an option, a variable, an ini key), and from where
        self.overridden = overridden or {}

    def __call__(self, key: str) -> str:
        if key in self.overridden:
            return self.overridden[key](key)
        line = self.lines.get(key)
        return f"{self.source}:{line}" if line else self.source


def parse_model(raw: Any, key: str, where: Where, base_dir: Path,
                named: Mapping[str, ModelSpec] | None = None) -> ModelSpec:
    """A model entry: the alias of one of the file's ``models:`` (``named``), an inline YAML flow
    mapping (``{model: openai/x, api_base: URL, system: ...}``, as the command line and the
    environment give one), a litellm model string, or a mapping; ConfigError naming the key and
    where it came from."""
    if isinstance(raw, str) and named and raw.strip() in named:
        return named[raw.strip()]
    if isinstance(raw, str) and raw.strip().startswith("{"):
        from pytest_llmbias.yamlutil import load_inline_mapping

        raw = load_inline_mapping(raw.strip(), what=where(key), error=ConfigError)
    if isinstance(raw, str):
        if not raw.strip():
            raise ConfigError(f"{where(key)}: {key!r} is an empty model name")
        return ModelSpec(model=raw.strip(), alias=default_alias(raw.strip()))
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where(key)}: {key!r} must be a litellm model string or a mapping with keys "
            f"{', '.join(MODEL_KEYS)}; got {type(raw).__name__}"
        )
    unknown = [k for k in raw if k not in MODEL_KEYS]
    if unknown:
        raise ConfigError(
            f"{where(key)}: unknown key {unknown[0]!r} in {key!r}; accepted keys: {', '.join(MODEL_KEYS)}"
        )
    model = raw.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{where(key)}: {key!r} needs a 'model' (a litellm model string)")
    for opt in ("alias", "api_base", "api_key_env", "transport"):
        if raw.get(opt) is not None and not isinstance(raw[opt], str):
            raise ConfigError(f"{where(key)}: '{key}.{opt}' must be a string, got {type(raw[opt]).__name__}")
    params = raw.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where(key)}: '{key}.params' must be a mapping, got {type(params).__name__}")
    for reserved in ("api_key", "messages", "model", "stream"):
        if reserved in params:
            raise ConfigError(
                f"{where(key)}: '{key}.params.{reserved}' is not allowed"
                + (" (name the variable in api_key_env instead)" if reserved == "api_key" else "")
            )
    api_base = raw.get("api_base")
    try:
        transport = Transport.parse(raw.get("transport") or "auto", what=f"'{key}.transport'")
    except ValueError as exc:
        raise ConfigError(f"{where(key)}: {exc}") from None
    system = _parse_system(raw.get("system"), key, where, base_dir)
    primer = _parse_primer(raw.get("messages"), key, where)
    structured = raw.get("structured")
    if structured == "auto":
        structured = None
    if structured is not None and not isinstance(structured, bool):
        raise ConfigError(f"{where(key)}: '{key}.structured' must be true, false or auto, got {structured!r}")
    return ModelSpec(
        model=model.strip(),
        alias=raw.get("alias") or default_alias(model.strip()),
        api_base=api_base.rstrip("/") if api_base else None,
        api_key_env=raw.get("api_key_env"),
        params=dict(params),
        transport=str(transport),
        structured=structured,
        system=system,
        messages=primer,
    )


def _parse_system(raw: Any, key: str, where: Where, base_dir: Path) -> str | None:
    """A deployment's system prompt: the text, or ``@path`` to a file relative to the config."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(f"{where(key)}: '{key}.system' must be a non-empty string or @path, got {raw!r}")
    if not raw.startswith("@"):
        return raw
    path = (base_dir / raw[1:].strip()).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{where(key)}: '{key}.system' names {raw!r}, which cannot be read ({path}: "
            f"{getattr(exc, 'strerror', None) or exc})"
        ) from None
    if not text.strip():
        raise ConfigError(f"{where(key)}: '{key}.system' names {raw!r}, an empty file ({path})")
    return text.rstrip("\n")


def _parse_primer(raw: Any, key: str, where: Where) -> tuple[tuple[str, str], ...]:
    """Chat turns placed before every question: a list of ``{role, content}``."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise ConfigError(f"{where(key)}: '{key}.messages' must be a list of {{role, content}} turns")
    turns = []
    for i, turn in enumerate(raw):
        if (not isinstance(turn, Mapping) or set(turn) != {"role", "content"}
                or turn["role"] not in ("system", "user", "assistant") or not isinstance(turn["content"], str)):
            raise ConfigError(
                f"{where(key)}: '{key}.messages[{i}]' must be {{role: system | user | assistant, content: TEXT}}, "
                f"got {turn!r}"
            )
        turns.append((turn["role"], turn["content"]))
    return tuple(turns)


def parse_named_models(raw: Any, where: Where, base_dir: Path) -> dict[str, ModelSpec]:
    """The file's ``models:`` list: entries defined once and named by alias from ``target``,
    ``baselines``, ``judge`` and the command line."""
    if raw is None:
        return {}
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise ConfigError(f"{where('models')}: 'models' must be a list of model entries, got {type(raw).__name__}")
    named: dict[str, ModelSpec] = {}
    for i, item in enumerate(raw):
        spec = parse_model(item, f"models[{i}]", where, base_dir)
        if spec.alias in named:
            raise ConfigError(f"{where(f'models[{i}]')}: the alias {spec.alias!r} is defined twice in 'models'")
        named[spec.alias] = spec
    return named


def parse_baselines(raw: Any, where: Where, base_dir: Path,
                    named: Mapping[str, ModelSpec] | None = None, key: str = "baselines") -> tuple[ModelSpec, ...]:
    """A list of model entries under ``key`` (``baselines``, ``judges``)."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise ConfigError(f"{where(key)}: '{key}' must be a list of models, got {type(raw).__name__}")
    return tuple(parse_model(item, f"{key}[{i}]", where, base_dir, named) for i, item in enumerate(raw))


def default_alias(model: str) -> str:
    return model.rsplit("/", 1)[-1]
