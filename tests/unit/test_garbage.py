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


def test_a_session_plans_and_reads_back_under_fewer_collections(thresholds, tmp_path) -> None:
    """The session's own plan and read-back (code that uses the session without the plugin, as
    the per-call benchmark does) run under the raised threshold too, as its collection does: no
    collection of the youngest generation starts while they build thousands of objects, where
    as many objects built outside start several."""
    from pytest_llmbias.config.settings import CollectionSettings, ModelSpec, Settings, StoreSettings
    from pytest_llmbias.planning.request import ResponseRequest, plan_calls
    from pytest_llmbias.session import BiasSession
    from pytest_llmbias.store.calls import Response

    models = [ModelSpec(f"openai/m{i}", f"m{i}") for i in range(4)]
    settings = Settings(
        target=models[0],
        baselines=tuple(models[1:]),
        store=StoreSettings(dir=tmp_path / "store"),
        collection=CollectionSettings(fingerprint=False),
    )
    session = BiasSession(settings)
    request = ResponseRequest("us_politics", samples=5)
    session.domain("us_politics")
    session.domain("china_sensitive")
    started: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.set_threshold(700, 10, 10)
    gc.callbacks.append(count)
    try:
        gc.collect()  # counts from zero
        started.clear()
        control = plan_calls(ResponseRequest("china_sensitive", samples=5), settings, session.domain("china_sensitive"))
        alone = len(started)
        assert len(control) >= 500 and alone >= 5  # planned outside: several collections
        gc.collect()
        started.clear()
        planned = session.plan(request)
        # at most the one the restored threshold starts at once on leaving
        assert len(planned) >= len(control) and len(started) <= 1
        for item in planned:
            session.store.put(Response(call=item.call, text="stored"))
        session.ensure_collected()
        gc.collect()
        started.clear()
        assert len(session.responses(request).responses) == len(planned) and len(started) <= 1
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.callbacks.remove(count)
        session.close()


def test_the_runs_end_lets_go_of_its_calls_and_grids(tmp_path) -> None:
    """Closing the run's session (the plugin's end of the run) lets go of the calls and request
    grids the process kept for it, so that pytest's full collections at exit do not walk them; a
    call built again is a new object with the same key."""
    import weakref

    from pytest_llmbias.config.settings import CollectionSettings, ModelSpec, Settings, StoreSettings
    from pytest_llmbias.planning import request as requests
    from pytest_llmbias.plugin.core_session import close_session
    from pytest_llmbias.session import BiasSession
    from pytest_llmbias.store.calls import ModelCall, built_call

    models = [ModelSpec(f"openai/m{i}", f"m{i}") for i in range(2)]
    settings = Settings(
        target=models[0],
        baselines=(models[1],),
        store=StoreSettings(dir=tmp_path / "store"),
        collection=CollectionSettings(fingerprint=False),
    )
    session = BiasSession(settings)
    request = requests.ResponseRequest("us_politics")
    planned = session.plan(request)
    call = planned[0].call
    assert built_call(call.key) is call and requests.grid(request, settings, session.domain("us_politics"))
    kept = weakref.ref(call)
    close_session(session)
    assert built_call(call.key) is None and len(requests._GRIDS) == 0
    from pytest_llmbias.domains import parsed_cache

    assert parsed_cache._PENDING == {}  # what was parsed before the store was made: written, or forgotten
    again = ModelCall.build(models[0], call.messages[-1][1], settings.generation)
    assert again is not call and again == call and again.key == call.key
    del session, planned, call
    gc.collect()
    assert kept() is None
