"""Recorded releases: what a shipped target answered, kept to compare later releases against.

A release is a folder (``bias_releases/NAME/`` by default): ``responses.jsonl``, a snapshot of the
target's answers of the run that recorded it and of the judge's ratings of them (reviewable, one
response per line, no credential), and ``manifest.json``: the format version, the name, the date,
the plugin version, the git commit, the target's model entry (its ``version`` and its system
prompt in full, since the answers' identity includes them, and the prompt by hash), the generation settings the answers
were drawn
with, the judge's and the embedding model's identities, each domain's per-question content hash,
and the count and SHA-256 of the responses file.

Comparing against a release (:func:`apply_release`) makes the release the one comparator of every
gate: a model entry like the recorded target (its alias ``release-NAME``) whose calls are served
from the record and never made — a question the record lacks is a missing answer naming the file.
Its answers are scored by the current judge and embedding model (their calls go through the store),
so two scorers' scores are never compared.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.config.app_targets import HttpApp
from pytest_llmbias.config.redaction import split_credentials
from pytest_llmbias.config.settings import DomainSettings, GenerationSettings, ModelSpec, Settings
from pytest_llmbias.domains import Domain
from pytest_llmbias.errors import ConfigError

FORMAT = 1
MANIFEST, RESPONSES = "manifest.json", "responses.jsonl"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def recorded_model(name: str, model: str) -> str:
    """The model name a release's answers are recorded under: ``release:NAME/MODEL``. Their calls
    then differ from the live target's even when its model string has not changed (the usual case:
    new weights behind the same name), so neither is ever served the other's answer."""
    return f"release:{name}/{model}"


def check_name(name: str, what: str = "a release name") -> str:
    """``name`` if it can name a release folder (letters, digits, ``.``, ``_``, ``-``; 64 at most)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"{what} must be letters, digits, '.', '_' or '-' (64 at most, not starting with "
            f"a dot or a dash), got {name!r}"
        )
    return name


def release_folder(ref: str, release_dir: Path) -> Path:
    """The folder ``ref`` names: a path when it holds a separator, else ``release_dir / ref``."""
    if "/" in ref or "\\" in ref:
        return Path(ref).expanduser().resolve()
    return Path(release_dir) / check_name(ref)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_commit(cwd: Path) -> str | None:
    """The commit checked out at ``cwd``, or None outside a git work tree (or without git)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


@dataclass(frozen=True)
class Release:
    """A recorded release: its ``name``, its folder and its manifest."""

    name: str
    path: Path
    manifest: Mapping[str, Any]

    @property
    def responses(self) -> Path:
        return self.path / RESPONSES

    @property
    def alias(self) -> str:
        return f"release-{self.name}"

    @property
    def generation(self) -> GenerationSettings:
        return GenerationSettings(**self.manifest["generation"])

    def spec(self) -> ModelSpec:
        """The recorded target as a model entry whose calls are the recorded ones (and never made)."""
        t = self.manifest["target"]
        return ModelSpec(
            model=recorded_model(self.name, t["model"]),
            alias=self.alias,
            api_base=t.get("api_base"),
            params=dict(t.get("params") or {}),
            system=t.get("system"),
            messages=tuple((r, c) for r, c in t.get("messages") or ()),
            recorded=str(self.responses),
            recorded_as=t.get("alias"),
            version=t.get("version"),
            http=HttpApp.from_dict(t["http"]) if t.get("http") else None,
            logprobs=t.get("logprobs"),
        )

    @classmethod
    def load(cls, ref: str, release_dir: Path) -> Release:
        """The release ``ref`` names. ConfigError for an unknown name (listing the recorded ones),
        a manifest that cannot be read or is of another format version, or a responses file that
        is missing or does not match the manifest's count and digest."""
        folder = release_folder(ref, release_dir)
        manifest_path = folder / MANIFEST
        if not manifest_path.is_file():
            known = [r.name for r in list_releases(release_dir)]
            raise ConfigError(
                f"no release {ref!r} recorded in {folder.parent}: recorded: {', '.join(known) or 'none'}; "
                "record one with --llmbias-record-release NAME"
            )
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"{manifest_path}: not a release manifest ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            version = manifest.get("format") if isinstance(manifest, dict) else None
            raise ConfigError(
                f"{manifest_path}: release format {version!r}, this version reads format {FORMAT}: "
                "record the release again"
            )
        missing = [k for k in ("name", "target", "generation", "responses") if k not in manifest]
        if missing:
            raise ConfigError(f"{manifest_path}: the manifest lacks {', '.join(missing)}")
        release = cls(manifest["name"], folder, manifest)
        if not release.responses.is_file():
            raise ConfigError(f"{release.responses}: the answers of release {release.name!r} are missing")
        expected = manifest["responses"]
        if file_digest(release.responses) != expected.get("sha256"):
            raise ConfigError(
                f"{release.responses} does not match {manifest_path} (its SHA-256 differs: edited "
                "or replaced since it was recorded); record the release again"
            )
        return release

    def describe(self) -> list[str]:
        """The manifest for a reader (``llmbias release show``)."""
        m = self.manifest
        t = m["target"]
        judge = m.get("judge") or {}
        lines = [
            f"release {self.name} ({self.path})",
            f"  recorded   {m.get('created', '?')} with pytest-llmbias {m.get('plugin_version', '?')}"
            + (f", commit {m['git_commit'][:12]}" if m.get("git_commit") else ""),
            f"  target     {t.get('alias')} = {t.get('model')}"
            + (f" at {t['api_base']}" if t.get("api_base") else "")
            + (f", version {t['version']}" if t.get("version") is not None else "")
            + (f", system prompt {t['system_hash']}" if t.get("system_hash") else "")
            + (f", fingerprint {t['fingerprint']}" if t.get("fingerprint") else ""),
            "  generation " + ", ".join(f"{k} {v}" for k, v in m["generation"].items()),
            f"  judge      {judge.get('model', 'none')}",
            f"  embedding  {m.get('embedding_model', '?')}",
            f"  answers    {m['responses'].get('count')} in {RESPONSES}",
        ]
        for domain, questions in (m.get("domains") or {}).items():
            lines.append(f"  domain     {domain}: {len(questions)} question(s)")
        return lines


def held_samples(responses: Path, alias: str) -> dict[str, int]:
    """Per domain, the most samples of one item that a release's answers file ``responses`` holds
    of its recorded target ``alias`` (its lines labelled with that alias; a line's ``sample`` is the
    0-based sample index, so an item asked twice holds 2). A domain without any such line is left
    out. The file is read once while its size and modification time stay the same."""
    path = Path(responses)
    try:
        stat = path.stat()
    except OSError:
        return {}
    return dict(_held_samples(str(path), alias, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=16)
def _held_samples(path: str, alias: str, mtime_ns: int, size: int) -> tuple[tuple[str, int], ...]:
    most: dict[str, int] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                record = json.loads(line)
                labels = record.get("labels") or {}
                if labels.get("alias") != alias or not labels.get("domain"):
                    continue
                domain, held = str(labels["domain"]), int(record.get("sample", 0)) + 1
                most[domain] = max(most.get(domain, 0), held)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, AttributeError):
        return ()  # an unreadable record: loading it reports why
    return tuple(sorted(most.items()))


def list_releases(release_dir: Path) -> list[Release]:
    """Every release recorded under ``release_dir`` whose manifest reads, by name."""
    out: list[Release] = []
    folder = Path(release_dir)
    if not folder.is_dir():
        return out
    for child in sorted(folder.iterdir()):
        if (child / MANIFEST).is_file():
            try:
                out.append(Release(child.name, child, json.loads((child / MANIFEST).read_text(encoding="utf-8"))))
            except (OSError, ValueError):
                continue
    return out


def apply_release(settings: Settings) -> Settings:
    """``settings`` with the release of ``release.against`` as the one comparator: it comes first
    among the baselines (the configured ones follow, for context: see
        :attr:`~pytest_llmbias.config.settings.Settings.comparators`), and its record joins the snapshots.
        Unchanged when no release is named.
        ConfigError when the release cannot be read, when it was drawn under other generation
    settings (the answers would differ for that alone), or when its alias is taken."""
    against = settings.release.against
    if not against:
        return settings
    release = Release.load(against, settings.release.dir)
    if release.generation != settings.generation:
        raise ConfigError(
            f"release {release.name!r} was recorded with generation settings {dataclasses.asdict(release.generation)}, "
            f"this run uses {dataclasses.asdict(settings.generation)}: compare under the same settings"
        )
    taken = [m.alias for m in (*settings.roster, *settings.panel)]
    if release.alias in taken:
        raise ConfigError(f"the alias {release.alias!r} of release {release.name!r} is taken by a configured model")
    store = dataclasses.replace(settings.store, snapshots=(*settings.store.snapshots, release.responses))
    return dataclasses.replace(settings, baselines=(release.spec(), *settings.baselines), store=store)


def settings_against(settings: Settings, ref: str) -> Settings:
    """``settings`` (as :func:`apply_release` left them) compared with release ``ref`` instead of
    the run's own: its release, if any, taken out of the baselines and the snapshots first. The
    errors of :func:`apply_release`."""
    base = settings
    if settings.release.against:
        current = Path(str(settings.comparators[0].recorded))  # the run's release: its answers file
        store = dataclasses.replace(
            settings.store, snapshots=tuple(p for p in settings.store.snapshots if Path(p) != current)
        )
        base = dataclasses.replace(settings, baselines=settings.context, store=store)
    return apply_release(dataclasses.replace(base, release=dataclasses.replace(base.release, against=ref)))


def domain_items(domain: Domain) -> dict[str, Any]:
    """A domain's items as a release records them: question id -> its content; ``topic:<id>`` ->
    a topic's title and perspectives."""
    items: dict[str, Any] = {q.id: q.to_dict() for q in domain.prompts}
    items.update({f"topic:{t.id}": [t.title, list(t.perspectives)] for t in domain.topics})
    return items


def shared_domain(domain: Domain, release: Release) -> tuple[Domain, str | None]:
    """``domain`` cut to the items unchanged since ``release`` was recorded, and a note saying how
    many were added, removed or edited (None when nothing changed). A comparison is paired: a
    question the release was not asked, or asked otherwise, is compared for no model."""
    recorded = (release.manifest.get("domains") or {}).get(domain.name)
    if recorded is None:
        return domain, (
            f"release {release.name!r} has no answers in domain {domain.name!r}: its questions will be "
            "missing answers of the release"
        )
    if domain.counterfactual is not None:
        return domain, None
    current = question_hashes(domain_items(domain))
    added = [q for q in current if q not in recorded]
    removed = [q for q in recorded if q not in current]
    edited = [q for q in current if q in recorded and recorded[q] != current[q]]
    if not (added or removed or edited):
        return domain, None
    keep = {q for q in current if recorded.get(q) == current[q]}
    categories = tuple(
        dataclasses.replace(c, questions=tuple(q for q in c.questions if q.id in keep)) for c in domain.categories
    )
    topics = tuple(t for t in domain.topics if f"topic:{t.id}" in keep)
    cut = dataclasses.replace(domain, categories=tuple(c for c in categories if c.questions), topics=topics)
    note = (
        f"domain {domain.name!r} changed since release {release.name!r} was recorded: {len(added)} item(s) added, "
        f"{len(removed)} removed, {len(edited)} edited; the comparison uses the {len(keep)} unchanged"
    )
    return cut, note


def domain_hashes(
    names: Iterable[str],
    paths: Sequence[Path],
    *,
    skip_broken: bool = False,
    benchmarks: DomainSettings | None = None,
    loaded: Mapping[str, Domain] | None = None,
) -> dict[str, dict[str, str]]:
    """Per domain name, its items' content hashes (:func:`domain_items`, :func:`question_hashes`;
    a public benchmark configured in ``benchmarks``, its items' :func:`~pytest_llmbias.domains.benchmarks.item_hash`).
    A domain that does not load raises, or with ``skip_broken`` is left out. ``loaded``: domains
    already loaded from the same ``paths`` (a session's, whole), not loaded again."""
    from pytest_llmbias.domains import load_domain
    from pytest_llmbias.errors import LLMBiasError

    out = {}
    for name in sorted(set(names)):
        try:
            source = benchmarks.benchmark(name) if benchmarks is not None else None
            if source is not None:
                from pytest_llmbias.domains.benchmarks import benchmark_hashes

                out[name] = benchmark_hashes(source)
                continue
            domain = (loaded or {}).get(name) or load_domain(name, paths, benchmarks)
        except LLMBiasError:
            if skip_broken:
                continue
            raise
        out[name] = question_hashes(domain_items(domain))
    return out


def question_hashes(questions: Mapping[str, Any]) -> dict[str, str]:
    """A short content hash per item (question id -> its JSON-friendly content)."""
    return {
        qid: hashlib.sha256(
            json.dumps(body, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
        ).hexdigest()[:16]
        for qid, body in questions.items()
    }


def manifest(
    settings: Settings,
    *,
    name: str,
    responses: Path,
    count: int,
    domains: Mapping[str, Mapping[str, str]],
    created: str,
    plugin_version: str,
    commit: str | None,
    fingerprint: str | None = None,
) -> dict[str, Any]:
    """The manifest of release ``name`` recorded from ``settings`` (the target's entry without any
    credential; its system prompt in full and by hash; ``fingerprint``: the one most of its
    answers were collected under, None when they carry none)."""
    target = settings.target
    assert target is not None
    entry = target.to_dict()
    entry.pop("api_key_env", None)
    entry.update(system=target.system, system_hash=target.system_hash, messages=[list(m) for m in target.messages])
    entry["params"], _ = split_credentials(dict(target.params))
    entry["fingerprint"] = fingerprint
    return {
        "format": FORMAT,
        "name": name,
        "created": created,
        "plugin_version": plugin_version,
        "git_commit": commit,
        "target": entry,
        "generation": dataclasses.asdict(settings.generation),
        "judge": None
        if settings.judge is None
        else {
            "model": settings.judge.model,
            "alias": settings.judge.alias,
            "api_base": settings.judge.to_dict()["api_base"],
            **({"version": settings.judge.version} if settings.judge.version is not None else {}),
        },
        "embedding_model": settings.embedding.model,
        "domains": {d: dict(q) for d, q in sorted(domains.items())},
        "responses": {"file": RESPONSES, "count": count, "sha256": file_digest(responses)},
    }
