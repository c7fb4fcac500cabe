"""Credentials the plugin knows, kept out of everything it writes.

A model's credentials are its API key (read from ``api_key_env``), a ``user:password@`` in its
``api_base``, every ``params`` entry whose name says key, token, secret, password, auth or cookie, and
the same-named headers of ``params.extra_headers``. They are sent with each call and nowhere else:

- :func:`split_credentials` and :func:`strip_userinfo` take them out of a call's identity, so they
  never reach a store key, a stored record or a snapshot line (rotating a key keeps the store valid);
- a :class:`Redactor` knows their values and replaces them, and any ``Authorization``/``api-key``
  header value or URL password it recognises, with ``***`` in every message, report and log line.

This module imports nothing but the standard library.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, overload
from urllib.parse import urlsplit, urlunsplit


class ModelCredentials(Protocol):
    """Where a model entry keeps its credentials (a :class:`~pytest_llmbias.config.settings.ModelSpec`)."""

    # read-only, as a frozen dataclass's fields are
    @property
    def api_key_env(self) -> str | None: ...
    @property
    def api_base(self) -> str | None: ...
    @property
    def params(self) -> Mapping[str, Any]: ...


MASK = "***"

#: a parameter or header whose name has one of these words (split on ``_``, ``-``, ``.``, case
#: and camelCase) carries a credential. Whole words only: ``max_tokens`` is not a token.
_CREDENTIAL_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "bearer",
        "signature",
    }
)
_HEADER_PARAMS = ("extra_headers", "headers")

# Values the redactor recognises without being told: an Authorization or api-key header value
# (quoted or not, in a dict repr, a JSON body or a header line), and the password in a URL.
_HEADER_VALUE = re.compile(
    r"(?i)((?:proxy-)?authorization|x-api-key|api[-_]key|ocp-apim-subscription-key)"
    r"(['\"]?\s*[:=]\s*['\"]?)(?:(bearer|basic|token)\s+)?([^\s'\",}\]]+)"
)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]+@")
#: a password in a URL's query (``redis://host:6379/0?password=...``, which redis-py reads)
_URL_QUERY_PASSWORD = re.compile(r"(?i)([?&](?:password|passwd|pwd)=)[^&#\s'\"]+")
#: shorter values are not redacted by value: replacing a 3-character string everywhere would
#: mangle reports, and such a value is no secret
_MIN_SECRET_LENGTH = 4


def is_credential_name(name: str) -> bool:
    """Whether a parameter or header called ``name`` carries a credential."""
    return _credential_name(str(name))


@functools.lru_cache(maxsize=1024)
def _credential_name(name: str) -> bool:
    # a run asks about the same few names for every call it builds: the words are split once a name
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return any(word in _CREDENTIAL_WORDS for word in re.split(r"[\s_.\-]+", spaced.lower()) if word)


def split_credentials(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``params`` as (public, credentials): credential-named entries, and credential-named headers
    of ``extra_headers``/``headers``, move to the second mapping; everything else stays."""
    public: dict[str, Any] = {}
    secret: dict[str, Any] = {}
    for name, value in params.items():
        if is_credential_name(name):
            secret[name] = value
        elif name in _HEADER_PARAMS and isinstance(value, Mapping):
            kept = {h: v for h, v in value.items() if not is_credential_name(h)}
            hidden = {h: v for h, v in value.items() if is_credential_name(h)}
            if kept:
                public[name] = kept
            if hidden:
                secret[name] = hidden
        else:
            public[name] = value
    return public, secret


def merge_credentials(public: Mapping[str, Any], secret: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters to send: ``public`` with ``secret`` put back (headers merged, not replaced)."""
    merged = dict(public)
    for name, value in secret.items():
        if name in _HEADER_PARAMS and isinstance(value, Mapping) and isinstance(merged.get(name), Mapping):
            merged[name] = {**merged[name], **value}
        else:
            merged[name] = value
    return merged


@overload
def strip_userinfo(url: str) -> str: ...
@overload
def strip_userinfo(url: None) -> None: ...
def strip_userinfo(url: str | None) -> str | None:
    """``url`` without a ``user:password@`` part (``None`` stays ``None``)."""
    if not url or "@" not in url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _userinfo_values(url: str | None) -> list[str]:
    if not url or "@" not in url:
        return []
    parts = urlsplit(url)
    out = [v for v in (parts.password, parts.username) if v]
    if "@" in parts.netloc:
        out.append(parts.netloc.rsplit("@", 1)[0])
    return out


def _values(value: Any) -> Iterable[str]:
    """Every string (and number) inside a parameter value."""
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _values(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _values(v)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield str(value)
        if isinstance(value, str) and value.lower().startswith(("bearer ", "basic ", "token ")):
            yield value.split(None, 1)[1]


def spec_secrets(spec: ModelCredentials, environ: Mapping[str, str] | None = None) -> list[str]:
    """The credential values of one model: its key, its URL's user info, its credential params."""
    env = os.environ if environ is None else environ
    found: list[str] = []
    if spec.api_key_env and env.get(spec.api_key_env):
        found.append(env[spec.api_key_env])
    found.extend(_userinfo_values(spec.api_base))
    _, secret = split_credentials(spec.params)
    found.extend(_values(secret))
    app_secrets = getattr(spec, "app_secrets", None)  # an HTTP application's credential headers
    if app_secrets is not None:
        found.extend(app_secrets(env))
    return found


class Redactor:
    """Replaces known secret values, and recognisable credentials, with ``***``.

    ``secrets`` are literal values (shorter than 4 characters are ignored). Beyond them it masks the
    value of any ``Authorization``/``api-key`` header, and the user info and a ``password=`` query
    parameter of any URL in the text.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET_LENGTH}
        self.secrets: tuple[str, ...] = tuple(sorted(unique, key=len, reverse=True))

    @classmethod
    def for_models(cls, specs: Iterable[ModelCredentials | None], environ: Mapping[str, str] | None = None) -> Redactor:
        """A redactor for the credentials of ``specs`` (``None`` entries are skipped)."""
        return cls(s for spec in specs if spec is not None for s in spec_secrets(spec, environ))

    def __call__(self, text: str) -> str:
        """``text`` with every credential masked."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        text = _HEADER_VALUE.sub(
            lambda m: m.group(1) + m.group(2) + (f"{m.group(3)} " if m.group(3) else "") + MASK, text
        )
        text = _URL_QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
        return _URL_USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)

    def leaks(self, text: str) -> bool:
        """Whether ``text`` holds something :meth:`__call__` would mask."""
        return self(text) != text


class LogMask:
    """While installed, every log record created in the process (by litellm, the OpenAI SDK, httpx,
    anyone) has its message masked by ``redact`` before any handler sees it: live logging
    (``--log-cli-level``), captured logs and log files alike. A record factory, not a filter,
    because filters on loggers miss records that propagate from child loggers."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self._previous: Any = None

    def _factory(self, *args: Any, **kwargs: Any) -> Any:
        record = self._previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the logging module's to report
            return record
        masked = self.redact(message)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and record.exc_info[0] is not None:
            import logging

            # Formatters use exc_text when it is set: format the traceback once, masked.
            record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return record

    def install(self) -> LogMask:
        import logging

        if self._previous is None:
            self._previous = logging.getLogRecordFactory()
            logging.setLogRecordFactory(self._factory)
        return self

    def uninstall(self) -> None:
        import logging

        if self._previous is not None:
            if logging.getLogRecordFactory() == self._factory:
                logging.setLogRecordFactory(self._previous)
            self._previous = None


def mask_report(report: Any, redact: Redactor) -> None:
    """Replace credentials in a pytest test report in place (its traceback, captured sections and
    user properties); the traceback becomes plain text only when it
    held one (and so loses its colour)."""
    if report.longrepr is not None:
        text = str(report.longrepr)
        if redact.leaks(text):
            report.longrepr = redact(text)
    report.sections = [(title, redact(content)) for title, content in report.sections]
    report.user_properties = [
        (name, redact(value) if isinstance(value, str) else value) for name, value in report.user_properties
    ]
