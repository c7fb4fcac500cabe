"""Running pytest on a ``pytester`` project in this process, where a subprocess is not what a test is
about: a subprocess pays Python's start, pytest's and the plugin's imports (about 2 s of CPU) on
every run.

``pytester.runpytest_inprocess`` forgets every module a run imported, so a run would import numpy,
scipy, torch and the plugin afresh, and numpy and torch cannot be imported twice in one process.
:func:`preload` imports them once, before the first ``pytester`` is made: modules present before
are kept. The project's own modules (its tests and conftest) are still forgotten after each run.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

#: what a run of the plugin may import; those not installed are skipped
HEAVY = (
    "numpy",
    "scipy.stats",
    "scipy.special",
    "scipy.optimize",
    "scipy.integrate",
    "scipy.spatial",
    "yaml",
    "diskcache",
    "aiohttp",
    "jinja2",
    "markdown_it",
    "textblob",
    "nltk",
    "torch",
    "transformers",
    "sentence_transformers",
    "datasets",
    "pandas",
    "pyarrow",
    "sklearn",
    "redis",
    "matplotlib",
    "matplotlib.pyplot",
    "execnet",
    "xdist",
    "xdist.looponfail",
    "xdist.remote",
)


def preload() -> None:
    """Import the plugin's modules and the heavy dependencies they reach, once per process (their
    import-time warnings, pydantic's and the like, silenced: a run shows those it causes itself)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _preload()


def _preload() -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # as the report sets it, before pyplot is imported
    except ImportError:
        pass
    for name in HEAVY:
        try:
            importlib.import_module(name)
        except Exception:  # not installed, or an optional part that fails to import: the run skips it too
            pass
    import pytest_llmbias

    for info in pkgutil.walk_packages(pytest_llmbias.__path__, "pytest_llmbias."):
        if info.name.endswith("__main__"):  # the command line itself: importing it runs it
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # an optional extra's module (redis, matplotlib) whose dependency is absent
            pass
    from pytest_llmbias.clients.litellm_import import import_litellm

    import_litellm()  # litellm as the plugin imports it: its price map from the package, not the internet


#: the inner runs need neither the cache nor hypothesis' plugin
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def run_inline(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytest *args`` on the project, in this process."""
    return pytester.runpytest_inprocess(*QUIET, *args)
