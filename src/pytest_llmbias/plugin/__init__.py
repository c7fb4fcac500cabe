"""pytest glue: options, ini keys, markers, fixtures and hooks. Everything else is in the core.
What the run records for its reports is in :mod:`~pytest_llmbias.plugin.reporting`, what it shows
on the terminal in :mod:`~pytest_llmbias.plugin.screen`, the plan made at collection in
:mod:`~pytest_llmbias.plugin.collection_plan`, the core's settings and session as the plugin opens
them in :mod:`~pytest_llmbias.plugin.core_session`.

Loading this module imports only the standard library and pytest. The core (and litellm, diskcache,
numpy...) is imported the first time a collected test carries one of the plugin's markers or asks
for one of its fixtures: a project that uses neither pays nothing, writes nothing, calls nothing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmbias.errors import LLMBiasWarning  # standard library only
from pytest_llmbias.plugin.failures import shown  # pytest only
from pytest_llmbias.plugin.reporting import ROW, SECTION, RunReports  # pytest only
from pytest_llmbias.plugin.screen import RunTerminal  # pytest only

if TYPE_CHECKING:
    from pytest_llmbias.catalog import MarkerRegistry
    from pytest_llmbias.session import BiasSession

_session_key = pytest.StashKey["_Plugin"]()
SPEC_KEY = pytest.StashKey[dict]()
#: marker name -> the release its ``against=`` names (None: the run's)
AGAINST_KEY = pytest.StashKey[dict]()
#: marker name -> its gate as the run decides it (against the anchor release as well, with --llmbias-anchor)
GATE_KEY = pytest.StashKey[dict]()
_result_key = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_llmbias.config.option_table import OPTIONS  # standard library only

    group = parser.getgroup("llmbias", "bias regression tests of LLMs (pytest-llmbias)")
    for option in OPTIONS:
        group.addoption(option.flag, **option.argparse_kwargs())
        parser.addini(option.ini, option.ini_help, type=option.ini_type, default=option.ini_default)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_llmbias import hookspecs  # pytest only

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_llmbias.catalog import MarkerRegistry  # standard library only

    registry = MarkerRegistry()
    try:
        with shown("session", where="pytest_llmbias_add_gates"):
            config.hook.pytest_llmbias_add_gates(registry=registry, config=config)
    except ValueError as exc:
        raise pytest.UsageError(f"pytest-llmbias: pytest_llmbias_add_gates: {exc}") from None
    for doc in registry.docs:
        config.addinivalue_line("markers", doc.line)
    plugin = _Plugin(config, registry)
    config.stash[_session_key] = plugin
    config.pluginmanager.register(plugin, "llmbias-session")
    config.pluginmanager.register(plugin.terminal, "llmbias-terminal")
    config.pluginmanager.register(plugin.reports, "llmbias-reports")
    config.pluginmanager.import_plugin("pytest_llmbias.fixtures")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(_session_key, None)
    if plugin is not None:
        with shown("finish", config=config):
            plugin.close()
        # the run is over: what the closed session holds (every call, answer and question) is let
        # go before pytest's full garbage collections at exit, which would walk it twice
        plugin._session = None


def plugin_of(config: pytest.Config) -> _Plugin:
    return config.stash[_session_key]


class _Plugin:
    """Per-run state; creates the core session only when a marker or fixture needs it."""

    def __init__(self, config: pytest.Config, registry: MarkerRegistry) -> None:
        self.config = config
        self.registry = registry
        self._session: BiasSession | None = None
        self._closed = False
        self.terminal = RunTerminal(self)
        self.reports = RunReports(self)
        self.plan_only = False  # --llmbias-plan: every test deselected, the session a success
        self.suite: Any = None  # with --llmbias-suite-alpha: the gates' shares (engine.suite_levels.SuiteShare)
        self.plans: Any = None  # each gate's planned calls, for its usage (planning.gate_usage.GatePlans)

    @property
    def worker_input(self) -> dict[str, Any]:
        """pytest-xdist's worker data (empty outside a worker). Read from the config, not the
        environment: a pytest run started from inside a worker inherits the worker's variables."""
        return getattr(self.config, "workerinput", None) or {}

    @property
    def is_worker(self) -> bool:
        return bool(self.worker_input)

    @property
    def session(self) -> BiasSession:
        if self._session is None:
            if self._closed:
                raise RuntimeError("pytest-llmbias: the run's core session is closed")
            from pytest_llmbias.plugin.core_session import open_session

            self._session = open_session(self)
        return self._session

    def _settings(self, *, check_release: bool = False) -> Any:
        """The run's settings; with ``check_release`` (before any call), also that the release to
        record can be written (at the end of the run it has been)."""
        from pytest_llmbias.plugin.core_session import run_settings

        return run_settings(self.config, check_release=check_release)

    def close(self) -> None:
        """Close the core session, if one was opened (see ``close_session``); the reports still
        read it."""
        if self._session is not None and not self._closed:
            from pytest_llmbias.plugin.core_session import close_session

            self._closed = True
            close_session(self._session)

    def marked(self, items: list[pytest.Item]) -> list[tuple[pytest.Item, str, pytest.Mark]]:
        """(item, marker name, marker) for every marker of this plugin on ``items``."""
        names = [d.name for d in self.registry.docs]
        return [(i, n, m) for i in items for n in names if (m := i.get_closest_marker(n)) is not None]

    def session_for(self, item: pytest.Item, name: str) -> Any:
        """The session as the item's marker ``name`` sees it (its ``against=`` release, if any)."""
        return self.session.against(item.stash.get(AGAINST_KEY, {}).get(name))

    def gate_marker(self, item: pytest.Item) -> str | None:
        """The name of the item's gate marker (one whose test passes or fails on a result), if any."""
        specs = item.stash.get(SPEC_KEY, None)
        return next((n for n in self.registry.gate_markers if n in specs), None) if specs else None

    # -- collection: plan every call the selected tests need ---------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        try:
            with shown("session"):
                self._plan(session.items)
        except pytest.UsageError as exc:
            if not self.is_worker:
                raise
            # Raised in a pytest-xdist worker, a usage error crashes the worker and the controller
            # shows an INTERNALERROR instead of the message. The worker runs nothing and hands the
            # message over; the controller raises it (see pytest_runtestloop).
            self.reports.record.usage_error = str(exc)
            session.shouldstop = "pytest-llmbias: usage error"

    def _plan(self, items: list[pytest.Item]) -> None:
        from pytest_llmbias.plugin.marker_use import check_marker_use

        marked = self.marked(items)
        check_marker_use(self.config, self.registry, items, marked)  # misspelt or doubled markers
        if marked:
            from pytest_llmbias.plugin.collection_plan import plan_marked

            plan_marked(self, items, marked, (SPEC_KEY, AGAINST_KEY, GATE_KEY))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.plan_only and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> bool | None:
        # a worker with a usage error runs nothing
        return True if self.reports.usage_error is not None else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        try:
            return (yield)
        finally:
            if self.reports.usage_error is not None and not self.is_worker:
                # Exit code and message exactly as without pytest-xdist.
                raise pytest.UsageError(self.reports.usage_error)

    # -- running: collect once, evaluate each gate once ---------------------------------------

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.stash.get(SPEC_KEY, None):
            with shown("test"):  # a broken store, a failed probe: its message once, not the frames under it
                self.terminal.ensure_collected()
                if self.gate_marker(item) is not None:
                    self.gate_result(item)  # missing or broken data: an error in setup, not a verdict

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        if self.gate_marker(item) is not None:
            with shown("test"):
                self._gate_outcome(item)
        return (yield)

    def _gate_outcome(self, item: pytest.Item) -> None:
        """The gate's warnings, attributed to the test, and its verdict: a failure with its report,
        or a pass with the report in a section of its own."""
        import warnings

        result = self.gate_result(item)
        path, lineno, _ = item.reportinfo()
        for message in result.warnings:
            # Attributed to the test, not to this module: the warning summary points at the gate.
            warnings.warn_explicit(
                LLMBiasWarning(f"{result.domain}: {message}"),
                LLMBiasWarning,
                filename=str(path),
                lineno=(lineno or 0) + 1,
                module=module.__name__ if (module := getattr(item, "module", None)) else None,
            )
        if not result.passed:
            pytest.fail(result.report(), pytrace=False)
        item.add_report_section("call", SECTION, result.report())

    def gate_result(self, item: pytest.Item) -> Any:
        """The item's gate result, computed once; a gate that cannot be computed fails the test."""
        if _result_key not in item.stash:
            from pytest_llmbias.report.run_record import gate_entry

            name = self.gate_marker(item)
            assert name is not None
            # with --llmbias-suite-alpha: Holm's step-down over the session's one-look gates first
            from pytest_llmbias.planning.garbage import fewer_collections

            with fewer_collections():
                spec, result = self.suite.verdict((item, name), self._evaluate)
            item.stash[SPEC_KEY][name], share = spec, self.suite.share((item, name))
            row, self.reports.record.gate_docs[item.nodeid] = gate_entry(
                item.nodeid,
                name,
                spec.domain,
                result,
                against=item.stash.get(AGAINST_KEY, {}).get(name),
                suite=share.to_dict() if share is not None else None,
                table=self._tables_wanted(),
                usage=self.plans.usage((item.nodeid, name), self.session) if self.plans is not None else None,
            )
            # JSON, so that JUnit XML shows it readably and it crosses pytest-xdist as plain text.
            item.user_properties.append((ROW, json.dumps(row, default=str)))
            item.stash[_result_key] = result
        result = item.stash[_result_key]
        if isinstance(result, Exception):
            pytest.fail(f"{type(result).__name__}: {result}", pytrace=False)
        return result

    def _tables_wanted(self) -> bool:
        """Whether the gates' per-item tables are kept for the run's JSON document or HTML page."""
        if self._session is None:
            return True
        report = self._session.settings.report
        return report.json is not None or report.html is not None

    def _evaluate(self, key: tuple[pytest.Item, str], spec: Any) -> Any:
        from pytest_llmbias.gates import evaluate_marker

        gate = key[0].stash.get(GATE_KEY, {}).get(key[1]) or self.registry.gate(key[1])
        return evaluate_marker(gate, spec, self.session_for(*key))
