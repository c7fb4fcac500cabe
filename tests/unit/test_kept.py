"""IdentityCache: values by a key and objects' identities, bounded, safe to share between threads."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from pytest_llmbias.store.kept import IdentityCache, drop_oldest


class _Thing:
    """An object that is equal to any other, so only identity tells two apart."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Thing)

    __hash__ = object.__hash__


def test_a_value_is_served_for_the_same_key_and_objects() -> None:
    cache: IdentityCache[str] = IdentityCache(4)
    params, credentials = {"temperature": 0}, {"api_key": "k"}
    key = ("m", id(params), id(credentials))
    assert cache.get(key, params, credentials) is None
    assert cache.find(key) is None
    assert cache.put(key, "merged", params, credentials) == "merged"
    assert cache.get(key, params, credentials) == "merged"
    assert cache.find(key) == (params, credentials, "merged")  # what a hot path checks where it is
    assert len(cache) == 1


def test_one_object_and_a_none_value() -> None:
    cache: IdentityCache[None] = IdentityCache(4)
    headers = {"Accept": "application/json"}
    key = ("host", 80, "/v1", id(headers))
    cache.put(key, None, headers)
    kept = cache.find(key)
    assert kept is not None and kept[0] is headers and kept[1] is None  # a value of None is a hit
    assert kept[2] is None


def test_equal_objects_that_are_not_the_same_miss() -> None:
    cache: IdentityCache[int] = IdentityCache(4)
    params = {"temperature": 0}
    cache.put(("m", id(params)), 1, params)
    assert cache.get(("m", id(params)), dict(params)) is None
    assert cache.get(("other", id(params)), params) is None
    assert cache.get(("m", id(params)), params, params) is None  # a second object the value was not kept for


def test_a_new_object_under_a_dead_ones_id_misses() -> None:
    """A key that holds the same id for two objects, as a new object can take the id of one that is
    gone: only ``is`` tells them apart."""
    cache: IdentityCache[str] = IdentityCache(4)
    first, second = _Thing(), _Thing()
    key = ("k", 12345)
    cache.put(key, "first's", first)
    assert cache.get(key, first) == "first's"
    assert cache.get(key, second) is None
    cache.put(key, "second's", second)  # the same key: it takes the entry's place
    assert cache.get(key, second) == "second's"
    assert cache.get(key, first) is None
    assert len(cache) == 1


def test_an_entry_keeps_its_objects_alive() -> None:
    cache: IdentityCache[int] = IdentityCache(4)
    thing = _Thing()
    alive = weakref.ref(thing)
    cache.put(("k", id(thing)), 1, thing)
    del thing
    gc.collect()
    assert alive() is not None  # so no other object can take its id while the entry is kept
    cache.clear()
    gc.collect()
    assert alive() is None


def _key(thing: object) -> tuple[str, int]:
    return ("k", id(thing))


def test_when_full_every_value_is_forgotten() -> None:
    cache: IdentityCache[int] = IdentityCache(2)
    objects = [_Thing() for _ in range(3)]
    cache.put(_key(objects[0]), 0, objects[0])
    cache.put(_key(objects[1]), 1, objects[1])
    assert len(cache) == 2
    cache.put(_key(objects[2]), 2, objects[2])
    assert len(cache) == 1
    assert [cache.get(_key(o), o) for o in objects] == [None, None, 2]


def test_when_full_oldest_first_forgets_the_oldest_value_only() -> None:
    cache: IdentityCache[int] = IdentityCache(2, oldest_first=True)
    objects = [_Thing() for _ in range(4)]
    for value, thing in enumerate(objects[:3]):
        cache.put(_key(thing), value, thing)
    assert len(cache) == 2
    assert [cache.get(_key(o), o) for o in objects[:3]] == [None, 1, 2]
    cache.put(_key(objects[3]), 3, objects[3])
    assert [cache.get(_key(o), o) for o in objects] == [None, None, 2, 3]


def test_an_eviction_another_thread_made_first_is_no_error() -> None:
    class Raced(dict):  # type: ignore[type-arg]
        def pop(self, *args: object) -> object:
            raise KeyError(args[0])

    cache: IdentityCache[int] = IdentityCache(1, oldest_first=True)
    cache._entries = Raced()
    first, second = _Thing(), _Thing()
    cache.put(_key(first), 1, first)
    cache.put(_key(second), 2, second)  # the oldest already gone: the new value is kept all the same
    assert cache.get(_key(second), second) == 2
    drop_oldest({})  # nothing to drop


def test_threads_may_share_a_cache() -> None:
    caches: list[IdentityCache[int]] = [IdentityCache(8, oldest_first=True), IdentityCache(8)]
    objects = [_Thing() for _ in range(32)]
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(2000):
                cache = caches[i % 2]
                thing = objects[(i + offset) % len(objects)]
                found = cache.get(_key(thing), thing)
                assert found is None or found == id(thing)
                cache.put(_key(thing), id(thing), thing)
        except BaseException as error:  # noqa: BLE001 - reported by the test's own thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(len(cache) <= 8 for cache in caches)


def test_an_unhashable_key_and_a_bound_below_one_are_refused() -> None:
    cache: IdentityCache[int] = IdentityCache(1)
    with pytest.raises(TypeError):
        cache.get(["unhashable"], object())
    with pytest.raises(TypeError):
        cache.put(["unhashable"], 1, object())
    with pytest.raises(ValueError, match="at least one"):
        IdentityCache(0)
