"""A model entry of the settings (``target``, ``baselines``, ``judge``): a litellm model string, or a
mapping with the model, its alias, endpoint, key variable, parameters, transport, structured
output, version, and — for a deployment — its system prompt and primer turns; or an application
(see :mod:`pytest_llmbias.config.app_targets`): a Python callable (``python:``) or an HTTP endpoint
(``http:``); and :class:`Where`, which names the place a value came from in every settings error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from pytest_llmbias.choices import Transport
from pytest_llmbias.config.app_targets import (
    GENERATION_PLACEHOLDERS,
    HTTP_KEYS,
    HTTP_METHODS,
    HTTP_PREFIX,
    MESSAGE_PLACEHOLDERS,
    PYTHON_PREFIX,
    HttpApp,
    check_path,
    parse_body,
)
from pytest_llmbias.config.bounds import check_params
from pytest_llmbias.config.redaction import strip_userinfo
from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.errors import ConfigError, TemplateError

MODEL_KEYS = (
    "model",
    "alias",
    "api_base",
    "api_key_env",
    "params",
    "transport",
    "structured",
    "logprobs",
    "system",
    "messages",
    "version",
)
#: an application entry takes its own key (``python`` or ``http``) and these
APP_KEYS = ("alias", "version", "params", "system", "messages")
#: the keys that say what an entry is: exactly one per entry
KIND_KEYS = ("model", "python", "http")


class Where:
    """Names the place a value came from, for error messages."""

    def __init__(
        self, source: str, lines: Mapping[str, int] | None = None, overridden: Mapping[str, Where] | None = None
    ) -> None:
        self.source = source
        self.lines = lines or {}
        #: keys whose value came from elsewhere (an option, a variable, an ini key), and from where
        self.overridden = overridden or {}

    def __call__(self, key: str) -> str:
        if key in self.overridden:
            return self.overridden[key](key)
        line = self.lines.get(key)
        return f"{self.source}:{line}" if line else self.source


def parse_model(
    raw: Any, key: str, where: Where, base_dir: Path, named: Mapping[str, ModelSpec] | None = None
) -> ModelSpec:
    """A model entry: the alias of one of the file's ``models:`` (``named``), an inline YAML flow
    mapping (``{model: openai/x, api_base: URL, system: ...}``, as the command line and the
    environment give one), a litellm model string, or a mapping; ConfigError naming the key and
    where it came from."""
    if isinstance(raw, str) and named and raw.strip() in named:
        return named[raw.strip()]
    if isinstance(raw, str) and raw.strip().startswith("{"):
        from pytest_llmbias.config.yamlutil import load_inline_mapping

        raw = load_inline_mapping(raw.strip(), what=where(key), error=ConfigError)
    if isinstance(raw, str):
        if not raw.strip():
            raise ConfigError(f"{where(key)}: {key!r} is an empty model name")
        _check_litellm_string(raw.strip(), key, where)
        return ModelSpec(model=raw.strip(), alias=default_alias(raw.strip()))
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where(key)}: {key!r} must be a litellm model string or a mapping with keys "
            f"{', '.join(MODEL_KEYS)}; got {type(raw).__name__}"
        )
    kind = _entry_kind(raw, key, where)
    if kind != "model":
        return parse_app(raw, kind, key, where, base_dir)
    model = raw.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{where(key)}: {key!r} needs a 'model' (a litellm model string)")
    for opt in ("alias", "api_base", "api_key_env", "transport"):
        if raw.get(opt) is not None and not isinstance(raw[opt], str):
            raise ConfigError(f"{where(key)}: '{key}.{opt}' must be a string, got {type(raw[opt]).__name__}")
    alias = _parse_alias(raw.get("alias", None), key, where)
    api_key_env = _parse_env_name(raw.get("api_key_env"), key, where)
    params = raw.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where(key)}: '{key}.params' must be a mapping, got {type(params).__name__}")
    check_params(params, key, _at(where, key, "params"))
    for reserved in ("api_key", "messages", "model", "stream"):
        if reserved in params:
            raise ConfigError(
                f"{where(key)}: '{key}.params.{reserved}' is not allowed"
                + (" (name the variable in api_key_env instead)" if reserved == "api_key" else "")
            )
    api_base = _parse_api_base(raw.get("api_base"), key, where)
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
    logprobs = raw.get("logprobs")
    if logprobs == "auto":
        logprobs = None
    if logprobs is not None and not isinstance(logprobs, bool):
        raise ConfigError(f"{where(key)}: '{key}.logprobs' must be true, false or auto, got {logprobs!r}")
    _check_litellm_string(model.strip(), key, where)
    return ModelSpec(
        model=model.strip(),
        alias=alias or default_alias(model.strip()),
        version=_parse_version(raw.get("version"), key, where),
        api_base=api_base,
        api_key_env=api_key_env,
        params=dict(params),
        transport=str(transport),
        structured=structured,
        logprobs=logprobs,
        system=system,
        messages=primer,
    )


def _check_litellm_string(model: str, key: str, where: Where) -> None:
    """ConfigError for a model string that names an application: those are entries of their own."""
    if model.startswith((PYTHON_PREFIX, HTTP_PREFIX, "https:")):
        raise ConfigError(
            f"{where(key)}: {key!r}: {model!r} is no litellm model string; an application is an entry "
            "{python: package.module:function} or {http: {url, body, response}}"
        )


def _entry_kind(raw: Mapping[str, Any], key: str, where: Where) -> str:
    """Which of ``model``, ``python`` and ``http`` the entry is; ConfigError for none, for more
    than one, or for keys the entry's kind does not take (every one listed)."""
    kinds = [k for k in KIND_KEYS if k in raw]
    if len(kinds) > 1:
        raise ConfigError(
            f"{where(key)}: {key!r} gives {' and '.join(repr(k) for k in kinds)}: 'model', 'python' "
            "and 'http' exclude each other, give one"
        )
    kind = kinds[0] if kinds else "model"
    accepted = MODEL_KEYS if kind == "model" else (kind, *APP_KEYS)
    unknown = [k for k in raw if k not in accepted]
    if unknown:
        listed = ", ".join(repr(k) for k in unknown)
        what = f" (a {kind} entry)" if kind != "model" else ""
        raise ConfigError(
            f"{where(key)}: unknown key{'s' if len(unknown) > 1 else ''} {listed} in {key!r}{what}; accepted keys: "
            + ", ".join(accepted)
            + (
                "; a model entry takes model, or python (package.module:function), or http ({url, body, response})"
                if kind == "model"
                else ""
            )
        )
    return kind


def parse_app(raw: Mapping[str, Any], kind: str, key: str, where: Where, base_dir: Path) -> ModelSpec:
    """An application entry: ``{python: "package.module:function" | NAME, ...}`` or
    ``{http: {url, method, headers, body, response, usage}, ...}``, each with ``alias``,
    ``version``, ``params``, ``system`` and ``messages``; ConfigError naming the key."""
    params = raw.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where(key)}: '{key}.params' must be a mapping, got {type(params).__name__}")
    for reserved in ("messages", "prompt"):
        if reserved in params:
            raise ConfigError(f"{where(key)}: '{key}.params.{reserved}' is not allowed")
    check_params(params, key, _at(where, key, "params"))
    alias = _parse_alias(raw.get("alias"), key, where)
    common: dict[str, Any] = dict(
        params=dict(params),
        version=_parse_version(raw.get("version"), key, where),
        system=_parse_system(raw.get("system"), key, where, base_dir),
        messages=_parse_primer(raw.get("messages"), key, where),
        structured=False,
    )
    if kind == "python":
        target = raw["python"]
        if not isinstance(target, str) or not _PYTHON_TARGET.fullmatch(target.strip()):
            raise ConfigError(
                f"{where(key)}: '{key}.python' must be 'package.module:function' or the name of a "
                f"callable registered by pytest_llmbias_add_models, got {target!r}"
            )
        target = target.strip()
        return ModelSpec(
            model=PYTHON_PREFIX + target,
            alias=(alias or target.rsplit(":", 1)[-1].rsplit(".", 1)[-1]).strip(),
            python=target,
            **common,
        )
    app = _parse_http(
        raw["http"], f"{key}.http", where, known=(*MESSAGE_PLACEHOLDERS, *GENERATION_PLACEHOLDERS, *params)
    )
    return ModelSpec(
        model=f"{HTTP_PREFIX}{app.method} {app.url}", alias=(alias or _http_alias(app.url)).strip(), http=app, **common
    )


#: ``package.module:function`` (a dotted attribute after the colon), or a registered name
_PYTHON_TARGET = re.compile(r"[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?")


def _parse_http(raw: Any, key: str, where: Where, known: Sequence[str]) -> HttpApp:
    at = where(key) if key in where.lines else where(key.rsplit(".", 1)[0])
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{at}: {key!r} must be a mapping with keys {', '.join(HTTP_KEYS)}, got {type(raw).__name__}")
    unknown = [k for k in raw if k not in HTTP_KEYS]
    if unknown:
        raise ConfigError(
            f"{at}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown)} "
            f"in {key!r}; accepted keys: {', '.join(HTTP_KEYS)}"
        )
    missing = [k for k in ("url", "body", "response") if raw.get(k) is None]
    if missing:
        raise ConfigError(
            f"{at}: {key!r} needs {', '.join(repr(k) for k in missing)} (url, the body template, "
            "and the dotted path of the answer's text in the JSON reply)"
        )
    url = raw["url"]
    parts = _split_url(url)
    port = _port(parts)
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{at}: '{key}.url' must be an http:// or https:// URL, got {url!r}")
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"{at}: '{key}.url' has a port outside 1-65535, got {url!r}")
    if "@" in parts.netloc:
        raise ConfigError(
            f"{at}: '{key}.url' carries a user:password@: send credentials in a header that reads "
            "an environment variable (headers: {Authorization: 'Bearer ${APP_TOKEN}'})"
        )
    method = raw.get("method") or "POST"
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        raise ConfigError(f"{at}: '{key}.method' must be one of {' | '.join(HTTP_METHODS)}, got {method!r}")
    headers = raw.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ConfigError(f"{at}: '{key}.headers' must map header names to strings (a value may read ${{VAR}})")
    try:
        body = parse_body(raw["body"], known)
    except TemplateError as exc:
        raise ConfigError(f"{at}: '{key}.body' {exc}") from None
    paths = {}
    for name in ("response", "usage"):
        if raw.get(name) is not None:
            try:
                paths[name] = check_path(raw[name])
            except TemplateError as exc:
                raise ConfigError(f"{at}: '{key}.{name}' {exc}") from None
    return HttpApp(
        url=url.strip(),
        body=body,
        response=paths["response"],
        method=method.upper(),
        headers=tuple(headers.items()),
        usage=paths.get("usage"),
    )


def _at(where: Where, key: str, sub: str) -> str:
    """Where ``key.sub`` was written: its own line where the file gives one, else the entry's."""
    return where(f"{key}.{sub}") if f"{key}.{sub}" in where.lines else where(key)


def _parse_alias(raw: Any, key: str, where: Where) -> str | None:
    """An entry's ``alias``, stripped; None when absent (the default alias applies). An empty one
    is an error, not a cue to put the default in its place."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(
            f"{_at(where, key, 'alias')}: '{key}.alias' must be a non-empty string, got {raw!r}; leave it "
            "out for the default alias"
        )
    return raw.strip()


def _parse_env_name(raw: Any, key: str, where: Where) -> str | None:
    """``api_key_env``: the name of an environment variable (not empty; no ``$``, space or ``=``)."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not _ENV_NAME.fullmatch(raw):
        hint = " (the name alone, without '$')" if isinstance(raw, str) and raw.startswith("$") else ""
        raise ConfigError(
            f"{_at(where, key, 'api_key_env')}: '{key}.api_key_env' must name an environment variable "
            f"such as OPENAI_API_KEY{hint}, got {raw!r}; leave it out for a model that needs no key"
        )
    return raw


#: a name the environment can hold: no '=', no space, no NUL ('$' is refused: it is how a shell reads one)
_ENV_NAME = re.compile(r"[^\s=$\x00]+")


def _parse_api_base(raw: Any, key: str, where: Where) -> str | None:
    """``api_base``: an http:// or https:// URL with a host, and a port from 1 to 65535 where it
    gives one; without its trailing ``/``. Checked here, not at the first call after its retries."""
    if raw is None:
        return None
    parts = _split_url(raw)
    # a user:password@ is a secret; a URL that does not split is not shown (it may hold one)
    shown = raw if not isinstance(raw, str) else strip_userinfo(raw) if parts is not None else "<not a URL>"

    def fail(problem: str) -> ConfigError:
        return ConfigError(
            f"{_at(where, key, 'api_base')}: '{key}.api_base' must be an http:// or https:// URL such as "
            f"http://127.0.0.1:8000/v1 ({problem}), got {shown!r}"
        )

    if not isinstance(raw, str) or not raw.strip():
        raise fail("it is empty")
    if parts is None:
        raise fail("it does not parse")
    if parts.scheme.lower() not in ("http", "https"):
        raise fail(f"the scheme is {parts.scheme!r}" if parts.scheme else "no scheme")
    if not parts.hostname:
        raise fail("no host")
    port = _port(parts)
    if port is not None and not 1 <= port <= 65535:
        raise fail("a port is a number from 1 to 65535")
    return raw.strip().rstrip("/")


def _split_url(url: Any) -> SplitResult | None:
    """``url``'s parts; None for no string, or one that does not split (an unclosed ``[IPv6``)."""
    try:
        return urlsplit(url.strip()) if isinstance(url, str) else None
    except ValueError:
        return None


def _port(parts: SplitResult | None) -> int | None:
    """The URL's port, None where it gives none, -1 where it is no number or beyond 65535."""
    try:
        return parts.port if parts is not None else None
    except ValueError:
        return -1


def _http_alias(url: str) -> str:
    """An HTTP application's default alias: the last segment of its URL's path, else its host."""
    parts = urlsplit(url)
    segments = [p for p in parts.path.split("/") if p]
    return segments[-1] if segments else (parts.hostname or "app")


def _parse_version(raw: Any, key: str, where: Where) -> str | None:
    """An entry's ``version``: a string, or an integer read as one (a float is refused: YAML reads
    ``1.10`` as 1.1)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (str, int)) or (isinstance(raw, str) and not raw.strip()):
        raise ConfigError(
            f"{where(key)}: '{key}.version' must be a string (quote a number such as \"1.10\"), got {raw!r}"
        )
    return str(raw).strip()


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
        if (
            not isinstance(turn, Mapping)
            or set(turn) != {"role", "content"}
            or turn["role"] not in ("system", "user", "assistant")
            or not isinstance(turn["content"], str)
        ):
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


def parse_baselines(
    raw: Any, where: Where, base_dir: Path, named: Mapping[str, ModelSpec] | None = None, key: str = "baselines"
) -> tuple[ModelSpec, ...]:
    """A list of model entries under ``key`` (``baselines``, ``judges``)."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise ConfigError(f"{where(key)}: '{key}' must be a list of models, got {type(raw).__name__}")
    return tuple(parse_model(item, f"{key}[{i}]", where, base_dir, named) for i, item in enumerate(raw))


def default_alias(model: str) -> str:
    return model.rsplit("/", 1)[-1]
