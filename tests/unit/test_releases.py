"""Recorded releases on disk: the manifest, loading with every way a record can be wrong, the
settings of a comparison against one, and the ``llmbias release`` commands."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest

from pytest_llmbias.cli.command import main
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec, ReleaseSettings, Settings
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.releases.record import check_recordable
from pytest_llmbias.releases.release import (
    FORMAT,
    Release,
    apply_release,
    check_name,
    list_releases,
    manifest,
    recorded_model,
)
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.snapshot import write_snapshot

TARGET = ModelSpec(
    model="openai/acme-1",
    alias="acme",
    api_base="http://127.0.0.1:9/v1",
    system="Be brief.",
    params={"temperature": 0.2, "api_key": "sk-secret"},
)


def _settings(tmp_path: Path, **release) -> Settings:
    return Settings(
        target=TARGET,
        baselines=(ModelSpec(model="openai/b", alias="b"),),
        release=ReleaseSettings(dir=tmp_path / "bias_releases", **release),
    )


def _record(tmp_path: Path, name: str = "v1") -> Path:
    settings = _settings(tmp_path, record=name)
    folder = tmp_path / "bias_releases" / name
    recorded = dataclasses.replace(TARGET, model=recorded_model(name, TARGET.model))
    call = ModelCall.build(recorded, "Is tea better than coffee?", settings.generation)
    write_snapshot(
        folder / "responses.jsonl",
        [Response(call=call, text="Both are fine.")],
        {call.key: {"alias": "acme", "domain": "d", "question": "q1"}},
    )
    body = manifest(
        settings,
        name=name,
        responses=folder / "responses.jsonl",
        count=1,
        domains={"d": {"q1": "abc"}},
        created="2026-11-25T00:00:00+00:00",
        plugin_version="0.1",
        commit=None,
    )
    (folder / "manifest.json").write_text(json.dumps(body), encoding="utf-8")
    return folder


def test_a_recorded_release_loads_and_stands_in_for_its_target(tmp_path: Path) -> None:
    folder = _record(tmp_path)
    text = (folder / "manifest.json").read_text(encoding="utf-8")
    assert "sk-secret" not in text and json.loads(text)["format"] == FORMAT
    release = Release.load("v1", tmp_path / "bias_releases")
    spec = release.spec()
    assert spec.alias == "release-v1" and spec.recorded == str(folder / "responses.jsonl")
    # the calls of the recorded answers, and never the live target's (the same model string)
    call = ModelCall.build(spec, "Is tea better than coffee?", release.generation)
    recorded = [
        json.loads(line)["key"] for line in (folder / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert recorded == [call.key] and spec.model == "release:v1/openai/acme-1"
    assert call.key != ModelCall.build(TARGET, "Is tea better than coffee?", GenerationSettings()).key
    compared = apply_release(_settings(tmp_path, against="v1"))
    assert [m.alias for m in compared.comparators] == ["release-v1"] and [m.alias for m in compared.context] == ["b"]
    assert compared.store.snapshots == (folder / "responses.jsonl",)
    assert [r.name for r in list_releases(tmp_path / "bias_releases")] == ["v1"]
    assert release.describe()[0].startswith("release v1") and any(
        "system prompt" in line for line in release.describe()
    )


def test_every_way_a_record_can_be_wrong_is_named(tmp_path: Path) -> None:
    folder = _record(tmp_path)
    root = tmp_path / "bias_releases"
    with pytest.raises(ConfigError, match=r"no release 'v2' recorded in .*: recorded: v1; record one with"):
        Release.load("v2", root)
    lines = folder / "responses.jsonl"
    lines.write_text(lines.read_text(encoding="utf-8").replace("Both are fine.", "Tea."), encoding="utf-8")
    with pytest.raises(ConfigError, match="does not match .*manifest.json .*SHA-256 differs"):
        Release.load("v1", root)
    lines.unlink()
    with pytest.raises(ConfigError, match="the answers of release 'v1' are missing"):
        Release.load("v1", root)
    body = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    (folder / "manifest.json").write_text(json.dumps({**body, "format": 99}), encoding="utf-8")
    with pytest.raises(ConfigError, match="release format 99, this version reads format 1: record the release again"):
        Release.load("v1", root)
    (folder / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a release manifest"):
        Release.load("v1", root)


def test_a_comparison_needs_the_release_s_generation_and_a_free_alias(tmp_path: Path) -> None:
    _record(tmp_path)
    other = dataclasses.replace(_settings(tmp_path, against="v1"), generation=GenerationSettings(max_tokens=64))
    with pytest.raises(ConfigError, match="recorded with generation settings .*this run uses .*same settings"):
        apply_release(other)
    taken = dataclasses.replace(
        _settings(tmp_path, against="v1"), baselines=(ModelSpec(model="x", alias="release-v1"),)
    )
    with pytest.raises(ConfigError, match="the alias 'release-v1' of release 'v1' is taken"):
        apply_release(taken)
    assert apply_release(_settings(tmp_path)) == _settings(tmp_path)  # nothing named: unchanged


def test_recording_checks_the_name_and_never_overwrites_unasked(tmp_path: Path) -> None:
    _record(tmp_path)
    with pytest.raises(ConfigError, match="release 'v1' is already recorded in .*pass --llmbias-force"):
        check_recordable(_settings(tmp_path, record="v1"))
    assert check_recordable(_settings(tmp_path, record="v1", force=True)) == tmp_path / "bias_releases" / "v1"
    assert check_recordable(_settings(tmp_path)) is None
    for bad in ("../up", ".hidden", "", "a b", "x" * 65):
        with pytest.raises(ConfigError, match="letters, digits"):
            check_name(bad)
    with pytest.raises(ConfigError, match="configure a target"):
        check_recordable(dataclasses.replace(_settings(tmp_path, record="v2"), target=None))


def test_the_release_commands(tmp_path: Path) -> None:
    _record(tmp_path)
    root = str(tmp_path / "bias_releases")
    out = io.StringIO()
    assert main(["release", "list", "--dir", root], out) == 0
    assert out.getvalue().startswith("v1 ") and "openai/acme-1" in out.getvalue() and "1 answers" in out.getvalue()
    out = io.StringIO()
    assert main(["release", "show", "v1", "--dir", root], out) == 0
    assert "generation temperature 0.7" in out.getvalue() and "domain     d: 1 question(s)" in out.getvalue()
    assert main(["release", "show", "v7", "--dir", root], io.StringIO()) == 3
    out = io.StringIO()
    assert (
        main(["release", "list", "--dir", str(tmp_path / "none")], out) == 0 and "no release recorded" in out.getvalue()
    )


def test_domain_hashes_take_a_loaded_domain_as_it_is_and_load_the_rest():
    """The run history's domain hashes: a domain the session loaded is hashed as loaded (not read
    again), to the same hashes a fresh load gives; one it did not load is loaded."""
    from pytest_llmbias.domains import load_domain
    from pytest_llmbias.releases.release import domain_hashes

    fresh = domain_hashes(["us_politics", "china_sensitive"], [])
    loaded = load_domain("us_politics", [])
    assert domain_hashes(["us_politics", "china_sensitive"], [], loaded={"us_politics": loaded}) == fresh
    edited = dataclasses.replace(loaded, categories=loaded.categories[1:])
    hashes = domain_hashes(["us_politics", "china_sensitive"], [], loaded={"us_politics": edited})
    dropped = {q.id for q in loaded.categories[0].questions}
    assert dropped and hashes["us_politics"] == {k: v for k, v in fresh["us_politics"].items() if k not in dropped}
    assert hashes["china_sensitive"] == fresh["china_sensitive"]
