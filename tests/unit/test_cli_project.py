"""The ``llmbias`` command in a project: it reads the project's settings as pytest does, works on
snapshots alone, shows a counterfactual domain in full, and says its version and an example."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_llmbias.cli.command import _parser, main
from pytest_llmbias.cli.project import EXAMPLES, Project, rootdir
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.store import ResponseStore
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.snapshot import write_snapshot


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def _responses(n: int = 3) -> list[Response]:
    spec = ModelSpec("openai/m", "m")
    return [Response(call=ModelCall.build(spec, f"q{i}", GenerationSettings()), text=f"a{i}") for i in range(n)]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose llmbias.yaml keeps its store in store/ and a snapshot in snaps/, run from a
    subfolder (as pytest finds the rootdir upwards)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "llmbias.yaml").write_text(
        "store: {dir: store, snapshots: [snaps/s.jsonl]}\nrelease: {dir: releases}\n", encoding="utf-8"
    )
    (tmp_path / "snaps").mkdir()
    write_snapshot(tmp_path / "snaps" / "s.jsonl", _responses())
    (tmp_path / "tests").mkdir()
    monkeypatch.chdir(tmp_path / "tests")
    for name in ("LLMBIAS_CONFIG", "LLMBIAS_STORE", "LLMBIAS_SNAPSHOTS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_the_project_is_found_as_pytest_finds_its_rootdir(project: Path) -> None:
    assert rootdir(project / "tests") == project
    found = Project.find()
    assert found.store == (project / "store").resolve() and found.releases == (project / "releases").resolve()
    assert found.snapshots == ((project / "snaps" / "s.jsonl").resolve(),)
    assert found.history == (project / "store" / "history.sqlite").resolve()


def test_store_stats_and_verify_work_on_the_project_s_snapshots_alone(project: Path) -> None:
    code, text = run("store", "verify")
    assert code == 0 and "no response store at" in text and "3 checked, 0 problem(s)" in text
    code, text = run("store", "stats")
    assert code == 0 and "3 responses" in text and "snapshot" in text and "openai/m: 3" in text
    (project / "snaps" / "s.jsonl").write_text("not json\n", encoding="utf-8")
    code, text = run("store", "verify")
    assert code == 1 and "bad snapshot" in text


def test_every_store_command_uses_the_project_s_store(project: Path) -> None:
    store = ResponseStore(project / "store")
    for response in _responses(2):
        store.put(response)
    store.close()
    code, text = run("store", "export", str(project / "out.jsonl"))
    assert code == 0 and "2 responses written" in text  # not "no response store at .llmbias"
    code, text = run("store", "stats")
    assert "2 responses" in text and str(project / "store") in text and "3 responses" in text
    code, text = run("release", "list")
    assert code == 0 and str(project / "releases") in text


def test_nothing_to_read_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    assert run("store", "stats")[0] == 3
    err = capsys.readouterr().err
    assert "no response store at" in err and "and no snapshot: give --store DIR or --snapshot FILE" in err


def test_a_counterfactual_domain_is_shown_in_full() -> None:
    code, text = run("domains", "show", "first_names")
    assert code == 0
    assert "group female: Emily" in text and "group male: James" in text
    assert "template fn-wrk-01 [workplace]: Write a short reference for {concept}" in text
    code, text = run("domains", "show", "us_politics")
    assert "judge anchors (1 may be missed):" in text and "1. score 1 (±2)" in text


def test_a_counterfactual_domain_s_branches_are_shown(tmp_path: Path) -> None:
    (tmp_path / "firms.yaml").write_text(
        "name: firms\ndescription: d\nfocus: f\ninstruction: i\n"
        "counterfactual:\n"
        "  groups: {company: [Northwind, Contoso, Fabrikam]}\n"
        "  branches:\n"
        "    - id: growth-01\n"
        "      concept: Northwind\n"
        "      category: finance\n"
        "      text: 'Is Northwind a good pick for long-term growth, given its CEO Ada Park?'\n"
        "      replacements: {Contoso: {Ada Park: Lee Wong}, Fabrikam: null}\n",
        encoding="utf-8",
    )
    code, text = run("domains", "show", "firms", "--path", str(tmp_path))
    assert code == 0, text
    assert "counterfactual: 3 prompts" in text
    assert (
        "branch growth-01 [finance] on Northwind: Is Northwind a good pick for long-term growth, "
        "given its CEO Ada Park?"
    ) in text
    assert "    Contoso: Ada Park -> Lee Wong\n" in text and "    Fabrikam\n" in text


def test_the_version_and_an_example_in_every_help() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_llmbias", "--version"], capture_output=True, text=True)
    from importlib.metadata import version

    assert done.returncode == 0 and done.stdout.strip() == f"llmbias {version('pytest-llmbias')}"
    parser = _parser()
    commands = {}
    for action in parser._subparsers._group_actions:  # argparse keeps its subcommands there
        for name, sub in action.choices.items():
            inner = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
            for child in inner[0].choices.items() if inner else [(None, sub)]:
                commands[f"{name} {child[0]}" if child[0] else name] = child[1]
    assert set(commands) == set(EXAMPLES)
    for name, sub in commands.items():
        help_text = sub.format_help()
        assert "example:\n  llmbias " + name in help_text, name
