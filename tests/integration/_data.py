"""The roster of the network-path tests, as the scripted local server sees it, and the pytest process they start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KEY_ENV = "LLMBIAS_IT_API_KEY"
"""The variable the test rosters name in ``api_key_env``."""

#: alias -> model name as the server sees it (litellm strips the "openai/" prefix)
TARGET = "tgt"
BASELINES = ("base_a", "base_b")
MODELS = {"tgt": "tgt-model", "base_a": "base-a-model", "base_b": "base-b-model"}

#: hypothesis' pytest plugin alone adds about a second to each inner run
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def requests_of(server, alias: str) -> list[dict]:
    """The requests the server received for the model of ``alias``."""
    return [r for r in server.requests if r["model"] == MODELS[alias]]


def entry(alias: str, name: str, base_url: str, *, transport: str = "openai", **extra: object) -> dict:
    """A roster entry for model ``name`` on the local server at ``base_url``, as ``alias``, with the
    test key's variable and ``transport`` (``openai`` or ``litellm``), and any ``extra`` keys."""
    return {
        "model": f"openai/{name}",
        "alias": alias,
        "api_base": base_url,
        "api_key_env": KEY_ENV,
        "transport": transport,
        **extra,
    }


def start_pytest(folder: Path, *args: str, key: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A pytest process on the project in ``folder`` (quiet, its output in ``stdout``), with ``key`` in
    :data:`KEY_ENV`, ``env`` added, and none of this process's ``LLMBIAS_``/``PYTEST_`` variables: for a
    run that is killed, or runs beside another."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("LLMBIAS_", "PYTEST_"))}
    environ.update(env or {})
    environ[KEY_ENV] = key
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, "-p", "no:randomly", *args],
        cwd=folder,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
