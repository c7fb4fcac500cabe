"""How the plugin's own errors reach the user: as their message alone, never as the frames beneath
it, in whichever hook they are raised (:func:`shown`).

An error the plugin raises on purpose (a :class:`~pytest_llmbias.errors.LLMBiasError`) says what is
wrong and what to do; the frames under it say nothing more to the user. Where it is raised decides
how it reads:

- ``"session"`` (pytest_configure, collection, the run's header): one ``ERROR: pytest-llmbias: ...``
  line and exit code 4, as a usage error; in a pytest-xdist worker the plugin hands it to the
  controller (see :mod:`pytest_llmbias.plugin`).
- ``"test"`` (setup, call, teardown, the fixtures): the test errors or fails with the message as its
  report, ``<error class>: <message>`` (a gate's warning made an error by ``-W error`` too).
- ``"finish"`` (the terminal summary, the end of the session, unconfigure): the tests have run, so
  nothing may be raised; the message is printed as an ``ERROR: pytest-llmbias: ...`` line and a run
  that had passed exits with 4. A pytest-xdist worker hands it to the controller, which prints it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Literal

import pytest

from pytest_llmbias.errors import LLMBiasError, LLMBiasWarning  # standard library only

#: where an error is raised (see the module docstring)
Stage = Literal["session", "test", "finish"]
#: the key under which a pytest-xdist worker hands its end-of-run errors to the controller
WORKER_KEY = "llmbias_errors"
PREFIX = "pytest-llmbias"


@contextlib.contextmanager
def shown(
    stage: Stage, *, where: str = "", config: pytest.Config | None = None, session: pytest.Session | None = None
) -> Iterator[None]:
    """Run the block; an :class:`LLMBiasError` raised in it reaches the user as its message alone,
    as ``stage`` says (the module docstring); ``where`` (a test's node id, a hook's name) goes
    before the message. In a test, a ``pytest.UsageError`` is its failure too, and so is an
    :class:`LLMBiasWarning` that ``-W error`` turned into an exception. ``"finish"``
    needs ``config``, and ``session`` to set the exit code. Any other exception passes through: it
    is a bug, and its frames are what a report of it needs."""
    caught: tuple[type[BaseException], ...] = (
        (LLMBiasError, LLMBiasWarning, pytest.UsageError) if stage == "test" else (LLMBiasError,)
    )
    try:
        yield
    except caught as exc:
        if stage == "session":
            raise pytest.UsageError(f"{PREFIX}: {_at(where)}{exc}") from None
        if stage == "test":
            text = str(exc) if isinstance(exc, pytest.UsageError) else f"{type(exc).__name__}: {exc}"
            raise pytest.fail.Exception(f"{_at(where)}{text}", pytrace=False) from None
        assert config is not None, "the finish stage needs the config"
        report_late(config, session, f"{PREFIX}: {_at(where)}{exc}")


def report_late(config: pytest.Config, session: pytest.Session | None, message: str) -> None:
    """Show ``message`` (an error found once the tests have run) as an ``ERROR:`` line, and turn a
    passing exit code into 4; in a pytest-xdist worker, hand it to the controller instead (its
    :func:`take_worker_errors` shows it)."""
    output = getattr(config, "workeroutput", None)
    if output is not None:
        output.setdefault(WORKER_KEY, []).append(message)
        return
    writer = config.get_terminal_writer()
    if writer.width_of_current_line:  # say, the progress line's [100%]
        writer.line()
    writer.line(f"ERROR: {message}", red=True)
    if session is not None and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def take_worker_errors(workeroutput: dict[str, Any]) -> list[str]:
    """The end-of-run errors a finished pytest-xdist worker handed over (see :func:`report_late`)."""
    return [str(m) for m in workeroutput.get(WORKER_KEY, ())]


def _at(where: str) -> str:
    return f"{where}: " if where else ""
