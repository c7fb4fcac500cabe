"""Fewer garbage collections while a run plans, collects and decides.

A run builds many thousands of objects that live to its end at once (every stored answer, its
call, the gates' tables). At CPython's default thresholds a collection starts every 700 new
container objects, and every 70,000 or so a full one walks every object of the process, the test
dependencies' (torch's, numpy's) included: about 0.3-0.5 s of the warm example suite's 2-3 s, for
no garbage found. While the run works (the session's plan, collection and read-back:
:meth:`~pytest_llmbias.session.BiasSession.plan`, ``ensure_collected``, ``responses`` and
``read_calls``; and the plugin's planning and verdicts), the youngest generation's threshold is
raised; the thresholds are restored as they were when it is done, so the tests themselves run under
their own.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: new container objects between two collections of the youngest generation while the run works
YOUNGEST = 100_000


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the youngest generation's threshold to :data:`YOUNGEST` for the duration (a higher
    one, or 0, which turns collection off, is left as it is), then restore every threshold."""
    before = gc.get_threshold()
    if before[0] == 0 or before[0] >= YOUNGEST:
        yield
        return
    gc.set_threshold(YOUNGEST, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
