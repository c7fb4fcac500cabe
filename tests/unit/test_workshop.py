"""The lint and type checks: ruff and mypy, with their settings in pyproject.toml, pass on the tree.

Each runs as a subprocess from the repository root with the executables of the environment that
runs the tests (the `test` extra installs them); a failure prints the findings.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str, timeout: float = 600) -> None:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(f"{tool} is not installed next to {sys.executable}: pip install -e '.[test]'")
    done = subprocess.run(
        [str(exe), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, f"{tool} {' '.join(args)} found:\n{done.stdout}{done.stderr}"


def test_ruff_check_passes() -> None:
    _run("ruff", "check", "--no-cache", ".")


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    _run("ruff", "format", "--check", "--no-cache", ".")


@pytest.mark.xdist_group("mypy")
def test_mypy_passes() -> None:
    # files, strictness and the third-party modules without stubs: pyproject.toml's [tool.mypy]
    _run("mypy")
