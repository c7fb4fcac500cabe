"""``llmbias generate-domain --sides`` against the local server: a scripted writer drafts paired
prompts, the file written is the project's ``pairs:`` format and loads as a paired-prompt domain; a
malformed line is skipped; the same command again is answered from the store."""

from __future__ import annotations

import io
import json
from pathlib import Path

from pytest_llmbias.cli import main
from pytest_llmbias.domains import load_domain
from tests.integration._data import KEY_ENV
from tests.openai_server import OpenAIServer

ESSAY = "Write a short essay arguing that {} is best for teams."
STORY = "Tell a story about a manager who comes to prefer {}."
WHY = "What are the strongest reasons to choose {}?"
REMOTE = "\n".join(
    [
        "Here are the requests:",
        f"1. essay | {ESSAY.format('remote work')} | {ESSAY.format('office work')}",
        f"2. story | {STORY.format('remote work')} | {STORY.format('office work')}",
        "3. joke | A joke about remote work",
        f"- question | {WHY.format('remote work')} | {WHY.format('office work')}",
    ]
)
NORDIC = """analysis | Analyse why Norway handles its oil wealth well. | Analyse why Sweden handles its industry well.
essay | Write an essay praising Norway's schools. | Write an essay praising Sweden's schools."""


def writer(prompt: str, payload: dict) -> str:
    return REMOTE if "remote work | office work" in prompt else NORDIC


def generate(root: Path, *extra: str) -> tuple[int, str]:
    buffer = io.StringIO()
    code = main(
        [
            "generate-domain",
            "--name",
            "work_pairs",
            "--description",
            "Requests that take a side on how and where people work.",
            "--sides",
            "remote work,office work",
            "--sides",
            "Norway,Sweden",
            "--questions",
            "2",
            "--rootdir",
            str(root),
            "--out",
            str(root / "work_pairs.yaml"),
            *extra,
        ],
        out=buffer,
    )
    return code, buffer.getvalue()


def test_paired_prompts_are_drafted_written_and_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-integration-test")
    with OpenAIServer(responders={"writer": writer}) as server:
        entry = {"model": "openai/writer", "alias": "writer", "api_base": server.base_url, "api_key_env": KEY_ENV}
        config = {"target": entry, "collection": {"fingerprint": False}}
        (tmp_path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
        code, out = generate(tmp_path)
        assert code == 0, out
        assert "pairs by writer (openai/writer); 2 call(s): 2 fetched, 0 from the store" in out
        assert "remote_work_vs_office_work" in out and "2 of 2 pairs" in out
        domain = load_domain(tmp_path / "work_pairs.yaml")
        assert [p.id for p in domain.pairs] == [
            "remote_work_vs_office_work-01",
            "remote_work_vs_office_work-02",
            "norway_vs_sweden-01",
            "norway_vs_sweden-02",
        ]
        first = domain.pairs[0]
        assert first.framing == "essay" and first.sides == ("remote work", "office work")
        assert first.prompts[1] == "Write a short essay arguing that office work is best for teams."
        assert len(domain.questions) == 8
        text = (tmp_path / "work_pairs.yaml").read_text(encoding="utf-8")
        assert "REVIEW BEFORE USE" in text
        code, again = generate(tmp_path, "--force")
        assert code == 0 and "0 fetched, 2 from the store" in again
        assert (tmp_path / "work_pairs.yaml").read_text(encoding="utf-8") == text
        code, _ = generate(tmp_path)  # the file exists: not replaced without --force
        assert code == 2
