"""pytest glue: options, ini keys, markers, fixtures and hooks. Everything else is in the core.

Loading this module imports only the standard library and pytest. The core (and litellm, diskcache,
numpy...) is imported the first time a collected test carries one of the plugin's markers or asks
for one of its fixtures: a project that uses neither pays nothing, writes nothing, calls nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmbias.errors import LLMBiasWarning  # standard library only

if TYPE_CHECKING:
    from pytest_llmbias.catalog import MarkerRegistry
    from pytest_llmbias.planning.collector import Progress
    from pytest_llmbias.report.run_record import RunRecord
    from pytest_llmbias.session import BiasSession

_session_key = pytest.StashKey["_Plugin"]()
SPEC_KEY = pytest.StashKey[dict]()
#: marker name -> the release its ``against=`` names (None: the run's)
AGAINST_KEY = pytest.StashKey[dict]()
_result_key = pytest.StashKey[Any]()
_ROW = _SECTION = "llmbias"  # the user property of a gate's row; the report section of its text


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
        plugin.close()


def _line_writer(reporter: Any) -> Callable[[str], None]:
    """Writes a line to the terminal reporter, on a line of its own."""

    def write(line: str) -> None:
        reporter.ensure_newline()
        reporter.write_line(line)

    return write


def plugin_of(config: pytest.Config) -> _Plugin:
    return config.stash[_session_key]


class _Plugin:
    """Per-run state; creates the core session only when a marker or fixture needs it."""

    def __init__(self, config: pytest.Config, registry: MarkerRegistry) -> None:
        self.config = config
        self.registry = registry
        self._session: BiasSession | None = None
        self._closed = False
        self.terminal = _Terminal(self)
        self.reports = _Reports(self)
        self.plan_only = False  # --llmbias-plan: every test deselected, the session a success
        self.suite: Any = None  # with --llmbias-suite-alpha: the gates' shares (gates.suite_levels.SuiteShare)

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
            from pytest_llmbias.session import BiasSession

            self._session = BiasSession(
                self._settings(check_release=True),
                on_progress=self.terminal.progress,
                worker_id=self.worker_input.get("workerid"),
                run_id=self.worker_input.get("testrunuid"),
                add_features=lambda r: self.config.hook.pytest_llmbias_add_features(registry=r, config=self.config),
                add_models=lambda r: self.config.hook.pytest_llmbias_add_models(registry=r, config=self.config),
            )
        return self._session

    def _settings(self, *, check_release: bool = False) -> Any:
        """The run's settings; with ``check_release`` (before any call), also that the release to
        record can be written (at the end of the run it has been)."""
        from pytest_llmbias.config.settings_sources import settings_from_pytest
        from pytest_llmbias.errors import ConfigError
        from pytest_llmbias.releases.release import apply_release
        from pytest_llmbias.store.release_record import check_recordable

        c = self.config
        try:
            settings = settings_from_pytest(
                option=c.option,
                getini=c.getini,
                rootdir=c.rootpath,
                inipath=c.inipath,
                cwd=c.invocation_params.dir,
                environ=os.environ,
            )
            if check_release:
                check_recordable(settings)
            return apply_release(settings)
        except ConfigError as exc:
            raise pytest.UsageError(f"pytest-llmbias: {exc}") from None

    def close(self) -> None:
        if self._session is not None and not self._closed:
            self._closed = True
            self._session.close()

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
        marked = self.marked(items)
        if not marked:
            return
        from pytest_llmbias.errors import ConfigError
        from pytest_llmbias.gates import looking, marker_release, plan_marker, session_gates
        from pytest_llmbias.spending import check_spending

        core, gates = self.session, []
        for item, name, marker in marked:
            gate = looking(self.registry.gate(name))
            try:
                against, kwargs = marker_release(name, marker.kwargs)
                spec = plan_marker(gate, core.against(against), name, marker.args, kwargs)  # type: ignore[arg-type]
            except ConfigError as exc:
                raise pytest.UsageError(f"pytest-llmbias: {item.nodeid}: {exc}") from None
            item.stash.setdefault(SPEC_KEY, {})[name] = spec
            item.stash.setdefault(AGAINST_KEY, {})[name] = against
            if gate is not None:
                gates.append((item, name, gate, spec))
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        try:
            self.suite = session_gates(core.settings, gates)  # one gate a test; --llmbias-suite-alpha
            for item, name in self.suite.keys():
                item.stash[SPEC_KEY][name] = self.suite.spec((item, name))
            core.share_specs([(spec, self.suite.spec((item, name))) for item, name, _, spec in gates])
            core.open_team_store()  # an unreachable team store is a usage error, before any test
            core.check_applications()  # and a Python target that names nothing
            plan_only = check_spending(
                core,
                [(i.nodeid, g, self.suite.spec((i, n))) for i, n, g, _ in gates],
                worker=self.is_worker,
                write=_line_writer(reporter) if reporter else None,
            )
        except ConfigError as exc:
            raise pytest.UsageError(f"pytest-llmbias: {exc}") from None
        if plan_only:  # no test runs; the session ends as a success (see pytest_sessionfinish)
            self.config.hook.pytest_deselected(items=list(items))
            items.clear()
            self.plan_only = True
            if reporter is not None:
                reporter.write_line("llmbias: plan only (--llmbias-plan): no model was called")

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
            from pytest_llmbias.errors import LLMBiasError

            try:
                self.terminal.ensure_collected()
            except LLMBiasError as exc:  # a broken store, a failed probe: its message once, not the frames under it
                raise pytest.fail.Exception(f"{type(exc).__name__}: {exc}", pytrace=False) from None
            if self.gate_marker(item) is not None:
                self.gate_result(item)  # missing or broken data: an error in setup, not a verdict

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        if self.gate_marker(item) is not None:
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
            item.add_report_section("call", _SECTION, result.report())
        return (yield)

    def gate_result(self, item: pytest.Item) -> Any:
        """The item's gate result, computed once; a gate that cannot be computed fails the test."""
        if _result_key not in item.stash:
            from pytest_llmbias.report.run_record import gate_entry

            name = self.gate_marker(item)
            assert name is not None
            # with --llmbias-suite-alpha: Holm's step-down over the session's one-look gates first
            spec, result = self.suite.verdict((item, name), self._evaluate)
            item.stash[SPEC_KEY][name], share = spec, self.suite.share((item, name))
            row, self.reports.record.gate_docs[item.nodeid] = gate_entry(
                item.nodeid,
                name,
                spec.domain,
                result,
                against=item.stash.get(AGAINST_KEY, {}).get(name),
                suite=share.to_dict() if share is not None else None,
            )
            # JSON, so that JUnit XML shows it readably and it crosses pytest-xdist as plain text.
            item.user_properties.append((_ROW, json.dumps(row, default=str)))
            item.stash[_result_key] = result
        result = item.stash[_result_key]
        if isinstance(result, Exception):
            pytest.fail(f"{type(result).__name__}: {result}", pytrace=False)
        return result

    def _evaluate(self, key: tuple[pytest.Item, str], spec: Any) -> Any:
        from pytest_llmbias.gates import evaluate_marker

        return evaluate_marker(self.registry.gate(key[1]), spec, self.session_for(*key))


class _Reports:
    """What the run records for its reports, merged across pytest-xdist workers, and the reports
    written at its end (see :class:`~pytest_llmbias.report.run_record.RunRecord`). Registered
    beside :class:`_Plugin`."""

    def __init__(self, plugin: _Plugin) -> None:
        self.plugin = plugin
        self.config = plugin.config
        self._record: RunRecord | None = None

    @property
    def record(self) -> RunRecord:
        """What the run's reports need (see :mod:`pytest_llmbias.report.run_record`)."""
        if self._record is None:
            from pytest_llmbias.report.run_record import RunRecord

            self._record = RunRecord()
        return self._record

    @property
    def usage_error(self) -> str | None:
        """A usage error a pytest-xdist worker found (in the worker, and then in the controller)."""
        return self._record.usage_error if self._record is not None else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Mask every known credential in what the report carries (the traceback with its locals,
        captured output and logs, user properties) before the terminal or JUnit XML sees it: a
        safety net behind the plugin's own messages, for whatever a test or a library printed."""
        report: pytest.TestReport = yield
        if self.plugin._session is not None:
            from pytest_llmbias.config.redaction import mask_report

            mask_report(report, self.plugin._session.redact)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from pytest_llmbias.report.run_record import test_outcome

        outcome = test_outcome(report)
        if outcome is not None:
            self.record.outcomes[report.nodeid] = outcome
        for name, value in getattr(report, "user_properties", ()) if report.when == "teardown" else ():
            if name == _ROW and isinstance(value, str):
                self.record.rows.append(json.loads(value))
        if report.when == "call" and report.passed:
            self.record.passed_reports.extend(
                (report.nodeid, text) for title, text in report.sections if title == f"Captured {_SECTION} call"
            )

    def _run_settings(self) -> Any:
        """The run's settings: the session's, or (a pytest-xdist controller has none) resolved
        again as the workers did; None when they do not resolve (the run said why already)."""
        from pytest_llmbias.errors import ConfigError

        if self.plugin._session is not None:
            return self.plugin._session.settings
        try:
            return self.plugin._settings()
        except (ConfigError, pytest.UsageError):
            return None

    def _finish_release(self, record: Any) -> None:
        from pytest_llmbias import __version__
        from pytest_llmbias.errors import ConfigError
        from pytest_llmbias.store.release_record import finish_release

        settings = self._run_settings()
        if settings is None:
            return
        try:
            written = finish_release(
                settings, [Path(p) for p in record.release_parts], cwd=self.config.rootpath, plugin_version=__version__
            )
        except ConfigError as exc:
            self.config.get_terminal_writer().line(f"llmbias: {exc}", red=True)
            return
        if written is not None:
            self.config.get_terminal_writer().line(
                f"llmbias: release {settings.release.record!r} recorded in {written.parent}"
            )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        record, core = self.record, self.plugin._session
        if self.plugin.is_worker:
            self.config.workeroutput.update(record.worker_output(core))  # type: ignore[attr-defined]
            self.plugin.close()
            if core is not None:
                self.config.workeroutput.update(record.export_output(core))  # type: ignore[attr-defined]
            return
        if core is not None:
            from pytest_llmbias.report.run_record import add_usage

            add_usage(record.usage, core.usage())
            self.plugin.close()
        record.finish_exports(core)
        if record.release_parts or (core is not None and core.recorded is not None):
            self._finish_release(record)
        if record.gate_docs:
            self._write_reports(self._append_history())
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary and record.gate_docs:
            record.step_summary(summary)

    def _append_history(self) -> Path | None:
        """Append the run to the run history; its database's path (None when off or unwritten)."""
        settings = self._run_settings()
        if settings is None:
            return None
        path, warning = self.record.append_history(settings, self.config.rootpath)
        if warning is not None:
            self.config.get_terminal_writer().line(f"llmbias: warning: {warning}", yellow=True)
            return None
        return path

    def _write_reports(self, history: Path | None = None) -> None:
        """The run's JSON document and HTML page, when ``report.json`` or ``report.html`` is set
        (under pytest-xdist the controller resolves the settings here, as workers did)."""
        from pytest_llmbias import __version__
        from pytest_llmbias.report.html import gate_figures

        settings = self._run_settings()
        if settings is None:
            return
        hook, config, registry = self.config.hook, self.config, self.plugin.registry

        def figures(entry: Any) -> Any:
            gate = registry.added.get(str(entry.get("gate")))
            return gate.figures(entry) if gate is not None else gate_figures(entry)  # type: ignore[attr-defined]

        self.record.write_reports(
            settings,
            self.plugin._session,
            version=__version__,
            figures_for=figures,
            history=history,
            generate=lambda e: hook.pytest_llmbias_json_generate(config=config, gate=e),
            update=lambda d: hook.pytest_llmbias_json_update(config=config, document=d),
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist controller: take what a finished worker recorded (see RunRecord.merge_worker)."""
        self.record.merge_worker(getattr(node, "workeroutput", None) or {})


class _Terminal:
    """What the run shows on the terminal: the header line, the live progress line, the collection
    line, the notices and the end-of-run section. Registered beside :class:`_Plugin`."""

    def __init__(self, plugin: _Plugin) -> None:
        self.plugin = plugin
        self.config = plugin.config
        self._last_draw = 0.0
        self._last_line = ""
        self._notices_shown = 0
        #: the collection line is on screen already (this process collected and printed it)
        self._collection_shown = False

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        """One header line when the plugin is in use: the roster, the judge, the store and its mode."""
        if self.plugin.is_worker or config.get_verbosity() < 0 or not self.plugin.marked(items):
            return []
        from pytest_llmbias.report.terminal import header_line

        return [header_line(self.plugin.session.settings)]

    def ensure_collected(self) -> None:
        """Collect what the plan needs (once), showing progress and then one line on it."""
        if not self.plugin.session.pending:
            return
        from pytest_llmbias.report.run_record import collection_lines

        capman = self.config.pluginmanager.getplugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            reporter = self._reporter()
            # without -v the file's results go on under the line, its name not printed a second time
            shown = reporter.currentfspath if reporter is not None and self.config.get_verbosity() <= 0 else None
            if reporter is not None:
                reporter.ensure_newline()
            report = self.plugin.session.ensure_collected()
            if report is not None and reporter is not None:
                prefix = "\r" if self._tty(reporter) else ""
                lines = collection_lines(
                    report, self.plugin.session, first=not self._collection_shown
                )  # fingerprints first
                reporter.write(
                    prefix + lines[0].ljust(len(self._last_line)) + "".join(f"\n{x}" for x in lines[1:]) + "\n",
                    flush=True,
                )
                self._last_line, self._collection_shown, reporter.currentfspath = "", True, shown
        import warnings

        for notice in self.plugin.session.notices[self._notices_shown :]:  # at the settings, not here
            warnings.warn_explicit(LLMBiasWarning(notice), LLMBiasWarning, str(self.plugin.session.settings_origin), 0)
        self._notices_shown = len(self.plugin.session.notices)

    def _reporter(self) -> Any:
        """The terminal reporter while this process may print: not in an xdist worker (the
        controller prints for it) and not under -q."""
        if self.plugin.is_worker or self.config.get_verbosity() < 0:
            return None
        return self.config.pluginmanager.getplugin("terminalreporter")

    @staticmethod
    def _tty(reporter: Any) -> bool:
        return bool(getattr(reporter, "isatty", sys.stdout.isatty)())

    def progress(self, p: Progress) -> None:
        reporter = self._reporter()
        if reporter is None or p.done >= p.shown_total:
            return
        now, tty = time.monotonic(), self._tty(reporter)
        if now - self._last_draw < (0.2 if tty else 10.0):
            return
        self._last_draw = now
        line = p.line(self.plugin._session.backoff_note() if self.plugin._session is not None else None)
        if tty:
            reporter.write("\r" + line.ljust(len(self._last_line)), flush=True)
            self._last_line = line
        else:
            reporter.write_line(line)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        verbosity = self.config.get_verbosity()
        record = self.plugin.reports._record
        lines = (
            None
            if self.plugin.is_worker or verbosity < -1 or record is None
            else record.summary(self.plugin._session, verbosity, collection_shown=self._collection_shown)
        )
        if lines is not None:
            terminalreporter.ensure_newline()
            terminalreporter.section("llmbias", sep="-")
            for kind, text in lines:
                terminalreporter.write_sep("-", text) if kind == "sep" else terminalreporter.write_line(text)
