"""What a run records for its reports, merged across pytest-xdist workers, and the reports written at
its end: the pytest hooks of :class:`RunReports`."""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmbias.plugin import ci  # pytest only
from pytest_llmbias.plugin.failures import report_late, shown, take_worker_errors  # pytest only

if TYPE_CHECKING:
    from pytest_llmbias.report.run_record import RunRecord

ROW = SECTION = "llmbias"  # the user property of a gate's row; the report section of its text


class RunReports:
    """What the run records for its reports, merged across pytest-xdist workers, and the reports
    written at its end (see :class:`~pytest_llmbias.report.run_record.RunRecord`). Registered
    beside the run's plugin object (:mod:`pytest_llmbias.plugin`)."""

    def __init__(self, plugin: Any) -> None:  # the run's plugin object (pytest_llmbias.plugin)
        self.plugin = plugin
        self.config = plugin.config
        self._record: RunRecord | None = None
        #: the pytest session (from its start), whose exit code an error at the end of the run sets
        self.session: pytest.Session | None = None
        #: what the pytest-xdist workers could not finish (see plugin.failures.report_late)
        self.worker_errors: list[str] = []
        #: test id -> (file, line) of the test, for the CI annotations (the controller gets it too)
        self.locations: dict[str, tuple[str, int]] = {}
        #: the manifest of the release this run recorded, logged with the reports
        self.manifest: Path | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

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

    @pytest.hookimpl(tryfirst=True)  # before JUnit XML reads the user properties
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from pytest_llmbias.report.run_record import test_outcome

        outcome = test_outcome(report)
        if outcome is not None:
            self.record.outcomes[report.nodeid] = outcome
        if report.location:
            self.locations.setdefault(report.nodeid, (str(report.location[0]), int(report.location[1] or 0) + 1))
        for name, value in getattr(report, "user_properties", ()) if report.when == "teardown" else ():
            if name == ROW and isinstance(value, str):
                self.record.rows.append(json.loads(value))
        if report.when == "teardown":
            ci.drop_row_property(self.config, report, ROW)
        if report.when == "call" and report.passed:
            self.record.passed_reports.extend(
                (report.nodeid, text) for title, text in report.sections if title == f"Captured {SECTION} call"
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
        from pytest_llmbias.releases.record import finish_release

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
        self.manifest = written
        if written is not None:
            self.config.get_terminal_writer().line(
                f"llmbias: release {settings.release.record!r} recorded in {written.parent}"
            )

    @pytest.hookimpl(tryfirst=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_junit(self, session: pytest.Session) -> None:
        """The run's properties in JUnit XML, before pytest writes it (see plugin.ci)."""
        ci.add_junit_properties(self, ROW)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        with shown("finish", config=self.config, session=session):
            self._finish(session)
        for message in dict.fromkeys(self.worker_errors):  # each once, however many workers met it
            report_late(self.config, session, message)

    def _finish(self, session: pytest.Session) -> None:
        record, core = self.record, self.plugin._session
        if self.plugin.is_worker:
            self.config.workeroutput.update(record.worker_output(core))
            self.plugin.close()
            if core is not None:
                self.config.workeroutput.update(record.export_output(core))
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
            ci.track(self, session)
            ci.annotate(self)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary and record.gate_docs:
            record.step_summary(summary)

    def _append_history(self) -> Path | None:
        """Append the run to the run history; its database's path (None when off or unwritten)."""
        settings = self._run_settings()
        if settings is None:
            return None
        core = self.plugin._session
        loaded = core.loaded_domains() if core is not None else None
        path, warning = self.record.append_history(settings, self.config.rootpath, loaded)
        if warning is not None:
            self.config.get_terminal_writer().line(f"llmbias: warning: {warning}", yellow=True)
            return None
        return path

    def _write_reports(self, history: Path | None = None) -> None:
        """The run's JSON document and HTML page, when ``report.json`` or ``report.html`` is set
        (under pytest-xdist the controller resolves the settings here, as workers did)."""
        from pytest_llmbias import __version__
        from pytest_llmbias.gates import gate_figures

        settings = self._run_settings()
        if settings is None:
            return
        hook, config, registry = self.config.hook, self.config, self.plugin.registry

        def figures(entry: Any) -> Any:
            gate = registry.added.get(str(entry.get("gate")))
            return gate.figures(entry) if gate is not None else gate_figures(entry)

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
        """pytest-xdist controller: take what a finished worker recorded (see RunRecord.merge_worker)
        and the errors it met at its end."""
        output = getattr(node, "workeroutput", None) or {}
        self.record.merge_worker(output)
        self.worker_errors.extend(take_worker_errors(output))
