"""The walkthrough ``docs/first-release-gate.md`` is true: its commands are run as they are written
(against the real SmolLM2-135M server, which the session starts with the document's ``llmbias
serve`` command on a free port instead of 8000), its files are written as they are shown, and the
output it shows is what the run prints, figures aside (a figure in the document stands for any
figure: a CPU's last digits may differ).

The document's blocks, in order: ``bash`` blocks are commands (the install line must be the
README's; the server line must be the session's server's command; ``mkdir``/``cd`` set the
folder), a block whose first line is ``# NAME`` is a file written there, and a ``console`` block is
``$ command`` lines, each followed by its output. ``...`` in an output stands for lines not shown.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
WALKTHROUGH = ROOT / "docs" / "first-release-gate.md"

pytestmark = pytest.mark.xdist_group("smollm")

#: a figure: an integer, a decimal, a rate, a time or a number in exponent form
_FIGURE = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")
_SPACES = re.compile(r" {2,}")
#: a model's fingerprint
_DIGEST = re.compile(r"\b[0-9a-f]{16}\b")
#: a rule of ``=`` or ``-``, whose length follows the text it frames
_RULE = re.compile(r"={3,}|-{3,}")


def blocks() -> list[tuple[str, str]]:
    """The document's fenced blocks, as (info string, content), in order."""
    tokens = MarkdownIt("commonmark").parse(WALKTHROUGH.read_text(encoding="utf-8"))
    return [(t.info.strip(), t.content) for t in tokens if t.type == "fence"]


def pattern(line: str) -> str:
    """An output line of the document as an fnmatch pattern: figures, column padding, absolute
    paths and model fingerprints (16 hex digits: a digest of the model's answers, which another
    CPU may word differently) match any."""
    out = re.sub(r"/[\w./-]+", "\0", line)
    out = _DIGEST.sub("\0", out)
    out = _FIGURE.sub("\0", out)
    out = _SPACES.sub("\0", out)
    out = _RULE.sub("\0", out)
    out = re.sub(r"[\[\]?*]", lambda m: f"[{m.group()}]", out)
    return re.sub("\0+", "*", out).rstrip()


def sessions(content: str) -> list[tuple[str, list[str]]]:
    """A console block as (command, output lines shown)."""
    out: list[tuple[str, list[str]]] = []
    for line in content.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


def test_the_figure_pattern_matches_other_figures_and_nothing_else() -> None:
    from fnmatch import fnmatch

    shown = "llmbias: 30 calls: 0 from store, 30 fetched, 0 failed, 0 missing, in 23.0s"
    assert fnmatch("llmbias: 30 calls: 0 from store, 30 fetched, 0 failed, 0 missing, in 31.4s", pattern(shown))
    assert not fnmatch(
        "llmbias: 30 calls: 0 from store, 30 fetched, 2 failed, 0 missing, in 31.4s".replace("failed", "errors"),
        pattern(shown),
    )
    assert fnmatch("store /tmp/x/first-gate/.llmbias (use)", pattern("store /home/you/first-gate/.llmbias (use)"))
    assert fnmatch("=== 1 passed in 25.47s ===", pattern("==== 1 passed in 1.5s ===="))
    assert not fnmatch("=== 1 failed in 25.47s ===", pattern("==== 1 passed in 1.5s ===="))
    assert fnmatch(".      [100%]", pattern(".  [100%]"))
    shown = "llmbias: fingerprints: assistant-next d00bd7de71a6f37e (adopted)"
    assert fnmatch("llmbias: fingerprints: assistant-next 5ac0ffee12ab34cd (adopted)", pattern(shown))
    assert not fnmatch(
        "llmbias: fingerprints: assistant-next 5ac0ffee12ab34cd (unchanged since 2026-11-27)", pattern(shown)
    )


def test_the_walkthrough_installs_as_the_readme_does() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    installs = [c for info, c in blocks() if info == "bash" and "pip install" in c]
    assert len(installs) == 1
    for step in installs[0].strip().split(" && "):
        if "pip install" in step or "venv" in step:
            assert step in readme, step


def test_every_option_the_walkthrough_names_exists() -> None:
    """Its prose as well as its commands: a flag the document names is one pytest accepts."""
    from pytest_llmbias.config.option_table import OPTIONS

    named = set(re.findall(r"--llmbias-[a-z-]*[a-z]", WALKTHROUGH.read_text(encoding="utf-8")))
    assert named, "the walkthrough names the options it uses"
    unknown = sorted(named - {o.flag for o in OPTIONS})
    assert not unknown, f"the walkthrough names options that do not exist: {unknown}"


def test_the_walkthrough_runs_as_written(tmp_path: Path, smollm) -> None:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TQDM_DISABLE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # The document shows a developer's terminal; on a CI runner ($CI, $BUILD_NUMBER) pytest would not
    # shorten its short test summary.
    for name in (
        "PYTEST_ADDOPTS",
        "PYTEST_XDIST_WORKER",
        "PYTEST_XDIST_WORKER_COUNT",
        "PYTEST_CURRENT_TEST",
        "CI",
        "BUILD_NUMBER",
    ):
        env.pop(name, None)
    here, port, consoles = tmp_path, None, 0
    for info, content in blocks():
        first = content.splitlines()[0] if content.strip() else ""
        if info == "bash" and "pip install" in content:
            continue  # the test command installed it (checked above)
        if info == "bash" and "llmbias serve" in content:
            # the session's server runs the document's command (``llmbias serve``, the script's
            # own main), on a free port: the model is loaded once for every real-model test
            command = shlex.split(content.strip().rstrip("&").strip())
            assert command[:3] == ["HF_HUB_OFFLINE=1", ".venv/bin/llmbias", "serve"], command
            assert smollm.command(port=8000) == command[2:], (smollm.command(port=8000), command)
            port = smollm.port
        elif info == "bash":
            for step in content.strip().split(" && "):
                verb, *rest = shlex.split(step)
                assert verb in ("mkdir", "cd"), f"the walkthrough runs {step!r}: teach this test what it does"
                if verb == "mkdir":
                    (here / rest[-1]).mkdir()
                else:
                    here = here / rest[-1]
        elif first.startswith("# ") and info in ("yaml", "python"):
            assert port is not None, "a file before the server is started"
            text = content.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
            (here / first[2:].strip()).write_text(text, encoding="utf-8")
        elif info == "console":
            for command, shown in sessions(content):
                consoles += 1
                _check(command, shown, here, env, port)
    assert consoles >= 3, "the walkthrough shows a pass, a warm re-run and a failure"


def unwrapped(lines: list[str]) -> list[str]:
    """``lines`` with each of the plugin's wrapped paragraphs (an ``llmbias:`` line and the
    indented lines that continue it) on one line: where a paragraph wraps depends on the width of
    its figures ("0%" or "<0.1%"), which another CPU's answers may change."""
    out: list[str] = []
    joining = False
    for line in lines:
        if joining and line.startswith("  ") and line.strip():
            out[-1] += " " + line.strip()
            continue
        joining = line.startswith("llmbias:")
        out.append(line)
    return out


def _check(command: str, shown: list[str], here: Path, env: dict[str, str], port: int | None) -> None:
    args = shlex.split(command.replace("127.0.0.1:8000", f"127.0.0.1:{port}"))
    assert args[:3] == ["../.venv/bin/python", "-m", "pytest"], f"the walkthrough runs {command!r}"
    done = subprocess.run(
        [sys.executable, *args[1:], "-p", "no:randomly"], cwd=here, env=env, capture_output=True, text=True, timeout=600
    )
    printed = unwrapped([line.rstrip() for line in done.stdout.splitlines()])
    matcher = pytest.LineMatcher(printed)
    patterns = [pattern(line) for line in unwrapped(shown) if line.strip() and line.strip() != "..."]
    assert patterns, f"{command!r} shows no output"
    try:
        matcher.fnmatch_lines(patterns)
    except pytest.fail.Exception:
        raise AssertionError(f"{command!r} printed, in {here}:\n{done.stdout[-6000:]}") from None
