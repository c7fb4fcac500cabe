from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmbias.calls import ModelCall, Response
from pytest_llmbias.domains import load_domain
from pytest_llmbias.settings import resolve_settings
from pytest_llmbias.store.snapshot import write_snapshot

ROSTER = """\
target: {model: openai/tgt, alias: tgt}
baselines:
  - {model: openai/b1, alias: b1}
  - {model: openai/b2, alias: b2}
"""


def make_snapshot(project: Path, *, domain: str = "china_sensitive", category: str = "tibet",
                  skip: set[tuple[str, str]] = frozenset(), name: str = "snap.jsonl") -> Path:
    """A snapshot holding every roster model's answer to one category, except the (alias, id) in skip."""
    settings = resolve_settings(config_path=project / "llmbias.yaml", environ={}, cwd=project)
    responses = []
    for spec in settings.roster:
        for q in load_domain(domain).select([category]):
            if (spec.alias, q.id) in skip:
                continue
            call = ModelCall.build(spec, q.text, settings.generation)
            responses.append(Response(call=call, text=f"{spec.alias} on {q.id}"))
    path = project / name
    write_snapshot(path, responses)
    return path


@pytest.fixture
def offline_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with a three-model roster and a snapshot of their answers to china_sensitive/tibet."""
    pytester.makefile(".yaml", llmbias=ROSTER)
    make_snapshot(pytester.path)
    return pytester
