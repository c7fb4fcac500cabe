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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_llmbias.llm import LLM
    from pytest_llmbias.planning.collector import Progress
    from pytest_llmbias.planning.response_set import ResponseSet
    from pytest_llmbias.session import BiasSession

class LLMBiasWarning(pytest.PytestWarning):
    """A gate result that passed or failed, but with a caveat (an unstable margin, a self-judging judge)."""


_session_key = pytest.StashKey["_Plugin"]()
_spec_key = pytest.StashKey[dict]()
_result_key = pytest.StashKey[Any]()
_ROW = "llmbias"
_SECTION = "llmbias"
_WORKER_REPORTS = "llmbias_collection"
#: the key of config.workeroutput under which a pytest-xdist worker reports its export part files
_EXPORT_PARTS = "llmbias_export_parts"
_USAGE_ERROR = "llmbias_usage_error"
#: the keys of workeroutput under which a worker sends its gates' JSON entries and its call usage
_GATE_DOCS = "llmbias_gates"
_USAGE = "llmbias_usage"


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_llmbias.options import OPTIONS  # standard library only

    group = parser.getgroup("llmbias", "bias regression tests of LLMs (pytest-llmbias)")
    for option in OPTIONS:
        group.addoption(option.flag, **option.argparse_kwargs())
        parser.addini(option.ini, option.ini_help, type=option.ini_type, default=option.ini_default)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_llmbias import hookspecs  # pytest only

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_llmbias.catalog import MARKERS  # standard library only

    for doc in MARKERS:
        config.addinivalue_line("markers", doc.line)
    plugin = _Plugin(config)
    config.stash[_session_key] = plugin
    config.pluginmanager.register(plugin, "llmbias-session")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(_session_key, None)
    if plugin is not None:
        plugin.close()


def _plugin(config: pytest.Config) -> _Plugin:
    return config.stash[_session_key]


class _Plugin:
    """Per-run state; creates the core session only when a marker or fixture needs it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._session: BiasSession | None = None
        self._closed = False
        self._last_draw = 0.0
        self._last_line = ""
        self.rows: list[dict[str, Any]] = []
        self.passed_reports: list[tuple[str, str]] = []
        self.worker_reports: list[dict[str, Any]] = []
        #: export path -> the part files pytest-xdist workers wrote for it (controller only)
        self.export_parts: dict[str, list[str]] = {}
        #: the export files this process wrote or merged, for the summary
        self.exported: list[Path] = []
        #: a usage error found in a pytest-xdist worker (in the worker, and then in the controller)
        self.usage_error: str | None = None
        self._notices_shown = 0
        #: nodeid -> the gate's entry of the JSON document (this process's, then the workers')
        self.gate_docs: dict[str, dict[str, Any]] = {}
        #: nodeid -> the test's outcome, as the JSON document names it
        self.outcomes: dict[str, str] = {}
        #: alias -> usage of the calls made over the network (summed over workers)
        self.usage: dict[str, dict[str, Any]] = {}

    @property
    def worker_input(self) -> dict[str, Any]:
        """pytest-xdist's worker data (empty outside a worker). Read from the config, not the
        environment: a pytest run started from inside a worker inherits the worker's variables."""
        return getattr(self.config, "workerinput", None) or {}

    @property
    def is_worker(self) -> bool:
        return bool(self.worker_input)

    # -- the core session --------------------------------------------------------------------

    @property
    def session(self) -> BiasSession:
        if self._session is None:
            from pytest_llmbias.errors import ConfigError
            from pytest_llmbias.session import BiasSession

            try:
                settings = self._settings()
            except ConfigError as exc:
                raise pytest.UsageError(f"pytest-llmbias: {exc}") from None
            self._session = BiasSession(
                settings,
                on_progress=self._progress,
                worker_id=self.worker_input.get("workerid"),
                run_id=self.worker_input.get("testrunuid"),
                add_features=self._add_features,
            )
        return self._session

    def _add_features(self, registry: Any) -> None:
        self.config.hook.pytest_llmbias_add_features(registry=registry, config=self.config)

    def _settings(self) -> Any:
        from pytest_llmbias.options import CONFIG, SETTINGS_OPTIONS
        from pytest_llmbias.settings import find_config, resolve_settings

        config = self.config
        cwd = config.invocation_params.dir
        path = find_config(
            cli_path=getattr(config.option, CONFIG.dest),
            ini_path=config.getini(CONFIG.ini) or None,
            environ=os.environ,
            rootdir=config.rootpath,
            cwd=cwd,
        )
        return resolve_settings(
            cli={o.name: getattr(config.option, o.dest) for o in SETTINGS_OPTIONS},
            ini={o.name: config.getini(o.ini) for o in SETTINGS_OPTIONS},
            ini_dir=config.rootpath,
            ini_file=config.inipath,
            environ=os.environ,
            config_path=path,
            cwd=cwd,
        )

    def close(self) -> None:
        if self._session is not None and not self._closed:
            self._closed = True
            self._session.close()

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
            self.usage_error = str(exc)
            session.shouldstop = "pytest-llmbias: usage error"

    def _plan(self, items: list[pytest.Item]) -> None:
        marked = _marked(items)
        if not marked:
            return
        from pytest_llmbias.errors import ConfigError
        from pytest_llmbias.gates import GATES
        from pytest_llmbias.gates import parse_marker

        core = self.session
        gates: list[tuple[str, str, Any]] = []
        for item, name, marker in marked:
            try:
                spec = parse_marker(name, marker.args, marker.kwargs)
                if name in GATES:
                    GATES[name].plan(spec, core)
                    gates.append((item.nodeid, name, spec))
                else:
                    core.plan(spec)
            except ConfigError as exc:
                raise pytest.UsageError(f"pytest-llmbias: {item.nodeid}: {exc}") from None
            item.stash.setdefault(_spec_key, {})[name] = spec
        self._check_spending(core, gates)

    def _check_spending(self, core: BiasSession, gates: list[tuple[str, str, Any]]) -> None:
        """``--llmbias-plan``: print what the plan needs and each gate's expected power (``gates``:
        test id, marker name and spec), and stop. ``--llmbias-max-cost``: stop before the first
        call when the estimate exceeds the budget or cannot be priced."""
        from pytest_llmbias.report.terminal import plan_table, power_table

        c, store = core.settings.collection, core.settings.store
        if not c.plan and (c.max_cost is None or store.offline):
            return
        if c.plan and self.is_worker:
            raise pytest.UsageError("pytest-llmbias: --llmbias-plan runs in one process: drop -n")
        estimate = core.estimate()
        if c.plan:
            reporter = self.config.pluginmanager.getplugin("terminalreporter")
            lines = plan_table(estimate, budget=c.max_cost)
            if reporter is not None:
                reporter.ensure_newline()
                for line in lines:
                    reporter.write_line(line)
            if reporter is not None and gates:
                from pytest_llmbias.gates import GATES
                from pytest_llmbias.gates.expected_power import expected_power

                powers = [(nodeid, e) for nodeid, name, spec in gates for e in expected_power(GATES[name], spec, core)]
                for line in power_table(powers):
                    reporter.write_line(line)
            pytest.exit("llmbias: plan only (--llmbias-plan): no model was called", returncode=0)
        assert c.max_cost is not None
        unpriced = sorted({e["model"] for e in estimate.values() if e["to_fetch"] and e["cost_usd"] is None})
        total = sum(e["cost_usd"] or 0.0 for e in estimate.values())
        if unpriced or total > c.max_cost:
            why = (f"litellm's price map does not know {', '.join(unpriced)}, so the budget cannot be kept"
                   if unpriced else f"the estimate, ${total:.4f}, exceeds it")
            raise pytest.UsageError(
                f"pytest-llmbias: the budget is ${c.max_cost:g} (--llmbias-max-cost) and {why}; no call was made.\n"
                + "\n".join(plan_table(estimate, budget=c.max_cost))
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> bool | None:
        return True if self.usage_error is not None else None  # a worker with a usage error runs nothing

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        try:
            return (yield)
        finally:
            if self.usage_error is not None and not self.is_worker:
                # Exit code and message exactly as without pytest-xdist.
                raise pytest.UsageError(self.usage_error)

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        """One header line when the plugin is in use: the roster, the judge, the store and its mode."""
        if self.is_worker or config.get_verbosity() < 0 or not _marked(items):
            return []
        s = self.session.settings
        roster = ", ".join(
            [*(f"target {s.target.alias}" for _ in (s.target,) if s.target is not None),
             *(["baselines " + ", ".join(b.alias for b in s.baselines)] if s.baselines else []),
             *([f"judge {s.judge.alias}"] if s.judge is not None else [])]
        ) or "no models configured"
        mode = str(s.store.cache) + (", offline" if s.store.offline else "")
        return [f"llmbias: {roster}; store {s.store.dir} ({mode})"]

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        specs = item.stash.get(_spec_key, None)
        if specs:
            from pytest_llmbias.errors import LLMBiasError

            try:
                self._ensure_collected()
            except LLMBiasError as exc:  # a broken store, say: its message, not the frames under it
                pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
            if _gate_marker(item) is not None:
                self.gate_result(item)  # missing or broken data: an error in setup, not a verdict

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        if _gate_marker(item) is not None:
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
                    module=item.module.__name__ if getattr(item, "module", None) else None,
                )
            if not result.passed:
                pytest.fail(result.report(), pytrace=False)
            item.add_report_section("call", _SECTION, result.report())
        return (yield)

    def gate_result(self, item: pytest.Item) -> Any:
        """The item's gate result, computed once; a gate that cannot be computed fails the test."""
        if _result_key in item.stash:
            result = item.stash[_result_key]
        else:
            from pytest_llmbias.errors import LLMBiasError

            from pytest_llmbias.gates import GATES

            name = _gate_marker(item)
            assert name is not None
            spec = item.stash[_spec_key][name]
            try:
                result = GATES[name].evaluate(spec, self.session)
            except (LLMBiasError, ValueError) as exc:
                result = exc
                row = {"test": item.nodeid, "domain": spec.domain, "error": str(exc)}
                doc = {"passed": None, "verdict": "error", "result": {"error": f"{type(exc).__name__}: {exc}"}}
            else:
                row = result.summary_row(item.nodeid)
                doc = {"passed": bool(result.passed), "verdict": str(result.verdict), "result": result.to_dict(),
                       "report": result.report(), "table": result.table().to_dict()}
            domain = spec.domain if isinstance(result, Exception) else result.domain
            self.gate_docs[item.nodeid] = {"test": item.nodeid, "gate": name, "domain": str(domain), **doc,
                                           "row": json.loads(json.dumps(row, default=str))}
            # JSON, so that JUnit XML shows it readably and it crosses pytest-xdist as plain text.
            item.user_properties.append((_ROW, json.dumps(row, default=str)))
            item.stash[_result_key] = result
        if isinstance(result, Exception):
            pytest.fail(f"{type(result).__name__}: {result}", pytrace=False)
        return result

    def _ensure_collected(self) -> None:
        if not self.session.pending:
            return
        capman = self.config.pluginmanager.getplugin("capturemanager")
        ctx = capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()
        with ctx:
            reporter = self._reporter()
            if reporter is not None:
                reporter.ensure_newline()
            report = self.session.ensure_collected()
            if report is not None and reporter is not None:
                prefix = "\r" if self._tty(reporter) else ""
                reporter.write(prefix + describe_collection(report).ljust(len(self._last_line)) + "\n", flush=True)
                self._last_line = ""
        import warnings

        for notice in self.session.notices[self._notices_shown :]:
            warnings.warn(LLMBiasWarning(notice), stacklevel=1)
        self._notices_shown = len(self.session.notices)

    # -- reporting ---------------------------------------------------------------------------

    def _reporter(self) -> Any:
        """The terminal reporter while this process may print: not in an xdist worker (the
        controller prints for it) and not under -q."""
        if self.is_worker or self.config.get_verbosity() < 0:
            return None
        return self.config.pluginmanager.getplugin("terminalreporter")

    @staticmethod
    def _tty(reporter: Any) -> bool:
        return bool(getattr(reporter, "isatty", sys.stdout.isatty)())

    def _progress(self, p: Progress) -> None:
        reporter = self._reporter()
        if reporter is None or p.done == p.total:
            return
        now = time.monotonic()
        tty = self._tty(reporter)
        if now - self._last_draw < (0.2 if tty else 10.0):
            return
        self._last_draw = now
        line = (
            f"llmbias: {p.done}/{p.total} calls ({p.from_store} from store, {p.fetched} fetched, "
            f"{p.errors} errors{f', {p.missing} missing' if p.missing else ''}) {p.calls_per_s:.1f} calls/s"
        )
        note = self._session.backoff_note() if self._session is not None else None
        if note:
            line += f"; {note}"
        if tty:
            reporter.write("\r" + line.ljust(len(self._last_line)), flush=True)
            self._last_line = line
        else:
            reporter.write_line(line)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
        """Mask every known credential in what the report carries (the traceback with its locals,
        captured output and logs, user properties) before the terminal or JUnit XML sees it: a
        safety net behind the plugin's own messages, for whatever a test or a library printed."""
        report: pytest.TestReport = yield
        if self._session is not None:
            mask_report(report, self._session.redact)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome = _outcome(report)
        if outcome is not None:
            self.outcomes[report.nodeid] = outcome
        for name, value in getattr(report, "user_properties", ()) if report.when == "teardown" else ():
            if name == _ROW and isinstance(value, str):
                self.rows.append(json.loads(value))
        if report.when == "call" and report.passed:
            self.passed_reports.extend(
                (report.nodeid, text) for title, text in report.sections if title == f"Captured {_SECTION} call"
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        verbosity = self.config.get_verbosity()
        if self.is_worker or verbosity < -1:
            return
        reports = list(self._session.reports) if self._session is not None else []
        if self.worker_reports:
            from pytest_llmbias.planning.collector import CollectionReport, merge_worker_reports

            reports.append(merge_worker_reports([CollectionReport.from_dict(r) for r in self.worker_reports]))
        if not reports and not self.rows and not self.exported:
            return
        terminalreporter.ensure_newline()
        terminalreporter.section("llmbias", sep="-")
        if verbosity >= 0:
            for report in reports:
                terminalreporter.write_line(describe_collection(report))
            usage = self.usage  # summed in pytest_sessionfinish, which runs before this summary
            if usage:
                from pytest_llmbias.clients.pricing import price

                tokens = sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage.values())
                costs = [price(u["model"], u["prompt_tokens"], u["completion_tokens"]) for u in usage.values()]
                cost = "cost unknown (a model is not in litellm's price map)" if None in costs else f"${sum(costs):.4f}"
                terminalreporter.write_line(f"llmbias: {tokens:,} tokens fetched this run, {cost}")
        if self.rows:
            from pytest_llmbias.report.terminal import gate_table

            for line in gate_table(self.rows):
                terminalreporter.write_line(line)
        if verbosity > 0:
            for nodeid, text in sorted(self.passed_reports):
                terminalreporter.write_sep("-", nodeid)
                for line in text.splitlines():
                    terminalreporter.write_line(line)
        if verbosity >= 0:
            for export in self.exported:
                what = {".json": "the run's JSON document is written", ".html": "the run's HTML report is written"}.get(
                    export.suffix, "responses used are exported")
                terminalreporter.write_line(f"llmbias: {what} to {export}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.usage_error is not None and self.is_worker:
            self.config.workeroutput[_USAGE_ERROR] = self.usage_error  # type: ignore[attr-defined]
        if self._session is not None and self.is_worker:
            self.config.workeroutput[_WORKER_REPORTS] = [r.to_dict() for r in self._session.reports]  # type: ignore[attr-defined]
            self.config.workeroutput[_GATE_DOCS] = list(self.gate_docs.values())  # type: ignore[attr-defined]
            self.config.workeroutput[_USAGE] = self._session.usage()  # type: ignore[attr-defined]
        elif self._session is not None:
            _add_usage(self.usage, self._session.usage())
        if self._session is not None:
            self.close()
            written, export = self._session.exported, self._session.settings.store.export
            if written is not None and self.is_worker:
                # pytest-xdist sends workeroutput after every pytest_sessionfinish has run; the
                # controller merges exactly the parts its workers name, never a stray file.
                self.config.workeroutput[_EXPORT_PARTS] = {str(export): [str(written)]}  # type: ignore[attr-defined]
            elif written is not None:
                self.exported.append(written)
        if self.export_parts:
            from pytest_llmbias.store.snapshot import merge_export_parts

            for export_path, parts in self.export_parts.items():
                merge_export_parts(Path(export_path), [Path(p) for p in parts])
                self.exported.append(Path(export_path))
        if not self.is_worker and self.gate_docs:
            self._write_reports()
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary and not self.is_worker and self.rows:
            from pytest_llmbias.report.terminal import markdown_summary

            with open(summary, "a", encoding="utf-8") as handle:
                handle.write(markdown_summary(self.rows))

    def _write_reports(self) -> None:
        """Write the run's JSON document and HTML page when ``report.json`` or ``report.html`` is
        set (the controller, under pytest-xdist: it resolves the settings here, as workers did for
        their sessions). The page is rendered from the document, credentials masked in both."""
        from pytest_llmbias import __version__
        from pytest_llmbias.clients.pricing import price
        from pytest_llmbias.errors import ConfigError
        from pytest_llmbias.planning.collector import CollectionReport, merge_worker_reports
        from pytest_llmbias.redaction import Redactor
        from pytest_llmbias.report import json_report

        try:
            settings = self._session.settings if self._session is not None else self._settings()
        except ConfigError:
            return
        json_path, html_path = settings.report.json, settings.report.html
        if json_path is None and html_path is None:
            return
        reports = list(self._session.reports) if self._session is not None else []
        if self.worker_reports:
            reports.append(merge_worker_reports([CollectionReport.from_dict(r) for r in self.worker_reports]))
        usage = {
            alias: {"calls": u["calls"], "prompt_tokens": u["prompt_tokens"], "completion_tokens": u["completion_tokens"],
                    "cost_usd": price(u["model"], u["prompt_tokens"], u["completion_tokens"])}
            for alias, u in self.usage.items()
        }
        gates = []
        for nodeid, entry in self.gate_docs.items():
            entry = {**entry, "outcome": self.outcomes.get(nodeid, "error")}
            self.config.hook.pytest_llmbias_json_generate(config=self.config, gate=entry)
            gates.append(entry)
        doc = json_report.document(settings=settings.to_dict(), plan=json_report.plan_figures(reports, usage),
                                   gates=gates, version=__version__)
        self.config.hook.pytest_llmbias_json_update(config=self.config, document=doc)
        redactor = Redactor.for_models([*settings.roster, settings.judge])
        if json_path is not None:
            json_report.write(json_path, doc, redactor)
            self.exported.append(json_path)
        if html_path is not None:
            from pytest_llmbias.report import html

            html.write(html_path, doc, redactor)
            self.exported.append(html_path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist controller: note what a finished worker collected (to print it once) and the
        export part files it wrote (to merge them)."""
        output = getattr(node, "workeroutput", None) or {}
        if self.usage_error is None:
            self.usage_error = output.get(_USAGE_ERROR)
        self.worker_reports.extend(output.get(_WORKER_REPORTS, ()))
        for entry in output.get(_GATE_DOCS, ()):
            self.gate_docs[entry["test"]] = entry
        _add_usage(self.usage, output.get(_USAGE, {}))
        for export, parts in output.get(_EXPORT_PARTS, {}).items():
            self.export_parts.setdefault(export, []).extend(parts)


def _outcome(report: pytest.TestReport) -> str | None:
    """The test's outcome as the JSON document names it, from one of its phase reports (None
    when this phase says nothing new: a passed setup or teardown)."""
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.passed else "xfailed"
    if report.when == "call":
        return str(report.outcome)
    if report.failed:
        return "error"
    if report.skipped:
        return "skipped"
    return None


def _add_usage(total: dict[str, dict[str, Any]], more: dict[str, dict[str, Any]]) -> None:
    for alias, u in more.items():
        entry = total.setdefault(alias, {"model": u["model"], "calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            entry[key] += int(u[key])


def mask_report(report: pytest.TestReport, redact: Any) -> None:
    """Replace credentials in ``report`` in place; the traceback becomes plain text only when it
    held one (and so loses its colour)."""
    if report.longrepr is not None:
        text = str(report.longrepr)
        if redact.leaks(text):
            report.longrepr = redact(text)
    report.sections = [(title, redact(content)) for title, content in report.sections]
    report.user_properties = [
        (name, redact(value) if isinstance(value, str) else value) for name, value in report.user_properties
    ]


def describe_collection(report: Any) -> str:
    return (
        f"llmbias: {report.total} calls: {report.from_store} from store, {report.fetched} fetched, "
        f"{len(report.errors)} failed, {len(report.missing)} missing, in {report.elapsed_s:.1f}s"
    )


def _marked(items: list[pytest.Item]) -> list[tuple[pytest.Item, str, pytest.Mark]]:
    """(item, marker name, marker) for every marker of this plugin on ``items``."""
    from pytest_llmbias.catalog import BY_NAME

    names = list(BY_NAME)
    return [(item, name, mark) for item in items for name in names if (mark := item.get_closest_marker(name)) is not None]


def _gate_marker(item: pytest.Item) -> str | None:
    """The name of the item's gate marker (one whose test passes or fails on a result), if any."""
    from pytest_llmbias.catalog import GATE_MARKERS

    specs = item.stash.get(_spec_key, None)
    if not specs:
        return None
    return next((name for name in GATE_MARKERS if name in specs), None)


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def bias_responses(request: pytest.FixtureRequest) -> ResponseSet:
    """The responses ``@pytest.mark.bias_responses(...)`` asked for (a ``ResponseSet``)."""
    from pytest_llmbias.errors import MissingResponsesError, StoreError

    specs = request.node.stash.get(_spec_key, {})
    if "bias_responses" not in specs:
        pytest.fail("the bias_responses fixture needs @pytest.mark.bias_responses(domain=...) on the test", pytrace=False)
    plugin = _plugin(request.config)
    try:
        return plugin.session.responses(specs["bias_responses"])
    except (MissingResponsesError, StoreError) as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


@pytest.fixture
def bias_result(request: pytest.FixtureRequest) -> Any:
    """The result of the test's gate marker: an ``EquivalentResult`` for ``bias_equivalent``
    (``.passed``, ``.verdict``, ``.methods``...), an ``ImpactRatioGateResult`` for
    ``bias_impact_ratio`` (``.passed``, ``.target``, ``.baselines``...)."""
    if _gate_marker(request.node) is None:
        pytest.fail(
            "the bias_result fixture needs a gate marker: @pytest.mark.bias_equivalent(...) or "
            "@pytest.mark.bias_impact_ratio(...)",
            pytrace=False,
        )
    return _plugin(request.config).gate_result(request.node)


def _llm(config: pytest.Config, which: str) -> Any:
    from pytest_llmbias.errors import ConfigError
    from pytest_llmbias.llm import LLM

    core = _plugin(config).session
    settings = core.settings
    try:
        if which == "target":
            settings.require_roster(min_baselines=0)
            return LLM(core, settings.target)
        if which == "baselines":
            settings.require_roster(min_baselines=1)
            return tuple(LLM(core, spec) for spec in settings.baselines)
        if settings.judge is None:
            raise ConfigError("no judge model configured: set 'judge' in llmbias.yaml or pass --llmbias-judge MODEL")
        return LLM(core, settings.judge)
    except ConfigError as exc:
        message = f"pytest-llmbias: {exc}"
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def llm_target(pytestconfig: pytest.Config) -> LLM:
    """The target model: ``.ask(prompt) -> str`` (and ``await .aask(prompt)``), through the store."""
    return _llm(pytestconfig, "target")


@pytest.fixture(scope="session")
def llm_baselines(pytestconfig: pytest.Config) -> tuple[LLM, ...]:
    """The baseline models, in configured order (each an ``LLM``)."""
    return _llm(pytestconfig, "baselines")


@pytest.fixture(scope="session")
def llm_judge(pytestconfig: pytest.Config) -> LLM:
    """The judge model (an ``LLM``)."""
    return _llm(pytestconfig, "judge")
