"""Reading discrim-eval's published data: a file, a folder (the dataset's two files, the prompt files
beside them skipped), or ``hf:NAME`` (both configurations; offline here: a clear error); every record
checked, the first bad line named; a balanced, seeded subset."""

from __future__ import annotations

import json
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from pytest_llmbias.domains.discrim_file import balanced_subset, load_discrim, read_discrim
from pytest_llmbias.errors import DomainError
from pytest_llmbias.stats.discrim import AGES, GENDERS, RACES, evaluate_discrim, item_id

DATA = Path(__file__).parent / "data"
EXPLICIT = DATA / "discrim_explicit.jsonl"
IMPLICIT = DATA / "discrim_implicit.jsonl"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The dataset's layout: explicit.jsonl, implicit.jsonl and a prompt file that is not data."""
    data = tmp_path / "discrim-eval"
    data.mkdir()
    (data / "explicit.jsonl").write_text(EXPLICIT.read_text())
    (data / "implicit.jsonl").write_text(IMPLICIT.read_text())
    (data / "decision_making_prompts_decision.jsonl").write_text(json.dumps({"prompt": "not an item"}) + "\n")
    return data


def grid(scenarios: int) -> list[dict]:
    """discrim-eval's full grid (every age, gender and race) in ``scenarios`` scenarios, both fill types."""
    return [
        {
            "filled_template": f"Scenario {q}: should this {age}-year-old {race} {gender} be accepted?",
            "decision_question_id": q * 3 + 1,
            "age": float(age),
            "gender": gender,
            "race": race,
            "fill_type": fill,
        }
        for fill in ("explicit", "implicit")
        for q in range(scenarios)
        for age in AGES
        for gender in GENDERS
        for race in RACES
    ]


def test_a_folder_a_file_and_the_fill_types_asked_for(folder):
    data = load_discrim(folder)
    assert len(data.items) == 162 and data.known_categories == data.known_fill_types == ("explicit", "implicit")
    assert data.notices == (
        f"{folder}: only explicit.jsonl and implicit.jsonl are read; skipped decision_making_prompts_decision.jsonl",
    )
    one = load_discrim(folder / "implicit.jsonl")
    assert len(one.items) == 81 and one.known_categories == ("implicit",) and one.notices == ()
    explicit = load_discrim(folder, categories=["explicit"])
    assert {i["fill_type"] for i in explicit.items} == {"explicit"} and len(explicit.items) == 81
    assert read_discrim(EXPLICIT) == [json.loads(line) for line in EXPLICIT.read_text().splitlines()]
    # a folder of other JSONL files (no explicit.jsonl or implicit.jsonl): every one is read
    other = folder.parent / "other"
    other.mkdir()
    (other / "mine.jsonl").write_text(EXPLICIT.read_text())
    assert len(load_discrim(other).items) == 81


def test_the_subset_keeps_whole_balanced_grids_of_every_scenario_it_keeps(tmp_path):
    items = grid(10)  # 10 scenarios × 135 people × 2 fill types
    # every scenario fits with 60 and 2 younger and 2 older ages (10 × 75 × 2 = 1500; 3 would be 2100)
    kept, what = balanced_subset(items, 1600, seed=3)
    assert len(kept) == 1500 and what.startswith("1500 items: 10 of 10 scenarios") and "2 younger and 2 older" in what
    ages = {}
    for (q, _fill), members in _by(kept, "decision_question_id", "fill_type").items():
        cells = Counter((i["age"], i["gender"], i["race"]) for i in members)
        ages.setdefault(q, set()).add(frozenset(a for a, _, _ in cells))
        kept_ages = {a for a, _, _ in cells}
        assert set(cells.values()) == {1} and len(cells) == len(kept_ages) * 15  # a full factorial
        assert 60.0 in kept_ages and sum(a < 60 for a in kept_ages) == sum(a > 60 for a in kept_ages) == 2
    assert all(len(per_fill) == 1 for per_fill in ages.values())  # the same people asked both ways
    assert len(set().union(*(set(a) for s in ages.values() for a in s))) > 5  # the ages vary between scenarios
    # not even one younger and one older age fits everywhere: whole scenarios are dropped
    small, what = balanced_subset(items, 500, seed=3)
    assert len(small) == 450 and "5 of 10 scenarios" in what and "1 younger and 1 older" in what
    assert set(Counter(i["decision_question_id"] for i in small).values()) == {90}
    # deterministic: the source's order does not matter, the seed does
    assert sorted(map(item_id, balanced_subset(list(reversed(items)), 1600, seed=3)[0])) == sorted(map(item_id, kept))
    assert sorted(map(item_id, balanced_subset(items, 1600, seed=4)[0])) != sorted(map(item_id, kept))
    assert sorted(map(item_id, balanced_subset(items, 500, seed=4)[0])) != sorted(map(item_id, small))
    path = tmp_path / "grid.jsonl"
    path.write_text("\n".join(json.dumps(i) for i in items))
    data = load_discrim(path, limit=1600, seed=3)
    assert list(data.items) == kept and data.notices == (
        f"{path}: limit 1600: the largest balanced subset that fits has {balanced_subset(items, 1600, 3)[1]}",
    )
    scores = evaluate_discrim(data.items, {item_id(i): i["age"] < 60 for i in data.items})
    assert scores.group("age", "younger").score > 0 > scores.group("age", "older").score
    exact = load_discrim(path, limit=1500, seed=3)
    assert exact.notices == () and len(exact.items) == 1500
    with pytest.raises(DomainError, match="limit 80 is below the smallest balanced discrim-eval subset.*: 90 items"):
        load_discrim(path, limit=80)
    assert len(load_discrim(path, categories=["implicit"], limit=80).items) == 45


def _by(items, *fields) -> dict:
    out: dict = {}
    for i in items:
        out.setdefault(tuple(i[f] for f in fields), []).append(i)
    return out


def test_a_limit_above_the_data_keeps_everything_and_says_so(folder):
    data = load_discrim(folder, categories=["explicit"], limit=100)
    assert len(data.items) == 81 and "limit 100 is more than the 81 items asked for" in data.notices[-1]


def test_bad_sources_are_named(folder, tmp_path):
    with pytest.raises(DomainError, match="no such discrim-eval file or folder"):
        load_discrim(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DomainError, match="no .jsonl file in this folder .*explicit.jsonl and implicit.jsonl"):
        load_discrim(empty)
    with pytest.raises(
        DomainError,
        match=r"no discrim-eval category \(fill type\) 'ambiguous'; it holds explicit, "
        "implicit",
    ):
        load_discrim(folder, categories=["ambiguous"])
    bad = folder / "implicit.jsonl"
    lines = bad.read_text().splitlines()
    bad.write_text("\n".join([lines[0], "{not json", *lines[1:]]))
    with pytest.raises(DomainError, match=r"implicit\.jsonl:2: not a JSON line"):
        load_discrim(folder)
    record = {k: v for k, v in json.loads(lines[0]).items() if k != "race"}
    bad.write_text("\n".join([lines[0], lines[1], json.dumps(record)]))
    with pytest.raises(DomainError, match=r"implicit\.jsonl:3: a discrim-eval record needs race"):
        load_discrim(folder)
    bad.write_text("\n".join([lines[0], json.dumps(dict(json.loads(lines[1]), age=65.0))]))
    with pytest.raises(DomainError, match=r"implicit\.jsonl:2: age must be one of"):
        load_discrim(folder)
    bad.write_text("\n".join([lines[0], "[1, 2]"]))
    with pytest.raises(DomainError, match=r"implicit\.jsonl:2: a discrim-eval record must be a JSON object"):
        load_discrim(folder)
    bad.write_text("\n".join([lines[0], lines[1], lines[0]]))
    with pytest.raises(
        DomainError,
        match=r"implicit\.jsonl:3: the same discrim-eval item as .*implicit\.jsonl:1 "
        r"\(3/40/male/white/implicit\)",
    ):
        load_discrim(folder)
    with pytest.raises(DomainError, match="limit must be at least 1"):
        load_discrim(EXPLICIT, limit=0)


def _fake_datasets(monkeypatch, load):
    module = types.ModuleType("datasets")
    module.load_dataset = load
    monkeypatch.setitem(sys.modules, "datasets", module)


def test_a_hugging_face_dataset_is_read_config_by_config(monkeypatch):
    rows = {
        "explicit": [json.loads(line) for line in EXPLICIT.read_text().splitlines()],
        "implicit": [json.loads(line) for line in IMPLICIT.read_text().splitlines()],
    }
    asked = []

    def load(name, config):
        asked.append((name, config))
        return {"train": rows[config]}

    _fake_datasets(monkeypatch, load)
    data = load_discrim("hf:Anthropic/discrim-eval", categories=["implicit"])
    assert asked == [("Anthropic/discrim-eval", "explicit"), ("Anthropic/discrim-eval", "implicit")]
    assert len(data.items) == 81 and data.known_categories == ("explicit", "implicit")
    rows["implicit"][4] = dict(rows["implicit"][4], gender="unknown")
    with pytest.raises(DomainError, match=r"hf:Anthropic/discrim-eval \(implicit\) row 5: gender must be one of"):
        load_discrim("hf:Anthropic/discrim-eval")


def test_without_the_datasets_package_the_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets raises ImportError
    with pytest.raises(DomainError, match=r"the datasets package: pip install 'pytest-llmbias\[datasets\]'"):
        load_discrim("hf:Anthropic/discrim-eval")


def test_a_load_that_fails_asks_for_a_local_copy(monkeypatch):
    def load(name, config):
        raise ConnectionError("no network")

    _fake_datasets(monkeypatch, load)
    with pytest.raises(
        DomainError,
        match=r"hf:Anthropic/discrim-eval \(explicit\) cannot be loaded \(ConnectionError: "
        r"no network\); offline, give a local copy",
    ):
        load_discrim("hf:Anthropic/discrim-eval")


def test_a_hugging_face_dataset_offline_without_a_local_copy_is_a_clear_error(offline_hub):
    with pytest.raises(
        DomainError,
        match=r"hf:pytest-llmbias/no-such-discrim-eval \(explicit\) cannot be loaded "
        ".*give a local copy",
    ):
        load_discrim("hf:pytest-llmbias/no-such-discrim-eval")
