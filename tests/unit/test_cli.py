"""The ``llmbias`` command: domains and the store, with the exit codes a script relies on."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_llmbias.cli.command import main
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.store import ResponseStore, read_snapshot
from pytest_llmbias.store.calls import ModelCall, Response


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_help_and_a_missing_command() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_llmbias", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "domains" in done.stdout and "Exit codes" in done.stdout
    # its description says what the command does: every command it lists, by name
    from pytest_llmbias.cli.command import _parser

    parser = _parser()
    names = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    described = " ".join(parser.description.split())
    assert len(names) >= 8 and [n for n in names if f"{n}" not in described] == [], described
    assert run()[0] == 2
    with pytest.raises(SystemExit) as info:
        main(["domains", "nonsense"])
    assert info.value.code == 2


def test_a_reader_that_stops_early_is_not_an_error() -> None:
    """As with `llmbias domains list | head -1`: the pipe is closed before anything is written."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_llmbias", "domains", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert "BrokenPipe" not in stderr and "Traceback" not in stderr


def test_domains_list_show_and_validate(tmp_path: Path) -> None:
    code, text = run("domains", "list")
    assert (
        code == 0
        and "bias_dimensions      questions       90 prompts" in text
        and "political_topics     topics" in text
    )
    code, text = run("domains", "show", "binary_opinions")
    assert code == 0 and "bo-wrk-09:a" in text and "[en, es, fr]" in text
    assert run("domains", "show", "atlantis")[0] == 3
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndescription: d\nfocus: f\ninstruction: i\ncategories: [\n", encoding="utf-8")
    code, text = run(
        "domains",
        "validate",
        str(bad),
        str(Path(__file__).parents[2] / "src/pytest_llmbias/domains/builtin/countries.yaml"),
    )
    assert code == 1 and f"FAIL {bad}:" in text and "ok   " in text and "countries, 228 items" in text


def stored(tmp_path: Path, n: int = 3) -> Path:
    store = ResponseStore(tmp_path / "store")
    spec = ModelSpec(model="openai/m", alias="m")
    for i in range(n):
        store.put(
            Response(
                call=ModelCall.build(spec, f"q{i}", GenerationSettings()),
                text=f"a{i}",
                prompt_tokens=5,
                completion_tokens=7,
            )
        )
    store.close()
    return tmp_path / "store"


def test_store_stats_export_verify_and_clear(tmp_path: Path) -> None:
    directory = stored(tmp_path)
    code, text = run("store", "stats", "--store", str(directory))
    assert code == 0 and text.startswith("3 responses, 36 tokens") and "openai/m: 3" in text
    code, text = run("store", "export", str(tmp_path / "all.jsonl"), "--store", str(directory))
    assert code == 0 and len(read_snapshot(tmp_path / "all.jsonl")) == 3
    code, text = run("store", "verify", "--store", str(directory), "--snapshot", str(tmp_path / "all.jsonl"))
    assert code == 0 and "6 checked, 0 problem(s)" in text

    import diskcache

    with diskcache.Cache(str(directory / "responses")) as cache:
        key = next(k for k in cache.iterkeys() if k.startswith("response:"))
        record = json.loads(cache.get(key))
        record["messages"][0]["content"] = "edited by hand"
        cache.set(key, json.dumps(record))
    code, text = run("store", "verify", "--store", str(directory))
    assert code == 1 and f"bad entry {key[len('response:') :]}: its request fields hash to another key" in text

    other = stored(tmp_path / "other", n=5)  # q0-q4: three already in the store, one edited below
    snapshot = tmp_path / "other.jsonl"
    assert run("store", "export", str(snapshot), "--store", str(other))[0] == 0
    lines = snapshot.read_text().splitlines()
    lines[0] = lines[0].replace('"text": "a', '"text": "changed a')
    snapshot.write_text("\n".join(lines) + "\n")
    code, text = run("store", "import", str(snapshot), "--store", str(directory))
    assert code == 1 and "1 conflict(s)" in text and "2 imported" in text
    assert run("store", "stats", "--store", str(directory))[1].startswith("5 responses")

    assert run("store", "clear", "--store", str(directory))[0] == 2 and directory.exists()
    assert run("store", "clear", "--store", str(directory), "--yes")[0] == 0 and not directory.exists()
    assert run("store", "stats", "--store", str(directory))[0] == 3


def test_report_refuses_what_is_not_a_run_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_json = tmp_path / "x.json"
    not_json.write_text("{")
    assert run("report", str(not_json), "--html", str(tmp_path / "x.html"))[0] == 3
    assert "is not a pytest-llmbias JSON document" in capsys.readouterr().err
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema_version": 2, "gates": [], "plan": {}}))
    assert run("report", str(newer), "--html", str(tmp_path / "x.html"))[0] == 3
    assert "schema_version 2; this pytest-llmbias reads 1" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_serve_refuses_a_model_that_is_neither_the_built_in_one_nor_a_gguf_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any model loads: a usage error naming what it takes (the server itself runs in the
    walkthrough's test and the real-model tests)."""
    from pytest_llmbias.local.server import GGUF_FILE, MODEL_NAME, gguf_dir, model_file

    (tmp_path / "notes.txt").write_text("not a model")
    assert main(["serve", str(tmp_path / "notes.txt"), "--port", "0"]) == 2
    assert f"is neither '{MODEL_NAME}' nor a GGUF file" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "missing.gguf")]) == 2
    assert model_file(MODEL_NAME) == (gguf_dir(), GGUF_FILE)
    (tmp_path / "mine.gguf").write_bytes(b"GGUF")
    assert model_file(str(tmp_path / "mine.gguf")) == (str(tmp_path), "mine.gguf")
