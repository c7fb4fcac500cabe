"""Writing a release (see :mod:`pytest_llmbias.releases.release`): the target's answers of a run and the
judge's ratings of them, from the response store, then the manifest.

Under pytest-xdist each worker writes its part of the answers (a part file, as a snapshot export
does) and the controller joins them and writes the manifest once.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_llmbias.config.settings import Settings
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.releases.release import (
    MANIFEST,
    RESPONSES,
    check_name,
    domain_hashes,
    git_commit,
    manifest,
    recorded_model,
    release_folder,
)
from pytest_llmbias.store.fingerprints import PROBE_DOMAIN
from pytest_llmbias.store.response_store import ResponseStore
from pytest_llmbias.store.snapshot import SnapshotLayer, export_part_path, merge_export_parts, write_snapshot


def check_recordable(settings: Settings) -> Path | None:
    """The folder release ``release.record`` will be written to, or None when none is recorded.
    ConfigError before any call is made: no target, a bad name, or a release of that name already
    recorded without ``release.force``."""
    name = settings.release.record
    if not name:
        return None
    check_name(name, "--llmbias-record-release")
    if settings.target is None:
        raise ConfigError("--llmbias-record-release records the target's answers: configure a target")
    folder = release_folder(name, settings.release.dir)
    if (folder / MANIFEST).exists() and not settings.release.force:
        raise ConfigError(
            f"release {name!r} is already recorded in {folder}: pass --llmbias-force to record over it, "
            "or choose another name"
        )
    return folder


def _records_target(labels: Mapping[str, Any], target: str, judges: Collection[str]) -> bool:
    """The target's own calls, and each judge's on the target's answers: its ratings
    (``judge:<target>:...``, retests included) and its picks among the target's articles
    (``trial ... by <target> ...``)."""
    alias, question = labels.get("alias"), str(labels.get("question") or "")
    if labels.get("domain") == PROBE_DOMAIN:  # a fingerprint probe, not an answer
        return False
    on_target = question.startswith(f"judge:{target}:") or f" by {target} " in question
    return alias == target or (alias in judges and on_target)


def write_release_answers(
    store: ResponseStore, settings: Settings, worker_id: str | None = None, run_id: str | None = None
) -> Path | None:
    """Write the target's answers this session used, and the judge's calls on them, to the release's
    answers file (a worker: to its part file). Returns the file, or None when nothing is recorded."""
    if not settings.release.record or settings.target is None:
        return None
    path = release_folder(settings.release.record, settings.release.dir) / RESPONSES
    if worker_id:
        path = export_part_path(path, worker_id, run_id)
    target = settings.target.alias
    judges = {j.alias for j in settings.panel}
    model = recorded_model(settings.release.record, settings.target.model)
    responses, labels = [], {}
    for response, lab in store.used_with_labels():
        if not _records_target(lab, target, judges):
            continue
        if lab.get("alias") == target:  # the target's own answer: recorded under the release's model name
            response = dataclasses.replace(response, call=dataclasses.replace(response.call, model=model))
            if settings.target.system_hash:
                lab = {**lab, "system": settings.target.system_hash}
        responses.append(response)
        labels[response.key] = dict(lab)
    write_snapshot(path, responses, labels)
    return path


def finish_release(settings: Settings, parts: Iterable[Path] = (), *, cwd: Path, plugin_version: str) -> Path | None:
    """Join the workers' parts (if any) into the release's answers file and write its manifest.
    Returns the manifest's path, or None when no release is recorded this run."""
    if not settings.release.record:
        return None
    folder = release_folder(settings.release.record, settings.release.dir)
    answers = folder / RESPONSES
    parts = list(parts)
    if parts:
        merge_export_parts(answers, parts)
    if not answers.is_file():
        raise ConfigError(
            f"release {settings.release.record!r}: no answer of the target was used this run; nothing recorded"
        )
    layer = SnapshotLayer()
    layer.add(answers)
    domains = domain_hashes(
        (str(lab["domain"]) for lab in layer.labels.values() if lab.get("domain")),
        settings.domains.paths,
        benchmarks=settings.domains,
    )
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    target = settings.target.alias if settings.target is not None else None
    tags = Counter(r.fingerprint for k, r in layer.responses.items() if layer.labels.get(k, {}).get("alias") == target)
    tags.pop(None, None)  # answers collected before fingerprints, or with them off
    body = manifest(
        settings,
        name=settings.release.record or "",
        responses=answers,
        count=len(layer.responses),
        domains=domains,
        created=created,
        plugin_version=plugin_version,
        commit=git_commit(cwd),
        fingerprint=tags.most_common(1)[0][0] if tags else None,
    )
    path = folder / MANIFEST
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return path
