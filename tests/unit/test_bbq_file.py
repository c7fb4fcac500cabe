"""Reading BBQ's published data: a file, a folder of per-category files, or ``hf:NAME`` (offline
here: a clear error); every record checked, the first bad line named; a stratified, seeded subset."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pytest_llmbias.domains.bbq_file import load_bbq, stratified
from pytest_llmbias.errors import DomainError

ITEMS = [json.loads(line) for line in (Path(__file__).parent / "data" / "bbq_items.jsonl").read_text().splitlines()]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """BBQ's layout: one JSONL file per category."""
    data = tmp_path / "data"
    data.mkdir()
    for category in {i["category"] for i in ITEMS}:
        lines = [json.dumps(i) for i in ITEMS if i["category"] == category]
        (data / f"{category}.jsonl").write_text("\n".join(lines) + "\n")
    return data


def many(n_per_cell: int) -> list[dict]:
    """The fixture's Age and Gender items repeated with new ids: n_per_cell items in each cell."""
    out = []
    for template in [i for i in ITEMS if i["category"] in ("Age", "Gender_identity")]:
        for k in range(n_per_cell):
            out.append(dict(template, example_id=template["example_id"] * 1000 + k))
    return out


def test_a_folder_a_file_and_the_categories_asked_for(folder):
    data = load_bbq(folder)
    assert len(data.items) == len(ITEMS) and data.notices == ()
    assert data.known_categories == ("Age", "Gender_identity", "Nationality", "Race_x_SES", "Race_x_gender")
    age = load_bbq(folder / "Age.jsonl")
    assert [i["example_id"] for i in age.items] == [0, 1, 2, 3]
    two = load_bbq(folder, categories=["Age", "Nationality"])
    assert {i["category"] for i in two.items} == {"Age", "Nationality"} and len(two.items) == 8


def test_the_subset_is_stratified_seeded_and_the_same_every_time(tmp_path):
    items = many(25)  # 8 cells of 25
    kept = stratified(items, 40, seed=3)
    cells = Counter((i["category"], i["context_condition"], i["question_polarity"]) for i in kept)
    assert len(kept) == 40 and set(cells.values()) == {5}
    assert kept == stratified(list(reversed(items)), 40, seed=3)  # the order of the source does not matter
    assert kept != stratified(items, 40, seed=4)
    odd = stratified(items, 42, seed=3)
    assert (
        len(odd) == 42
        and sorted(Counter((i["category"], i["context_condition"], i["question_polarity"]) for i in odd).values())
        == [5] * 6 + [6] * 2
    )
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(json.dumps(i) for i in items))
    assert list(load_bbq(path, limit=40, seed=3).items) == kept


def test_a_limit_above_the_data_keeps_everything_and_says_so(folder):
    data = load_bbq(folder, categories=["Age"], limit=100)
    assert len(data.items) == 4 and "limit 100 is more than the 4 items asked for" in data.notices[0]


def test_bad_sources_are_named(folder, tmp_path, monkeypatch):
    with pytest.raises(DomainError, match="no such BBQ file or folder"):
        load_bbq(tmp_path / "nowhere")
    with pytest.raises(DomainError, match="no .jsonl file"):
        load_bbq(tmp_path)
    with pytest.raises(DomainError, match=r"no BBQ category 'Height'; it holds Age, Gender_identity"):
        load_bbq(folder, categories=["Height"])
    bad = folder / "Age.jsonl"
    lines = bad.read_text().splitlines()
    bad.write_text("\n".join([lines[0], "{not json", *lines[1:]]))
    with pytest.raises(DomainError, match=r"Age\.jsonl:2: not a JSON line"):
        load_bbq(folder)
    record = {k: v for k, v in json.loads(lines[0]).items() if k != "answer_info"}
    bad.write_text("\n".join([lines[0], lines[1], json.dumps(record)]))
    with pytest.raises(DomainError, match=r"Age\.jsonl:3: a BBQ record needs answer_info"):
        load_bbq(folder)
    with pytest.raises(DomainError, match="limit must be at least 1"):
        load_bbq(folder / "Nationality.jsonl", limit=0)


def test_a_hugging_face_dataset_offline_without_a_local_copy_is_a_clear_error(offline_hub):
    with pytest.raises(DomainError, match=r"hf:pytest-llmbias/no-such-bbq cannot be loaded .*give a local copy"):
        load_bbq("hf:pytest-llmbias/no-such-bbq")
