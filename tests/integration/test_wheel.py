"""What users install works: the wheel and the sdist built from the project (setuptools' own build
hooks, as ``pip install .`` calls them), the wheel installed without ``-e`` into a fresh virtual
environment, and from there the example suite and ``llmbias init``. The new environment reads the
third-party packages from the test environment's site-packages (a plain path, so the test
environment's editable install of this project is not on it): only this project comes from the wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

from tests.wheels import build, site_packages

ROOT = Path(__file__).resolve().parents[2]
DATA = (
    "pytest_llmbias/py.typed",
    "pytest_llmbias/report/schema.json",
    "pytest_llmbias/rubrics/bias_1_10.yaml",
    "pytest_llmbias/domains/builtin/us_politics.yaml",
)


def test_the_wheel_installs_and_runs_the_example_suite_and_init(tmp_path: Path) -> None:
    wheel, sdist = build(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(DATA) <= names, set(DATA) - names
    assert "pytest_llmbias/local/server.py" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "llmbias = pytest_llmbias.plugin" in text and "llmbias = pytest_llmbias.cli.command:main" in text
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {f"src/{d}" for d in DATA} <= members and "pyproject.toml" in members

    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True, timeout=120)
    python = fresh / "bin" / "python"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    site = site_packages(python)
    (site / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LLMBIAS_"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)

    where = subprocess.run(
        [str(python), "-c", "import pytest_llmbias; print(pytest_llmbias.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(site)), where  # this project from the wheel, not from the sources

    example = tmp_path / "example"
    shutil.copytree(ROOT / "example_suite", example, ignore=shutil.ignore_patterns(".llmbias", "out", "__pycache__"))
    run = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q"],
        cwd=example,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "9 passed, 8 xfailed" in run.stdout, run.stdout[-4000:] + run.stderr[-2000:]

    project = tmp_path / "project"
    init = subprocess.run(
        [
            str(fresh / "bin" / "llmbias"),
            "init",
            "--dir",
            str(project),
            "--target",
            "openai/a",
            "--baseline",
            "openai/b",
            "--baseline",
            "openai/c",
            "--judge",
            "openai/d",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert init.returncode == 0, init.stderr
    plan = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "--llmbias-plan"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # the scaffold's gate plans from the wheel's own domain, rubric and anchors, calling nothing
    assert plan.returncode == 0 and "llmbias plan (no call made" in plan.stdout, plan.stdout[-3000:] + plan.stderr
