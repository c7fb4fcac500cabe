"""The project as users install it, for the tests that install it: its wheel (and sdist) built by
setuptools' own build hooks, and a fresh virtual environment in which the test environment's
third-party packages count as installed and this project does not, so that ``pip install
pytest-llmbias`` from the built wheel needs no package index."""

from __future__ import annotations

import ensurepip
import os
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the test environment's entries that are this project's own (its editable install), kept out of a fresh one
OWN = ("pytest_llmbias", "__editable__", "_pytest_llmbias")
#: where the interpreter keeps the pip wheel ``ensurepip`` installs (Debian's: a folder of its own)
BUNDLED = Path(ensurepip.__file__).parent / "_bundled"
DEBIAN = Path("/usr/share/python-wheels")
SCRIPT = """#!{python}
import sys
from importlib.metadata import EntryPoint

if __name__ == "__main__":
    sys.exit(EntryPoint({name!r}, {value!r}, "console_scripts").load()())
"""


def build(tmp: Path, hooks: tuple[str, ...] = ("build_wheel", "build_sdist")) -> list[Path]:
    """The distributions the build ``hooks`` make (the wheel, the sdist: in that order), built from a
    copy of the sources under ``tmp`` (the build writes beside them) into ``tmp / "dist"``."""
    source = tmp / "source"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp / "dist"
    built = []
    for hook in hooks:  # one process each: setuptools keeps state between the two
        out = tmp / f"{hook}.txt"
        code = (
            f"import sys; from setuptools import build_meta as b; open(sys.argv[2], 'w').write(b.{hook}(sys.argv[1]))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(dist), str(out)], cwd=source, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        built.append(dist / out.read_text().strip())
    return built


def site_packages(python: Path) -> Path:
    """The site-packages folder of the environment whose interpreter is ``python``."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def fresh_environment(folder: Path) -> Path:
    """A new virtual environment at ``folder`` with its own pip (the interpreter's ensurepip wheel),
    whose site-packages also reads the test environment's third-party packages (a folder of links to
    them beside it, named by a ``.pth`` line) and not this project: pip finds them installed and
    ``pytest-llmbias`` missing. Their console scripts are in its ``bin``, run by its interpreter, as
    pip would have written them. Returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    # pip alone, not compiled (ensurepip's setuptools, 65.5 on Python 3.11, would hide the test
    # environment's, and torch needs setuptools>=77.0.3: a runner's pip upgrades it from the index)
    pip = [*BUNDLED.glob("pip-*.whl"), *DEBIAN.glob("pip-*.whl")]
    assert pip, f"no pip wheel in {BUNDLED} or {DEBIAN}"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index", "--no-deps"]
        + ["--no-compile", str(pip[0])],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    installed = folder.parent / f"{folder.name}-installed"
    installed.mkdir()
    for lib in dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib")):
        for entry in Path(lib).iterdir():
            if entry.name.startswith(OWN) or entry.suffix == ".pth" or (installed / entry.name).exists():
                continue  # a .pth would not run from there; the editable install's is this project
            (installed / entry.name).symlink_to(entry)
    (site_packages(python) / "_installed.pth").write_text(f"{installed}\n", encoding="utf-8")
    scripts = folder / "bin"
    for dist in distributions(path=[str(installed)]):
        for point in dist.entry_points.select(group="console_scripts"):
            script = scripts / point.name
            if not script.exists():
                script.write_text(SCRIPT.format(python=python, name=point.name, value=point.value), encoding="utf-8")
                script.chmod(0o755)
    return python
