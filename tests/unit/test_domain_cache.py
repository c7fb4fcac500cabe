"""The parsed YAML of a domain file kept between runs (pytest_llmbias.domains.parsed_cache)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from pytest_llmbias.choices import CacheMode
from pytest_llmbias.config.settings import StoreSettings
from pytest_llmbias.domains import BUILTIN_DIR, Domain, Question, load_domain, parsed_cache
from pytest_llmbias.errors import DomainError

BODY = """
name: kept
description: d
focus: f
instruction: i
title: "Kept domain"
categories:
  - id: alpha
    name: Alpha
    weight: 2.5
    questions:
      - {id: a-1, text: "First?"}
      - {id: a-2, text: {en: "Second?", es: "¿Segunda?"}, reference: "ref"}
  - id: beta
    questions:
      - {id: b-1, split: {en: ["Is A better than B?", "Is B better than A?"]}}
"""


def write(directory: Path, body: str = BODY, name: str = "kept") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    return path


def question(domain: Domain, qid: str) -> Question:
    return next(q for q in domain.questions if q.id == qid)


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.json")) if cache.exists() else []


def test_a_hit_gives_the_same_domain_without_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, cache = write(tmp_path / "domains"), tmp_path / "store" / "domains"
    (tmp_path / "store").mkdir()  # a store a run has made
    fresh = load_domain(path)
    first = load_domain(path, cache=cache)
    assert first == fresh
    [entry] = entries(cache)
    assert entry.name == parsed_cache.entry_path(cache, path.read_bytes()).name

    import pytest_llmbias.config.yamlutil as yamlutil

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a kept parse must not be parsed again")

    monkeypatch.setattr(yamlutil, "load_yaml_text", refuse)
    again = load_domain("kept", [tmp_path / "domains"], cache=cache)
    assert again == fresh
    assert again.categories[0].weight == 2.5 and question(again, "a-2").texts["es"] == "¿Segunda?"


def test_a_changed_file_misses(tmp_path: Path) -> None:
    path, cache = write(tmp_path / "domains"), tmp_path / "cache"
    load_domain(path, cache=cache)
    stat = path.stat()
    write(tmp_path / "domains", BODY.replace("First?", "Changed?"))
    # the same size and modification time: only the bytes tell the files apart
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = load_domain(path, cache=cache)
    assert question(changed, "a-1").text == "Changed?"
    assert len(entries(cache)) == 2


@pytest.mark.parametrize(
    "damage",
    [b"", b"{not json", b"[]", b'{"format": 1}', b'{"format": 1, "data": {}, "lines": {"name": "x"}}', b"\xff\xfe"],
)
def test_a_damaged_entry_is_ignored_and_written_again(tmp_path: Path, damage: bytes) -> None:
    path, cache = write(tmp_path / "domains"), tmp_path / "cache"
    fresh = load_domain(path, cache=cache)
    [entry] = entries(cache)
    entry.write_bytes(damage)
    assert load_domain(path, cache=cache) == fresh
    assert json.loads(entry.read_text(encoding="utf-8"))["data"]["name"] == "kept"


def test_a_kept_parse_is_validated_as_the_file_is(tmp_path: Path) -> None:
    path, cache = write(tmp_path / "domains"), tmp_path / "cache"
    load_domain(path, cache=cache)
    [entry] = entries(cache)
    kept = json.loads(entry.read_text(encoding="utf-8"))
    kept["data"]["categories"][0]["questions"][0]["colour"] = "red"
    entry.write_text(json.dumps(kept), encoding="utf-8")
    with pytest.raises(DomainError, match=r"kept\.yaml: unknown key 'colour'"):
        load_domain(path, cache=cache)


def test_an_invalid_file_fails_the_same_and_is_not_kept(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    bad = write(tmp_path / "domains", BODY.replace("  - id: beta\n", "  - id: alpha\n"))
    with pytest.raises(DomainError) as plain:
        load_domain(bad)
    with pytest.raises(DomainError) as cached:
        load_domain(bad, cache=cache)
    assert str(cached.value) == str(plain.value)
    broken = write(tmp_path / "domains", "name: kept\n  categories: [", name="kept")
    with pytest.raises(DomainError) as plain:
        load_domain(broken)
    with pytest.raises(DomainError) as cached:
        load_domain(broken, cache=cache)
    assert str(cached.value) == str(plain.value)
    misnamed = write(tmp_path / "domains", BODY, name="other")
    with pytest.raises(DomainError, match="does not match the file name"):
        load_domain(misnamed, cache=cache)
    assert entries(cache) == []


def test_data_json_would_change_is_not_kept(tmp_path: Path) -> None:
    body = BODY.replace('reference: "ref"', "reference: 2024-05-01")
    path, cache = write(tmp_path / "domains", body), tmp_path / "cache"
    domain = load_domain(path, cache=cache)
    assert entries(cache) == []
    assert domain == load_domain(path)


def test_an_unwritable_cache_is_only_slower(tmp_path: Path) -> None:
    path = write(tmp_path / "domains")
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert load_domain(path, cache=blocked / "domains") == load_domain(path)


def test_offline_and_cache_off_keep_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert StoreSettings(dir=store).domain_cache == store / "domains"
    assert StoreSettings(dir=store, cache=CacheMode.REFRESH).domain_cache == store / "domains"
    assert StoreSettings(dir=store, offline=True).domain_cache is None
    assert StoreSettings(dir=store, cache=CacheMode.OFF).domain_cache is None
    load_domain(write(tmp_path / "domains"), cache=StoreSettings(dir=store, offline=True).domain_cache)
    assert not store.exists()


SNIPPETS = [
    "a: 1\nb: 1.5\nc: yes\nd: ~\ne: 2024-01-01\nf: 0x1f\ng: 1_000\nh: 1:30\ni: .inf\n",
    "<<: {a: 1}\nb: 2\n",
    "a: !!set {x}\nb: !!omap [{x: 1}]\nc: !!binary aGVsbG8=\nd: !!str 123\ne: !!int '7'\n",
    "? [a, b]\n: c\n",
    "a: !foo bar\n",
    "a: !!python/object:os.system x\n",
    "1: x\ntrue: y\n? a\n",
    "- !!map {a: [1, 'two', {b: null}]}\n- !!seq [1]\n- 'multi\n  line'\n",
]


#: the built-in domains without an "&" (with one, the loader's own construction is used)
TREES = {p.stem: t for p in sorted(BUILTIN_DIR.glob("*.yaml")) if "&" not in (t := p.read_text(encoding="utf-8"))}


@pytest.mark.parametrize(
    "text", [*SNIPPETS, *TREES.values()], ids=[*(f"snippet{i}" for i in range(len(SNIPPETS))), *TREES]
)
def test_yaml_without_anchors_is_built_as_pyyaml_builds_it(text: str) -> None:
    import yaml

    from pytest_llmbias.config.yamlutil import _construct_tree, _safe_loader

    def built(fast: bool) -> tuple[str, str]:
        loader = _safe_loader(yaml)(text)
        try:
            node = loader.get_single_node()
            data = _construct_tree(loader, node) if fast else loader.construct_document(node)
            return "data", repr(data)
        except yaml.YAMLError as exc:
            return "error", str(exc)
        finally:
            loader.dispose()

    assert built(True) == built(False)


def test_a_store_no_run_has_made_is_not_made_for_the_cache(tmp_path: Path) -> None:
    # planning, a usage error or --collect-only in a fresh project write nothing
    path, cache = write(tmp_path / "domains"), tmp_path / ".llmbias" / "domains"
    assert load_domain(path, cache=cache) == load_domain(path)
    assert not (tmp_path / ".llmbias").exists()


def test_the_line_map_is_decoded_only_when_an_error_reads_it(tmp_path: Path) -> None:
    path, cache = write(tmp_path / "domains"), tmp_path / "cache"
    load_domain(path, cache=cache)
    [entry] = entries(cache)
    kept = json.loads(entry.read_text(encoding="utf-8"))
    lines = json.loads(kept["lines"])  # one JSON string in the entry
    assert lines["categories[1].id"] == 13
    read = parsed_cache.read_entry(entry, lambda: pytest.fail("a kept line map that decodes is not parsed again"))
    assert read is not None and read[1].get("categories[1].id") == 13 and dict(read[1]) == lines
    # a line map that does not decode is the file's, parsed again: the error still names the line
    kept["lines"] = "{not json"
    kept["data"]["categories"][1]["id"] = "alpha"
    entry.write_text(json.dumps(kept), encoding="utf-8")
    with pytest.raises(DomainError, match=r"kept\.yaml:13: duplicate category id 'alpha'"):
        load_domain(path, cache=cache)


def test_the_common_question_is_the_one_the_full_check_builds(tmp_path: Path) -> None:
    import dataclasses

    path = write(tmp_path / "domains", BODY.replace('{id: a-1, text: "First?"}', '{id: " a-1 ", text: " First? "}'))
    first = question(load_domain(path), "a-1")
    built = Question(id="a-1", text="First?", category="alpha")
    assert first == built and hash(first) == hash(built) and repr(first) == repr(built)
    assert first.to_dict() == built.to_dict() and first.texts == {} and first.unit == "a-1"
    assert dataclasses.replace(first, text="Other?") == dataclasses.replace(built, text="Other?")
    for body, message in [
        (BODY.replace('text: "First?"', 'text: "  "'), "question 'a-1' needs a non-empty 'text'"),
        (BODY.replace("{id: a-2,", "{id: a-1,"), "duplicate question id 'a-1'"),
    ]:
        with pytest.raises(DomainError, match=message):
            load_domain(write(tmp_path / "domains", body))


def _tags(node: object) -> object:
    value = node.value  # type: ignore[attr-defined]
    if isinstance(value, list):
        value = [tuple(map(_tags, v)) if isinstance(v, tuple) else _tags(v) for v in value]
    return (type(node).__name__, node.tag, value)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        *SNIPPETS,
        "a:\nb: ''\nc: =\nd: ~\ne: Yes\nf: '1'\ng: [0o7, 12:30, 2001-12-14]\n",
        "[1, y, n, '', ~, null, +1, -.5, 1e3]\n",
        *TREES.values(),
    ],
    ids=[*(f"snippet{i}" for i in range(len(SNIPPETS) + 2)), *TREES],
)
def test_the_lean_composer_gives_every_node_the_tag_pyyaml_gives(text: str) -> None:
    import yaml

    from pytest_llmbias.config.yamlutil import _lean_loader, _safe_loader

    def composed(loader_class: type) -> object:
        loader = loader_class(text)
        try:
            return _tags(loader.get_single_node())
        except yaml.YAMLError as exc:
            return str(exc)
        finally:
            loader.dispose()

    base = _safe_loader(yaml)
    assert _lean_loader(base) is not base and _lean_loader(base) is _lean_loader(base)
    assert composed(_lean_loader(base)) == composed(base)


def test_a_loader_with_a_path_resolver_is_used_as_it_is() -> None:
    import yaml

    from pytest_llmbias.config.yamlutil import _lean_loader

    class Pathed(yaml.SafeLoader):
        pass

    Pathed.add_path_resolver("!pathed", ["a"], str)  # on this class alone
    assert _lean_loader(Pathed) is Pathed
    assert _lean_loader(yaml.SafeLoader) is not yaml.SafeLoader


def test_a_parse_read_before_the_run_made_its_store_is_kept_at_the_runs_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first run in a fresh project plans before its store exists, then makes it
    path, cache = write(tmp_path / "domains"), tmp_path / "store" / "domains"
    fresh = load_domain(path, cache=cache)
    parsed_cache.write_pending()  # a run that made no store (planning alone, --collect-only)
    assert not (tmp_path / "store").exists()
    load_domain(path, cache=cache)
    (tmp_path / "store").mkdir()  # the run's collection made it
    parsed_cache.write_pending()
    [entry] = entries(cache)
    assert entry.name == parsed_cache.entry_path(cache, path.read_bytes()).name
    parsed_cache.write_pending()  # each kept parse is written once
    import pytest_llmbias.config.yamlutil as yamlutil

    monkeypatch.setattr(yamlutil, "load_yaml_text", lambda *a, **k: pytest.fail("the next run parses nothing"))
    assert load_domain(path, cache=cache) == fresh
