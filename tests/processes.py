"""Stopping the servers the tests start in subprocesses (the package's own helper, which
``llmbias serve``'s :class:`~pytest_llmbias.local.server.SmolLMServer` uses too)."""

from __future__ import annotations

from pytest_llmbias.local.server import stop

__all__ = ["stop"]
