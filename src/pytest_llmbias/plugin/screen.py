"""What a run shows on the terminal: the pytest hooks of :class:`RunTerminal`."""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmbias.errors import LLMBiasWarning  # standard library only
from pytest_llmbias.plugin.failures import shown  # pytest only

if TYPE_CHECKING:
    from pytest_llmbias.planning.collector import Progress


@dataclass(frozen=True)
class ChangedModel:
    """A model changed behind its name, as an entry of pytest's ``terminalreporter.stats``: pytest
    counts the entries of any key in its last line; other plugins read every entry's attributes
    (hypothesis' its ``__dict__``), so an entry is an object, never a bare dict."""

    alias: str


class RunTerminal:
    """What the run shows on the terminal: the header line, the live progress line, the collection
    line, the notices and the end-of-run section. Registered beside the run's plugin object."""

    def __init__(self, plugin: Any) -> None:  # the run's plugin object (pytest_llmbias.plugin)
        self.plugin = plugin
        self.config = plugin.config
        self._last_draw = 0.0
        self._last_line = ""
        self._error_kinds_drawn = 0  # the kinds of error the last progress line drawn counted
        self._notices_shown = 0
        #: the collection line is on screen already (this process collected and printed it)
        self._collection_shown = False

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        """One header line when the plugin is in use: the roster, the judge, the store and its mode."""
        if self.plugin.is_worker or config.get_verbosity() < 0 or not self.plugin.marked(items):
            return []
        from pytest_llmbias.report.terminal import header_line

        with shown("session"):
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
        self._tell_faults(p)
        now = time.monotonic()
        new_kind = len(p.error_kinds) > self._error_kinds_drawn  # a call failed for good in a new way: drawn now
        if now - self._last_draw < 0.2 and not new_kind:  # drawn at most every 0.2 s: most answers stop here
            return
        reporter = self._reporter()
        if reporter is None or p.done >= p.shown_total:
            return
        tty = self._tty(reporter)
        if now - self._last_draw < (0.2 if tty else 10.0) and not new_kind:
            return
        self._error_kinds_drawn = len(p.error_kinds)
        self._last_draw = now
        line = p.line(self.plugin._session.backoff_note() if self.plugin._session is not None else None)
        if tty:
            reporter.write("\r" + line.ljust(len(self._last_line)), flush=True)
            self._last_line = line
        else:
            reporter.write_line(line)

    def _tell_faults(self, p: Progress) -> None:
        """The first failed attempt of each kind, at once, on a line of its own: its reason and
        what to change (``collection.timeout``, ``collection.concurrency``, ``max_tokens``)."""
        untold = p.faults.untold() if p.faults is not None else []
        reporter = self._reporter() if untold else None
        if reporter is None:
            return
        prefix = "\r" if self._tty(reporter) and self._last_line else ""
        reporter.ensure_newline()
        for fault in untold:
            reporter.write(prefix + fault.message.ljust(len(self._last_line) if prefix else 0) + "\n", flush=True)
            prefix, self._last_line = "", ""
        self._last_draw = 0.0  # the progress line drawn again under it

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        with shown("finish", config=self.config, session=self.plugin.reports.session):
            self._summary(terminalreporter)

    def _summary(self, terminalreporter: Any) -> None:
        verbosity = self.config.get_verbosity()
        record = self.plugin.reports._record
        lines = (
            None
            if self.plugin.is_worker or verbosity < -1 or record is None
            else record.summary(self.plugin._session, verbosity, collection_shown=self._collection_shown)
        )
        if not self.plugin.is_worker and record is not None:
            changed = [e for e in record.fingerprint_entries(self.plugin._session) if e.get("state") == "changed"]
            if changed:  # counted in pytest's last line ("1 passed, 1 model changed"), which -q and -qq keep
                key = "model changed" if len(changed) == 1 else "models changed"
                terminalreporter.stats.setdefault(key, []).extend(ChangedModel(str(e["alias"])) for e in changed)
        if lines is not None:
            terminalreporter.ensure_newline()
            terminalreporter.section("llmbias", sep="-")
            for kind, text in lines:
                terminalreporter.write_sep("-", text) if kind == "sep" else terminalreporter.write_line(text)
