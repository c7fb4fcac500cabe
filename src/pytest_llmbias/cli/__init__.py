"""The ``llmbias`` command: domains, the store, ``init``, ``serve``, ``generate-domain`` and releases,
without running pytest. The entry point is :func:`pytest_llmbias.cli.command.main`; ``pytest_llmbias.cli:main``
names it too, for scripts written before the command had a folder of its own."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "main":
        from pytest_llmbias.cli.command import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
