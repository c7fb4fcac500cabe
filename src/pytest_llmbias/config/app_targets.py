"""An application as a model entry: a Python callable (``python:``) or an HTTP endpoint with a
request template (``http:``).

The request shape of an HTTP application (:class:`HttpApp`) is part of a call's identity — its
method, body template, response path and the headers that carry no credential — while a header
whose value names an environment variable (``${VAR}``) or whose name says key, token, secret...
is a credential: sent with each call and nowhere else. The body template is JSON (a mapping from
the settings file, or JSON text) in which ``{{prompt}}``, ``{{messages}}`` and the call's
parameters (``{{temperature}}``...) are replaced by JSON values, never pasted as text, so a
question with quotes, newlines or any character still gives valid JSON.

Standard library only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmbias.config.redaction import MASK, is_credential_name
from pytest_llmbias.errors import PathMissing, TemplateError

#: the model string of a Python target is ``python:<what the entry names>``; of an HTTP
#: application ``http:<METHOD> <url>``. No litellm model string starts with either.
PYTHON_PREFIX, HTTP_PREFIX = "python:", "http:"
HTTP_METHODS = ("POST", "PUT", "PATCH")
HTTP_KEYS = ("url", "method", "headers", "body", "response", "usage")
#: placeholders every body template may use, beside the call's parameters
MESSAGE_PLACEHOLDERS = ("prompt", "messages")
GENERATION_PLACEHOLDERS = ("temperature", "max_tokens", "seed")

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_app_model(model: str) -> bool:
    """Whether ``model`` is the model string of a Python target or an HTTP application (which
    cost nothing unless priced, and never go through litellm)."""
    return model.startswith((PYTHON_PREFIX, HTTP_PREFIX))


@dataclass(frozen=True)
class HttpApp:
    """How to ask an application's own HTTP API: ``method`` to ``url`` with ``headers`` (values
    may name environment variables as ``${VAR}``) and ``body`` (the template, as JSON values);
    the answer's text is at the dotted path ``response`` of its JSON body, its token usage (a
    mapping with ``prompt_tokens``/``completion_tokens`` or ``input_tokens``/``output_tokens``)
    at ``usage`` if given."""

    url: str
    body: Any = field(hash=False)
    response: str
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()
    usage: str | None = field(default=None)

    def is_secret_header(self, name: str, value: str) -> bool:
        return bool(_ENV.search(value)) or is_credential_name(name)

    def identity(self) -> dict[str, Any]:
        """What a call's identity holds of this request (the URL is in the model string):
        never a credential header, so rotating a token keeps the store's answers."""
        return {
            "method": self.method,
            "body": self.body,
            "response": self.response,
            "headers": {k: v for k, v in self.headers if not self.is_secret_header(k, v)},
        }

    def header_vars(self) -> tuple[str, ...]:
        """The environment variables the headers name."""
        return tuple(dict.fromkeys(m for _, v in self.headers for m in _ENV.findall(v)))

    def resolved_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The headers to send, each ``${VAR}`` replaced by the variable's value; TemplateError
        naming the first variable that is not set."""
        env = os.environ if environ is None else environ
        out = {}
        for name, value in self.headers:
            for var in _ENV.findall(value):
                if not env.get(var):
                    raise TemplateError(f"the header {name!r} reads ${var}, which is not set")
            out[name] = _ENV.sub(lambda m: env[m.group(1)], value)
        return out

    def secrets(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """The credential values of the headers (those set), for masking."""
        env = os.environ if environ is None else environ
        found = []
        for name, value in self.headers:
            if not self.is_secret_header(name, value):
                continue
            text = _ENV.sub(lambda m: env.get(m.group(1), ""), value)
            found.append(text)
            if text.lower().startswith(("bearer ", "basic ", "token ")):
                found.append(text.split(None, 1)[1])
            found.extend(env[v] for v in _ENV.findall(value) if env.get(v))
        return found

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view with every credential header masked."""
        return {
            "url": self.url,
            "method": self.method,
            "headers": {k: (MASK if self.is_secret_header(k, v) else v) for k, v in self.headers},
            "body": self.body,
            "response": self.response,
            "usage": self.usage,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HttpApp:
        """An app from :meth:`to_dict` (a release's manifest): its masked headers left out, so that
        its :meth:`identity` is the recorded one."""
        headers = tuple((str(k), str(v)) for k, v in (data.get("headers") or {}).items() if v != MASK)
        return cls(
            url=data["url"],
            body=data["body"],
            response=data["response"],
            method=data.get("method", "POST"),
            headers=headers,
            usage=data.get("usage"),
        )


def parse_body(raw: Any, known: Sequence[str]) -> Any:
    """A body template as JSON values: a mapping or list is kept; a string is read as JSON text,
    where a placeholder may stand unquoted (``{"input": {{prompt}}}``). TemplateError for text that
    is not JSON, a value that is not JSON, or a placeholder not in ``known``."""
    if isinstance(raw, str):
        try:
            body = json.loads(_quote_bare_placeholders(raw))
        except ValueError as exc:
            raise TemplateError(f"is not JSON text ({exc})") from None
    else:
        body = raw
    try:
        json.dumps(body, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TemplateError(f"must be JSON values ({exc})") from None
    unknown = sorted({name for name in _placeholders(body) if name not in known})
    if unknown:
        raise TemplateError(
            f"has the unknown placeholder {{{{{unknown[0]}}}}}; known: " + ", ".join(f"{{{{{k}}}}}" for k in known)
        )
    return body


def _quote_bare_placeholders(text: str) -> str:
    """JSON text with each placeholder that stands outside a string put in quotes."""
    out, i, in_string = [], 0, False
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\":
                out.append(text[i + 1 : i + 2])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        else:
            match = _PLACEHOLDER.match(text, i)
            if match:
                out.append(f'"{match.group(0)}"')
                i = match.end()
                continue
            out.append(ch)
        i += 1
    return "".join(out)


def _placeholders(value: Any) -> list[str]:
    if isinstance(value, str):
        return _PLACEHOLDER.findall(value)
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in _placeholders(v)]
    if isinstance(value, list):
        return [n for v in value for n in _placeholders(v)]
    return []


def render_body(template: Any, messages: Sequence[tuple[str, str]], params: Mapping[str, Any]) -> Any:
    """The body for one call: a string that is only a placeholder becomes its JSON value (the last
    message's text for ``{{prompt}}``, the list of ``{role, content}`` for ``{{messages}}``, a
    parameter's value, ``null`` for a parameter the call lacks); a placeholder inside longer text
    is replaced by the value's text (a string as it is, anything else as JSON)."""
    values: dict[str, Any] = dict(params)
    values["prompt"] = messages[-1][1] if messages else ""
    values["messages"] = [{"role": r, "content": c} for r, c in messages]

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            whole = _PLACEHOLDER.fullmatch(value)
            if whole:
                return values.get(whole.group(1))
            return _PLACEHOLDER.sub(lambda m: _as_text(values.get(m.group(1))), value)
        if isinstance(value, Mapping):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    return fill(template)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_path(path: Any) -> str:
    """A dotted path (``data.reply``, ``choices.0.message.content``); TemplateError otherwise."""
    if not isinstance(path, str) or not path.strip() or any(not part for part in path.strip().split(".")):
        raise TemplateError(f"must be a dotted path such as data.reply or choices.0.message.content, got {path!r}")
    return path.strip()


def dig(data: Any, path: str) -> Any:
    """The value at the dotted ``path`` of ``data``: a key of a mapping, or the index of a list
    (``choices.0``); :class:`PathMissing` naming the path and how far it led."""
    value = data
    walked: list[str] = []
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", part) and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            if isinstance(value, Mapping):
                found = f"keys {', '.join(map(str, list(value)[:8])) or 'none'}"
            elif isinstance(value, list):
                found = f"a list of {len(value)}"
            else:
                found = f"a {type(value).__name__}"
            raise PathMissing(path, ".".join(walked), found)
        walked.append(part)
    return value
