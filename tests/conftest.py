"""Hooks of the project's own test run."""

from __future__ import annotations

import os

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # The workers and the model server they start share the machine's cores: torch's and BLAS's
    # thread pools of one thread each, where pools as wide as the machine would spin against each
    # other. Set before any of them is imported (the plugin imports none when it loads).
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keeps an ``xdist_group``'s tests on one pytest-xdist worker under ``--dist loadgroup`` (one
    model server, one run of the example suite): pytest-xdist tells the controller a test's group
    by a ``@group`` suffix on its node id, which pytest 9.2 no longer takes from where pytest-xdist
    3.8 writes it (pytest-xdist issue 1386), so the groups were silently spread over the workers.
    The suffix is set here where pytest reads the node id; a pytest-xdist that sets it itself is
    left alone."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # an older pytest reads the id pytest-xdist sets
        return
    for item in items:
        marks = item.iter_markers("xdist_group")
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix) and isinstance(getattr(item, "_id", None), NodeId):
            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]
