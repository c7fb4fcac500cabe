"""The names a run logs under, stable across releases so that a dashboard can chart them
(docs/mlflow-and-ci.md lists every one).

A gate's metrics are ``llmbias.<test>.<figure>`` (its verdict, its calls and their cost) and
``llmbias.<test>.<method>.<figure>``: ``<test>`` the test id made a name
(:func:`test_slug`: ``tests/test_bias.py::test_china[judge]`` → ``test_bias.test_china_judge``),
``<method>`` the gate's method row (:func:`slug`: ``index (relative)`` → ``index_relative``).
Standard library only.
"""

from __future__ import annotations

import re

PREFIX = "llmbias"
#: the longest key MLflow takes for a param, metric or tag
MAX_KEY = 250

#: a gate's outcome as a number a chart can plot: passed, passed while underpowered (failed under
#: --llmbias-strict), failed, could not be computed
VERDICT_CODES = {"passed": 1.0, "underpowered": 0.5, "failed": 0.0, "error": -1.0}

#: the usage figures of the run's plan (and of each gate's ``usage``) logged as metrics, by the
#: document's key: ``llmbias.<metric>`` for the run, ``llmbias.<test>.<metric>`` for a gate
USAGE_METRICS = {
    "calls": "calls",
    "fetched": "fetched",
    "from_store": "from_store",
    "failed": "failed_calls",
    "tokens": "tokens",
    "cost_usd": "cost_usd",
}


def slug(text: str) -> str:
    """``text`` as one part of a dotted name: lower case, runs of anything but letters, digits,
    ``-`` and ``_`` made one ``_``, no ``_`` at either end (``"index (relative)"`` → ``index_relative``)."""
    out = re.sub(r"[^a-z0-9_-]+", "_", str(text).lower()).strip("_")
    return out or "_"


def test_slug(nodeid: str) -> str:
    """A test id as a dotted name: the file's path without ``.py`` and ``tests/`` and the test's
    name, joined by dots, each part :func:`slug`-ed; the same id gives the same name in every run."""
    path, _, name = nodeid.partition("::")
    parts = [p for p in re.sub(r"\.py$", "", path).split("/") if p]
    if len(parts) > 1 and parts[0] in ("tests", "test"):
        parts = parts[1:]
    return ".".join(slug(p) for p in [*parts, *name.split("::")] if p)


def key(*parts: str) -> str:
    """``llmbias.<parts...>``, cut to MLflow's longest key (its end kept: the figure's name)."""
    name = ".".join([PREFIX, *parts])
    if len(name) <= MAX_KEY:
        return name
    tail = ".".join(parts[-2:])
    return f"{name[: MAX_KEY - len(tail) - 2]}~.{tail}"
