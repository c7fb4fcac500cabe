"""The core as the plugin opens it: the run's settings from pytest's options, ini keys, files and
environment, and the :class:`~pytest_llmbias.session.BiasSession` on them.

The plugin imports this module only when a marker or fixture first needs the core (or, at the end
of the run, its settings).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmbias.plugin.failures import shown  # pytest only

if TYPE_CHECKING:
    from pytest_llmbias.session import BiasSession


def run_settings(config: pytest.Config, *, check_release: bool = False) -> Any:
    """The run's settings; with ``check_release`` (before any call), also that the release to
    record can be written (at the end of the run it has been)."""
    from pytest_llmbias.config.settings_sources import settings_from_pytest
    from pytest_llmbias.releases.record import check_recordable
    from pytest_llmbias.releases.release import apply_release

    with shown("session"):
        settings = settings_from_pytest(
            option=config.option,
            getini=config.getini,
            rootdir=config.rootpath,
            inipath=config.inipath,
            cwd=config.invocation_params.dir,
            environ=os.environ,
        )
        if check_release:
            check_recordable(settings)
        return apply_release(settings)


def open_session(plugin: Any) -> BiasSession:  # the run's plugin object (pytest_llmbias.plugin)
    """The run's core session, on settings whose release to record can be written; its progress on
    the plugin's terminal, its extensions from the ``pytest_llmbias_add_features`` and
    ``pytest_llmbias_add_models`` hooks, and in a pytest-xdist worker the worker's id and run."""
    from pytest_llmbias.session import BiasSession

    config = plugin.config
    return BiasSession(
        run_settings(config, check_release=True),
        on_progress=plugin.terminal.progress,
        worker_id=plugin.worker_input.get("workerid"),
        run_id=plugin.worker_input.get("testrunuid"),
        add_features=lambda r: config.hook.pytest_llmbias_add_features(registry=r, config=config),
        add_models=lambda r: config.hook.pytest_llmbias_add_models(registry=r, config=config),
    )


def close_session(session: BiasSession) -> None:
    """Close the run's core session, then let go of the calls and request grids the process kept
    for it (:func:`~pytest_llmbias.store.calls.release_built`,
    :func:`~pytest_llmbias.planning.request.release_grids`), even where closing failed: the tests
    have run, and pytest's two full garbage collections at exit need not walk them. The domains
    parsed before the run made its store are kept in it now
    (:func:`~pytest_llmbias.domains.parsed_cache.write_pending`): a first run in a fresh project
    makes the store, and the run after it reads them without parsing."""
    try:
        session.close()
    finally:
        from pytest_llmbias.domains.parsed_cache import write_pending
        from pytest_llmbias.planning.request import release_grids
        from pytest_llmbias.store.calls import release_built

        release_grids()
        release_built()
        write_pending()
