"""The run's JSON document (``--llmbias-json PATH``): versioned, validated by the JSON Schema that
ships beside this module (``schema.json``), and extensible through two hooks.

Document, schema version 1::

    {"schema_version": 1, "plugin_version": "...", "created_at": "2026-11-22T21:41:59Z",
     "settings": {...}, "roster": {"target": ..., "baselines": [...], "judge": ...},
     "plan": {"calls", "from_store", "fetched", "failed", "missing", "elapsed_s",
              "usage": {alias: {"calls", "prompt_tokens", "completion_tokens", "cost_usd"}},
              "tokens", "cost_usd"},
     "gates": [{"test", "gate", "domain", "outcome", "passed", "verdict", "result", "row",
                "usage": {"calls", "fetched", "from_store", "failed", "tokens", "cost_usd"}}, ...],
     "counts": {"gates", "checks", "outcomes": {outcome: gates}, "sentence"},
     "fingerprints": [{"alias", "model", "state", "fingerprint", "since", "previous", "served", ...}, ...]}

``counts``: the gates counted as every report counts them (:mod:`pytest_llmbias.report.rows`):
once each, whatever their checks (``checks``: the rows of the reports' tables), by outcome.

``fingerprints``: what the run found of each model's fingerprint (see
:mod:`pytest_llmbias.store.fingerprints`): ``changed`` when the model behind a name changed (its
stored answers were not served), ``unfingerprintable`` when its answers vary by themselves, and
under which fingerprints the answers it served were collected; a recorded release's last.

``usage``: the calls the gate's plan made, its follow-ups' (a judge's ratings) included, and their
cost (see :mod:`pytest_llmbias.planning.gate_usage`); a call two gates asked for counts in both.

``result`` is the gate result's ``to_dict()`` (per-question or per-prompt scores included), or
``{"error": ...}`` when the gate could not be computed. Every string that leaves goes through the
session's redactor, and the settings carry no credential in the first place.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the document."""
    return json.loads(Path(__file__).with_name("schema.json").read_text(encoding="utf-8"))


def plan_figures(reports: Iterable[Any], usage: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The plan's figures from the collection reports (one per collection, or merged across
    pytest-xdist workers) and the usage of the calls fetched, per alias."""
    reports = list(reports)
    tokens = sum(int(u.get("prompt_tokens") or 0) + int(u.get("completion_tokens") or 0) for u in usage.values())
    costs = [u.get("cost_usd") for u in usage.values()]
    return {
        "calls": sum(r.total for r in reports),
        "from_store": sum(r.from_store for r in reports),
        "fetched": sum(r.fetched for r in reports),
        "failed": sum(len(r.errors) for r in reports),
        "missing": sum(len(r.missing) for r in reports),
        "elapsed_s": round(max((r.elapsed_s for r in reports), default=0.0), 3),
        "usage": {a: dict(u) for a, u in usage.items()},
        "tokens": tokens,
        # unknown when any model's price is unknown (litellm's offline price map names it not)
        "cost_usd": None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 6),
    }


def document(
    *,
    settings: Mapping[str, Any],
    plan: Mapping[str, Any],
    gates: Iterable[Mapping[str, Any]],
    version: str,
    created_at: float | None = None,
    fingerprints: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The document of one run (see the module docstring)."""
    stamp = time.gmtime(created_at if created_at is not None else time.time())
    from pytest_llmbias.report.rows import count
    from pytest_llmbias.report.suite import suite_figures

    roster = {
        "target": settings.get("target"),
        "baselines": settings.get("baselines", []),
        "judge": settings.get("judge"),
        "judges": settings.get("judges") or [],
    }
    gates = sorted((dict(g) for g in gates), key=lambda g: g["test"])
    return {
        "schema_version": SCHEMA_VERSION,
        "plugin_version": version,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", stamp),
        "settings": dict(settings),
        "roster": roster,
        "plan": dict(plan),
        "gates": gates,
        # the gates counted once each, whatever their checks (the tables' rows), by outcome
        "counts": {**(counted := count(gates)).to_dict(), "sentence": counted.sentence()},
        # the session as a family of gates: how likely a good release fails some gate of it
        "suite": suite_figures(gates),
        "fingerprints": [dict(f) for f in fingerprints],
    }


def write(path: Path, doc: Mapping[str, Any], redact: Callable[[str], str]) -> None:
    """Write ``doc`` to ``path`` (atomically, the user's default file mode), every credential
    masked."""
    text = redact(json.dumps(doc, indent=2, sort_keys=False, default=str, allow_nan=False)) + "\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
