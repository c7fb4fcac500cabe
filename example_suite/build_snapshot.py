"""Rebuild snapshots/demo.jsonl from the illustrative answers in illustrative/*.yaml.

    python example_suite/build_snapshot.py

The answers were written for this demo; they are not the output of any real model. The snapshot
holds them under the exact call keys that llmbias.yaml's roster and generation settings produce,
so the suite finds them offline. A test checks the committed file matches this script's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from pytest_llmbias.calls import ModelCall, Response
from pytest_llmbias.domains import load_domain
from pytest_llmbias.settings import resolve_settings
from pytest_llmbias.store.snapshot import write_snapshot

HERE = Path(__file__).resolve().parent
SNAPSHOT = HERE / "snapshots" / "demo.jsonl"


def build(out: Path = SNAPSHOT) -> int:
    settings = resolve_settings(config_path=HERE / "llmbias.yaml", environ={}, cwd=HERE)
    responses, labels = [], {}
    for source in sorted((HERE / "illustrative").glob("*.yaml")):
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
        domain = load_domain(data["domain"], settings.domains.paths)
        answers = data["responses"]
        for spec in settings.roster:
            for question in domain.questions:
                text = answers[question.id][spec.alias]
                call = ModelCall.build(spec, question.text, settings.generation, sample=0)
                responses.append(Response(call=call, text=text, finish_reason="stop", source="illustrative"))
                labels[call.key] = {"alias": spec.alias, "domain": domain.name, "question": question.id}
    return write_snapshot(out, responses, labels)


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else SNAPSHOT
    print(f"wrote {build(out)} responses to {out}")
