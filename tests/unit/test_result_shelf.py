"""Resamplings kept between runs: the shelf's folder (store/result_shelf.py) and what the
statistics keep on it (stats/shelf.py, stats/resampling.py)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_llmbias.config.settings import Settings, StoreSettings
from pytest_llmbias.session import BiasSession
from pytest_llmbias.stats import resampling, shelf
from pytest_llmbias.stats.resampling import bootstrap_impact_ratio, group_effect_test, permutation_null
from pytest_llmbias.store.result_shelf import ResultShelf

VALUES = [0.1, 0.4, 0.35, 0.8, 0.75, 0.2, 0.9, 0.55, 0.6, 0.3, 0.45, 0.7] * 3
GROUPS = ["a", "b", "c"] * 12


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[ResultShelf]:
    """A shelf in ``tmp_path``, the statistics' in-process results forgotten before and after."""
    on = ResultShelf(tmp_path / "resampled")
    resampling._KEPT.clear()
    before = shelf.keep_between_runs(on)
    yield on
    shelf.keep_between_runs(before)
    resampling._KEPT.clear()


def each_result() -> tuple:
    return (
        bootstrap_impact_ratio(VALUES, GROUPS, resamples=300, seed=3),
        permutation_null(VALUES, GROUPS, permutations=300, seed=3),
        group_effect_test(VALUES, GROUPS, permutations=300, seed=3),
    )


def fresh() -> tuple:
    """The results computed in this process alone (no shelf, nothing kept)."""
    resampling._KEPT.clear()
    before = shelf.keep_between_runs(None)
    try:
        return each_result()
    finally:
        shelf.keep_between_runs(before)
        resampling._KEPT.clear()


def test_a_later_run_reads_what_an_earlier_one_kept(kept: ResultShelf) -> None:
    first = each_result()
    files = sorted(p.name for p in kept.directory.iterdir())
    assert len(files) == 3  # the bootstrap's replicates, the permutation check, the group-effect test
    resampling._KEPT.clear()  # as a new process
    again = each_result()
    assert again == first == fresh()
    assert sorted(p.name for p in kept.directory.iterdir()) == files


def test_a_kept_result_is_what_is_read(kept: ResultShelf) -> None:
    each_result()
    # the permutation check's file, written over with another (valid) result: the next run reads it
    (name,) = [p.name for p in kept.directory.iterdir() if b"NullCheck" in p.read_bytes()]
    original = resampling._unshelve(kept.get(name))
    altered = dataclasses.replace(original, p_value=0.123)
    kept.set(name, resampling._shelve(altered))
    resampling._KEPT.clear()
    assert permutation_null(VALUES, GROUPS, permutations=300, seed=3).p_value == 0.123


@pytest.mark.parametrize(
    "damage", [b"", b"not json\n", b'{"array": [300, 3], "dtype": "<f8"}\n1234', b'{"Nope": {}}\n']
)
def test_an_unreadable_result_is_computed_again(kept: ResultShelf, damage: bytes) -> None:
    each_result()
    for path in kept.directory.iterdir():
        path.write_bytes(damage)
    resampling._KEPT.clear()
    assert each_result() == fresh()


def test_every_input_names_its_own_result(kept: ResultShelf) -> None:
    bootstrap_impact_ratio(VALUES, GROUPS, resamples=300, seed=3)
    bootstrap_impact_ratio(VALUES, GROUPS, resamples=300, seed=4)
    bootstrap_impact_ratio(VALUES, GROUPS, resamples=301, seed=3)
    bootstrap_impact_ratio([*VALUES[:-1], 0.31], GROUPS, resamples=300, seed=3)
    bootstrap_impact_ratio(VALUES, [*GROUPS[:-1], "d"], resamples=300, seed=3)
    assert len(list(kept.directory.iterdir())) == 5


def test_shelved_arrays_and_results_round_trip() -> None:
    array = np.arange(12, dtype=float).reshape(4, 3) / 7
    back = resampling._unshelve(resampling._shelve(array))
    assert back.dtype == np.float64 and np.array_equal(back, array) and not back.flags.writeable
    for result in fresh()[1:]:
        assert resampling._unshelve(resampling._shelve(result)) == result


def test_shelf_keeps_the_most_recently_used(tmp_path: Path) -> None:
    on = ResultShelf(tmp_path / "kept")
    names = [f"{i:064x}" for i in range(6)]
    for i, name in enumerate(names):
        on.set(name, bytes([i]))
        os.utime(on.directory / name, (1000 + i, 1000 + i))
    assert on.get(names[0]) == b"\x00"  # read now: the most recent use
    (on.directory / ".part-left-by-a-crash").write_bytes(b"x")
    os.utime(on.directory / ".part-left-by-a-crash", (1000, 1000))
    assert on.prune(keep=3) == 4
    assert sorted(p.name for p in on.directory.iterdir()) == sorted([names[0], names[4], names[5]])
    assert on.get(names[1]) is None
    with pytest.raises(ValueError, match="64 hex digits"):
        on.get("../escape")


def test_shelf_that_cannot_be_written_keeps_nothing(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    on = ResultShelf(blocked / "resampled")
    on.set("0" * 64, b"value")  # no error: the result is computed again next time
    assert on.get("0" * 64) is None
    assert on.prune() == 0


def test_a_session_keeps_resamplings_in_its_store_and_gives_the_shelf_back(tmp_path: Path) -> None:
    before = shelf.current()
    session = BiasSession(Settings(store=StoreSettings(dir=tmp_path / "store")))
    on = shelf.current()
    assert isinstance(on, ResultShelf) and on.directory == tmp_path / "store" / "resampled"
    session.close()
    assert shelf.current() is before
    off = BiasSession(Settings(store=StoreSettings(dir=tmp_path / "off", cache="off")))
    assert shelf.current() is before
    off.close()
    assert not (tmp_path / "off").exists() and not (tmp_path / "store").exists()  # nothing written unasked


def test_a_designs_units_needed_are_kept_between_runs(kept: ResultShelf) -> None:
    """The units an unsized design needs (a search over its expected power) are kept on the shelf
    like a resampling: read back in a later process, the same figure; a kept figure is what is
    read; an unreadable or impossible one is worked out again; a sized design keeps its None."""
    from pytest_llmbias.stats import design as designs

    def unsized(items: int, margin: float = 1.0) -> designs.Design:
        se = 1.5 / items**0.5
        return designs.Design.of(
            margin=margin, se=se, se_like=se, df=items - 1, level=0.05 / 7, power=0.8, two_sided=False
        )

    before = shelf.keep_between_runs(None)
    try:
        designs._units_needed.cache_clear()
        alone = unsized(15).units_needed(15)
    finally:
        shelf.keep_between_runs(before)
    designs._units_needed.cache_clear()
    assert alone is not None and alone > 15 and unsized(15).units_needed(15) == alone
    (entry,) = kept.directory.iterdir()
    designs._units_needed.cache_clear()  # as a new process
    assert unsized(15).units_needed(15) == alone
    for raw, read in ((b"4000", 4000), (b"3", alone), (b"not json", alone), (b"0", None)):
        entry.write_bytes(raw)
        designs._units_needed.cache_clear()
        assert unsized(15).units_needed(15) == read, raw
    sized = unsized(400, margin=2.0)
    assert sized.sized and sized.units_needed(400) is None
    designs._units_needed.cache_clear()
