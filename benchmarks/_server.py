"""The local OpenAI-compatible server (``tests/openai_server.py``) as the benchmarks run it: in its
own process, so that its CPU is not charged to the client being measured."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def start_server(*options: str, latency: float) -> tuple[subprocess.Popen[str], str]:
    """Start the server on a free port with ``--latency`` and any further ``options`` (say
    ``--judge judge`` or ``--fault-rate 0.2``); its process and base URL (``.../v1``)."""
    command = [
        sys.executable,
        str(ROOT / "tests" / "openai_server.py"),
        "--port",
        "0",
        "--latency",
        str(latency),
        *options,
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("READY "):
            return proc, line.split()[1]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("the local server did not start")


def stop_server(proc: subprocess.Popen[str]) -> None:
    from pytest_llmbias.local.server import stop

    stop(proc)


def admin(base: str, path: str, *, post: bool = False) -> Any:
    """The JSON answer of an admin endpoint (``/_admin/stats``, ``/_admin/counters``...)."""
    url = base.rsplit("/v1", 1)[0] + path
    request = urllib.request.Request(url, data=b"" if post else None, method="POST" if post else "GET")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.load(resp)
