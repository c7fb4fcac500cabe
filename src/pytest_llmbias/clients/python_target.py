"""A Python callable as a model: ``function(messages, **params)``, sync or async, called in this
process under the client's limits, timeout, retries, store and budget (see
:class:`~pytest_llmbias.clients.litellm_client.ModelClient`).

The entry names it as ``package.module:function`` (imported on the first call that is not in
the store) or by a name a ``conftest.py`` registered through the ``pytest_llmbias_add_models``
hook (:class:`ModelRegistry`). It receives the chat as a list of ``{role, content}`` (the entry's
system prompt and primer turns first, then the question) and the call's parameters
(``temperature``, ``max_tokens``, ``seed`` and the entry's ``params``) as keyword arguments, and
returns the answer's text, or a mapping with ``text`` and optionally ``usage``
(``prompt_tokens``/``completion_tokens``, or ``input_tokens``/``output_tokens``). A sync callable
runs in a worker thread, so it never blocks the event loop the other calls share.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pytest_llmbias.clients.openai_transport import Completion, token_count
from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.errors import ConfigError, ProviderError
from pytest_llmbias.store.calls import ModelCall

_NAME = re.compile(r"[A-Za-z_][\w.-]*")


class ModelRegistry(dict):
    """Callables an entry ``{python: NAME}`` names: a mapping from a name (letters, digits, ``_``,
    ``.``, ``-``; no colon, which marks ``module:function``) to a callable. Filled by
    ``pytest_llmbias_add_models(registry, config)``: ``registry.register(name, fn)`` or
    ``registry[name] = fn``."""

    def register(self, name: str, fn: Callable[..., Any], *, replace: bool = False) -> None:
        """Register ``fn`` as ``name``; ValueError for a bad name, a name taken (unless
        ``replace``), or something that cannot be called."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"a model name must be letters, digits, '_', '.' or '-' (no ':'), got {name!r}")
        if not callable(fn):
            raise ValueError(f"the model {name!r} must be a callable, got {type(fn).__name__}")
        if name in self and not replace:
            raise ValueError(f"the model {name!r} is registered twice (pass replace=True to replace it)")
        super().__setitem__(name, fn)

    def __setitem__(self, name: str, fn: Callable[..., Any]) -> None:
        self.register(name, fn, replace=True)


def resolve_callable(spec: ModelSpec, registry: Mapping[str, Callable[..., Any]] | None = None) -> Callable[..., Any]:
    """The callable ``spec.python`` names: a registered name, or ``package.module:function``
    (imported now; a dotted attribute after the colon is followed). ConfigError naming the entry
    when it is not registered, its module cannot be imported, or the attribute is missing or not
    callable."""
    target = str(spec.python)
    where = f"model {spec.alias!r} (python: {target})"
    if ":" not in target:
        if registry is not None and target in registry:
            return registry[target]
        known = ", ".join(sorted(registry or ())) or "none"
        raise ConfigError(
            f"{where}: no callable of that name is registered through pytest_llmbias_add_models "
            f"(registered: {known}); name 'package.module:function' to import one"
        )
    module_name, _, attr = target.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"{where}: cannot import {module_name!r} ({type(exc).__name__}: {exc}); is it installed, "
            "or is its folder on sys.path (the rootdir, or pytest's 'pythonpath' ini option)?"
        ) from None
    except Exception as exc:  # the module itself failed: its error, in one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"{where}: importing {module_name!r} raised {type(exc).__name__}: {first}") from None
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(f"{where}: {module_name!r} has no attribute {attr!r}") from None
    if not callable(value):
        raise ConfigError(f"{where}: {attr!r} is a {type(value).__name__}, not a callable")
    return value


def check_callable(spec: ModelSpec, registry: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """What can be checked of ``spec.python`` before any call without running the application's
    code: a registered name is registered, a module can be found (its parent packages are
    imported to look). The errors of :func:`resolve_callable`."""
    target = str(spec.python)
    if ":" not in target:
        resolve_callable(spec, registry)
        return
    module_name = target.partition(":")[0]
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        found = None
    except Exception:  # a parent package that fails to import: the import at the first call says how
        return
    if found is None:
        raise ConfigError(
            f"model {spec.alias!r} (python: {target}): cannot import {module_name!r} (no module of that "
            "name); is it installed, or is its folder on sys.path (the rootdir, or pytest's 'pythonpath' "
            "ini option)?"
        )


def check_callables(specs: Iterable[ModelSpec], add_models: Callable[[ModelRegistry], None] | None) -> ModelRegistry:
    """The registry ``add_models`` fills, once every Python target of ``specs`` (but a recorded
    release's) passed :func:`check_callable` against it. ConfigError for a target that fails, or
    a registration that ``add_models`` got wrong."""
    registry = ModelRegistry()
    if add_models is not None:
        try:
            add_models(registry)
        except ValueError as exc:  # a bad name, a name twice, something that cannot be called
            raise ConfigError(f"pytest_llmbias_add_models: {exc}") from None
    for spec in specs:
        if spec.python is not None and spec.recorded is None:
            check_callable(spec, registry)
    return registry


def _is_async(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


class PythonTarget:
    """Calls one entry's callable, resolved on the first call (so that an entry whose answers are
    all stored imports nothing)."""

    def __init__(self, spec: ModelSpec, registry: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.spec = spec
        self.registry = registry
        self._fn: Callable[..., Any] | None = None

    @property
    def fn(self) -> Callable[..., Any]:
        if self._fn is None:
            self._fn = resolve_callable(self.spec, self.registry)
        return self._fn

    async def complete(self, call: ModelCall, params: Mapping[str, Any], *, timeout: float) -> Completion:
        """One attempt: the callable on the call's messages and ``params``, within ``timeout``
        seconds (a sync one in a worker thread, which is left to finish on its own after a
        timeout). Its exception goes to the client as it is; a timeout, or an answer that is
        neither a text nor a mapping with one, is a ProviderError."""
        fn = self.fn
        messages = [{"role": r, "content": c} for r, c in call.messages]
        try:
            result = await asyncio.wait_for(self._invoke(fn, messages, dict(params)), timeout=timeout)
        except asyncio.TimeoutError:
            raise ProviderError(f"Timeout: no answer within {timeout:g}s", retryable=True) from None
        return _completion(result)

    @staticmethod
    async def _invoke(fn: Callable[..., Any], messages: list[dict[str, str]], params: dict[str, Any]) -> Any:
        if _is_async(fn):
            result = await fn(messages, **params)
        else:
            result = await asyncio.to_thread(fn, messages, **params)
        if inspect.isawaitable(result):  # a sync wrapper that hands back a coroutine
            result = await result
        return result


def _completion(result: Any) -> Completion:
    if isinstance(result, str):
        return Completion(text=result, finish_reason=None, prompt_tokens=None, completion_tokens=None)
    if isinstance(result, Mapping) and isinstance(result.get("text"), str):
        usage = result.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        reason = result.get("finish_reason")
        return Completion(
            text=result["text"],
            finish_reason=reason if isinstance(reason, str) else None,
            prompt_tokens=token_count(usage.get("prompt_tokens", usage.get("input_tokens"))),
            completion_tokens=token_count(usage.get("completion_tokens", usage.get("output_tokens"))),
            system_fingerprint=result.get("system_fingerprint")
            if isinstance(result.get("system_fingerprint"), str)
            else None,
        )
    raise ProviderError(
        f"the function returned a {type(result).__name__}, not a text or a mapping with a text under 'text'",
        retryable=False,
    )
