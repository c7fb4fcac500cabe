"""While a run works, the youngest generation's threshold is raised; the thresholds are then
as they were, an exception or not."""

from __future__ import annotations

import gc

import pytest

from pytest_llmbias.planning.garbage import YOUNGEST, fewer_collections


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_the_threshold_is_raised_inside_and_restored_after(thresholds) -> None:
    gc.set_threshold(700, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (YOUNGEST, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("a gate that fails")
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("first", [0, YOUNGEST * 2])
def test_collection_off_or_rarer_already_is_left_as_it_is(thresholds, first: int) -> None:
    gc.set_threshold(first, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (first, 10, 10)
    assert gc.get_threshold() == (first, 10, 10)
