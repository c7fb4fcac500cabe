"""What a run records for its reports, merged across pytest-xdist workers, and the reports made
from it: the end-of-run summary's lines, the JSON document and HTML page, the CI step summary.

The plugin hands this record each gate's result, each test's outcome and what every worker sent;
it knows nothing of pytest. A worker sends :meth:`RunRecord.worker_output`; the controller takes
each with :meth:`RunRecord.merge_worker` and writes the reports once, for the whole run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_llmbias.config.settings import Settings
    from pytest_llmbias.planning.collector import CollectionReport
    from pytest_llmbias.session import BiasSession

#: the keys of a worker's output (pytest-xdist's ``workeroutput``)
WORKER_REPORTS = "llmbias_collection"
EXPORT_PARTS = "llmbias_export_parts"
RELEASE_PARTS = "llmbias_release_parts"
USAGE_ERROR = "llmbias_usage_error"
GATE_DOCS = "llmbias_gates"
USAGE = "llmbias_usage"
FINGERPRINTS = "llmbias_fingerprints"


def gate_entry(
    nodeid: str,
    name: str,
    domain: str,
    result: Any,
    *,
    against: str | None = None,
    suite: Mapping[str, Any] | None = None,
    table: bool = True,
    usage: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The end-of-run row and the JSON document's entry of one gate's ``result`` (a gate result,
    or the exception that stopped it), both JSON-friendly so that they cross pytest-xdist;
    ``against``: the release the marker named itself (``against=``), if any; ``suite``: the
    session's alpha, this gate's share of it (None: it keeps its own rate) and the method that
    gave it (see :meth:`~pytest_llmbias.engine.suite_levels.Share.to_dict`); ``table``: whether the
    entry keeps the result's per-item table, which only the JSON document and the HTML page read
    (a run that writes neither leaves it out: tens of thousands of rows in a large suite);
    ``usage``: the calls the gate's plan made and their cost (see
    :func:`~pytest_llmbias.planning.gate_usage.gate_usage`), kept as the entry's ``usage``."""
    if isinstance(result, Exception):
        row: dict[str, Any] = {"test": nodeid, "domain": domain, "error": str(result)}
        doc: dict[str, Any] = {
            "passed": None,
            "verdict": "error",
            "result": {"error": f"{type(result).__name__}: {result}"},
        }
    else:
        row = {**result.summary_row(nodeid), "passed": bool(result.passed)}
        domain = result.domain
        doc = {
            "passed": bool(result.passed),
            "verdict": str(result.verdict),
            "result": result.to_dict(),
            "report": result.report(),
            **({"table": result.table().to_dict()} if table else {}),
        }
    # Plain JSON types only: a result's enums (say, GroupBy) cannot cross pytest-xdist's channel.
    row, doc = json.loads(json.dumps(row, default=str)), json.loads(json.dumps(doc, default=str))
    return row, {
        "test": nodeid,
        "gate": name,
        "domain": str(domain),
        **doc,
        "row": row,
        **({"against": against} if against else {}),
        **(dict(suite) if suite is not None else {}),
        **({"usage": dict(usage)} if usage is not None else {}),
    }


def test_outcome(report: Any) -> str | None:
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


def describe_collection(report: Any) -> str:
    """One line on a collection: calls, where they came from, failures, time."""
    return (
        f"llmbias: {report.total} calls: {report.from_store} from store, {report.fetched} fetched, "
        f"{len(report.errors)} failed, {len(report.missing)} missing, in {report.elapsed_s:.1f}s"
        + (f" ({report.later} asked after the first look)" if getattr(report, "later", 0) else "")
    )


def collection_lines(report: Any, session: BiasSession | None, *, first: bool) -> list[str]:
    """The lines on a collection this process made: on the ``first``, the models' fingerprints
    (see :func:`~pytest_llmbias.store.fingerprints.fingerprint_lines`), then :func:`describe_collection`."""
    from pytest_llmbias.store.fingerprints import fingerprint_lines

    shown = fingerprint_lines(session.fingerprint_entries()) if first and session is not None else []
    return [*shown, describe_collection(report)]


def merge_fingerprints(total: dict[str, dict[str, Any]], more: Sequence[Mapping[str, Any]]) -> None:
    """Add the fingerprint entries ``more`` (a worker's, or this process's) into ``total``, one
    per alias: what the probes found is the same in every worker of a run (the first probed,
    the others read it); the answers served are added up, the probes asked counted once."""
    for entry in more:
        known = total.get(entry["alias"])
        if known is None:
            total[entry["alias"]] = {**entry, "served": dict(entry.get("served") or {})}
            continue
        for tag, n in (entry.get("served") or {}).items():
            known["served"][tag] = known["served"].get(tag, 0) + n
        known["probes"] = max(int(known.get("probes") or 0), int(entry.get("probes") or 0))


def add_usage(total: dict[str, dict[str, Any]], more: Mapping[str, Mapping[str, Any]]) -> None:
    """Add the per-model call usage ``more`` into ``total``."""
    for alias, u in more.items():
        entry = total.setdefault(alias, {"model": u["model"], "calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        for key in ("calls", "prompt_tokens", "completion_tokens"):
            entry[key] += int(u[key])


@dataclass
class RunRecord:
    """Everything of a run that its reports need, in the process that writes them."""

    #: the end-of-run table's rows, one per gate (with the test id)
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: (test id, report text) of the gates that passed, shown with -v
    passed_reports: list[tuple[str, str]] = field(default_factory=list)
    #: the workers' collection reports, as dicts
    worker_reports: list[dict[str, Any]] = field(default_factory=list)
    #: export path -> the part files pytest-xdist workers wrote for it (controller only)
    export_parts: dict[str, list[str]] = field(default_factory=dict)
    #: the files this process wrote or merged, for the summary
    exported: list[Path] = field(default_factory=list)
    #: the part files of a recorded release that pytest-xdist workers wrote (controller only)
    release_parts: list[str] = field(default_factory=list)
    #: a usage error found in a pytest-xdist worker (in the worker, and then in the controller)
    usage_error: str | None = None
    #: test id -> the gate's entry of the JSON document (this process's, then the workers')
    gate_docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: test id -> the test's outcome, as the JSON document names it
    outcomes: dict[str, str] = field(default_factory=dict)
    #: alias -> usage of the calls made over the network (summed over workers)
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: alias -> the model's fingerprint entry (see :func:`merge_fingerprints`), the workers' merged
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: warnings on the run's reports (an HTML report without its plots), said once, as the
    #: end-of-run section's last lines: a warning of pytest's would name this module as its place
    notes: list[str] = field(default_factory=list)
    #: the run's JSON document as written (credentials masked), kept when a tracker logs it
    document: dict[str, Any] | None = None

    # -- pytest-xdist ------------------------------------------------------------------------

    def worker_output(self, session: BiasSession | None) -> dict[str, Any]:
        """What a worker sends the controller at its end, before its session closes."""
        out: dict[str, Any] = {}
        if self.usage_error is not None:
            out[USAGE_ERROR] = self.usage_error
        if session is not None:
            # one report a worker (its later rounds counted in ``later``), so that the merge's maxima are per worker
            reports = list(session.reports)
            for later in reports[1:]:
                reports[0] = reports[0].merged(later)
            out[WORKER_REPORTS] = [reports[0].to_dict()] if reports else []
            out[GATE_DOCS] = list(self.gate_docs.values())
            out[USAGE] = session.usage()
            out[FINGERPRINTS] = session.fingerprint_entries()
        return out

    @staticmethod
    def export_output(session: BiasSession) -> dict[str, Any]:
        """What a worker sends of its export, once its session has closed (and written it): the
        controller merges exactly the parts its workers name, never a stray file."""
        out: dict[str, Any] = {}
        if session.exported is not None:
            out[EXPORT_PARTS] = {str(session.settings.store.export): [str(session.exported)]}
        if session.recorded is not None:
            out[RELEASE_PARTS] = [str(session.recorded)]
        return out

    def merge_worker(self, output: Mapping[str, Any]) -> None:
        """Take what a finished worker sent (see :meth:`worker_output`)."""
        if self.usage_error is None:
            self.usage_error = output.get(USAGE_ERROR)
        self.worker_reports.extend(output.get(WORKER_REPORTS, ()))
        for entry in output.get(GATE_DOCS, ()):
            self.gate_docs[entry["test"]] = entry
        add_usage(self.usage, output.get(USAGE, {}))
        merge_fingerprints(self.fingerprints, output.get(FINGERPRINTS, ()))
        for export, parts in output.get(EXPORT_PARTS, {}).items():
            self.export_parts.setdefault(export, []).extend(parts)
        self.release_parts.extend(output.get(RELEASE_PARTS, ()))

    def finish_exports(self, session: BiasSession | None) -> None:
        """In the controller (or a run without workers): note this process's export and merge the
        workers' export parts into their files."""
        if session is not None and session.exported is not None:
            self.exported.append(session.exported)
        if self.export_parts:
            from pytest_llmbias.store.snapshot import merge_export_parts

            for export_path, parts in self.export_parts.items():
                merge_export_parts(Path(export_path), [Path(p) for p in parts])
                self.exported.append(Path(export_path))

    # -- the reports -------------------------------------------------------------------------

    def collections(self, session: BiasSession | None) -> list[CollectionReport]:
        """This process's collection reports, and one merged report of the workers'."""
        reports = list(session.reports) if session is not None else []
        if self.worker_reports:
            from pytest_llmbias.planning.collector import CollectionReport, merge_worker_reports

            reports.append(merge_worker_reports([CollectionReport.from_dict(r) for r in self.worker_reports]))
        return reports

    def fingerprint_entries(self, session: BiasSession | None) -> list[dict[str, Any]]:
        """The run's fingerprint entries: this process's and its workers', one per alias."""
        total = {alias: {**e, "served": dict(e["served"])} for alias, e in self.fingerprints.items()}
        merge_fingerprints(total, session.fingerprint_entries() if session is not None else [])
        return list(total.values())

    def summary(
        self, session: BiasSession | None, verbosity: int, *, collection_shown: bool = False
    ) -> list[tuple[str, str]] | None:
        """The end-of-run ``llmbias`` section as (``"line"`` or ``"sep"``, text) pairs: the
        collections (unless ``collection_shown``: their line is on screen already) and the tokens
        fetched, the gates' table — one that fits 100 columns, the full one with -v, the gates that
        did not pass only with -q — the session's one-line false-alarm figure, with -v the reports of
        the gates that passed, the files written, and the warnings on them (:attr:`notes`). None: no
        section."""
        reports = self.collections(session)
        if not reports and not self.rows and not self.exported:
            return None
        lines: list[str] = []
        if verbosity >= 0:
            if not collection_shown:
                from pytest_llmbias.store.fingerprints import fingerprint_lines

                lines += [*fingerprint_lines(self.fingerprint_entries(session)), *map(describe_collection, reports)]
            if self.usage:
                from pytest_llmbias.clients.pricing import price

                tokens = sum(u["prompt_tokens"] + u["completion_tokens"] for u in self.usage.values())
                costs = [price(u["model"], u["prompt_tokens"], u["completion_tokens"]) for u in self.usage.values()]
                cost = (
                    "cost unknown (a model is not in litellm's price map)"
                    if None in costs
                    else f"${sum(c for c in costs if c is not None):.4f}"
                )
                lines.append(f"llmbias: {tokens:,} tokens fetched this run, {cost}")
        if self.rows:
            from pytest_llmbias.report.rows import count
            from pytest_llmbias.report.suite import suite_figures
            from pytest_llmbias.report.terminal import compact_table, gate_table

            if verbosity > 0:
                lines += gate_table(self.rows, self.outcomes)
            else:
                shown = self.rows if verbosity == 0 else [r for r in self.rows if not r.get("passed", False)]
                lines += compact_table(shown, outcomes=self.outcomes) if shown else []
                if verbosity == 0:
                    lines.append("(-v: every figure and the reports of the gates that passed)")
            # the gates as every report counts them: once each, whatever the table's rows
            lines.append(f"llmbias: {count(self.rows, self.outcomes).sentence()}")
            suite = suite_figures(self.gate_docs.values())
            if suite is not None:
                import textwrap

                later = sum(getattr(r, "later", 0) for r in reports)
                summary = f"llmbias: {suite['summary']}; {later} call{'s' if later != 1 else ''} beyond the first look"
                if verbosity > 0:  # unwrapped, and the rates behind it gate by gate
                    lines += [summary, f"llmbias: {suite['sentence']}"]
                else:  # one sentence, wrapped to the terminal's usual width
                    lines += textwrap.wrap(summary, 100, subsequent_indent="  ")
        out = [("line", line) for line in lines]
        for nodeid, text in sorted(self.passed_reports) if verbosity > 0 else ():
            out += [("sep", nodeid), *(("line", line) for line in text.splitlines())]
        what = {
            ".json": "the run's JSON document is written",
            ".html": "the run's HTML report is written",
            ".md": "the run's Markdown report is written",
        }
        if verbosity >= 0:
            out += [
                ("line", f"llmbias: {what.get(p.suffix, 'responses used are exported')} to {p}") for p in self.exported
            ]
        return out + [("line", f"llmbias: warning: {note}") for note in self.notes]

    def append_history(
        self, settings: Settings, rootdir: Path, loaded: Mapping[str, Any] | None = None
    ) -> tuple[Path | None, str | None]:
        """Append this run's gate figures to the run history (see :mod:`pytest_llmbias.report.history`).
        Returns the database's path (None when the history is off) and a warning when it could not
        be written. ``loaded``: the domains the session loaded, by name (not loaded again)."""
        import datetime
        import uuid

        from pytest_llmbias.releases.release import domain_hashes, git_commit
        from pytest_llmbias.report.history import append, domain_hash, gate_rows, history_path

        value = settings.report.history
        path = history_path(value, settings.store.dir)
        if path is None or not self.gate_docs:
            return None, None
        if not path.is_absolute():
            path = rootdir / path
        # an unloadable domain has no hash: its gate errored and says why
        hashes = {
            name: domain_hash(items)
            for name, items in domain_hashes(
                (str(e.get("domain")) for e in self.gate_docs.values()),
                settings.domains.paths,
                skip_broken=True,
                benchmarks=settings.domains,
                loaded=loaded,
            ).items()
        }
        created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        rows = gate_rows(self.gate_docs.values(), hashes)
        warning = append(
            path,
            rows,
            run=uuid.uuid4().hex[:12],
            created=created,
            git_commit=git_commit(rootdir),
            target=settings.target.alias if settings.target else None,
            release=settings.release.against,
        )
        return path, warning

    def step_summary(self, path: str) -> None:
        """Append the run in Markdown (see :mod:`pytest_llmbias.report.markdown`) to a CI step
        summary (GitHub's)."""
        from pytest_llmbias.report.markdown import markdown_report

        entries = [{**e, "outcome": self.outcomes.get(t, "error")} for t, e in self.gate_docs.items()]
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(markdown_report(entries))

    def write_reports(
        self,
        settings: Settings,
        session: BiasSession | None,
        *,
        version: str,
        generate: Callable[[dict[str, Any]], None],
        update: Callable[[dict[str, Any]], None],
        figures_for: Callable[[Mapping[str, Any]], Sequence[Any]] | None = None,
        history: Path | None = None,
    ) -> None:
        """Write the run's JSON document and HTML page where ``settings.report`` says, credentials
        masked in both; the page is rendered from the document. ``generate`` and ``update`` extend
        one gate's entry and the whole document (the plugin's hooks); ``figures_for`` draws a
        gate's plots (default: the registry's gates); ``history`` (the run history's database)
        adds each gate's recorded rows, for its trend plot. With ``mlflow`` on, the document is
        built (and kept in :attr:`document`) even when no file is asked for."""
        from pytest_llmbias.clients.pricing import price
        from pytest_llmbias.config.redaction import Redactor
        from pytest_llmbias.report import json_report

        json_path, html_path, md_path = settings.report.json, settings.report.html, settings.report.markdown
        if json_path is None and html_path is None and md_path is None and not settings.mlflow.active:
            return
        usage = {
            alias: {
                "calls": u["calls"],
                "prompt_tokens": u["prompt_tokens"],
                "completion_tokens": u["completion_tokens"],
                "cost_usd": price(u["model"], u["prompt_tokens"], u["completion_tokens"]),
            }
            for alias, u in self.usage.items()
        }
        gates = []
        recorded: list[dict[str, Any]] = []
        if history is not None:
            import sqlite3

            from pytest_llmbias.report.history import read

            try:
                recorded = read(history, last=20)
            except sqlite3.Error:
                recorded = []
        for nodeid, entry in self.gate_docs.items():
            entry = {**entry, "outcome": self.outcomes.get(nodeid, "error")}
            if recorded:
                entry["history"] = [r for r in recorded if r["test"] == nodeid]
            generate(entry)
            gates.append(entry)
        doc = json_report.document(
            settings=settings.to_dict(),
            plan=json_report.plan_figures(self.collections(session), usage),
            gates=gates,
            version=version,
            fingerprints=self.fingerprint_entries(session),
        )
        update(doc)
        redactor = Redactor.for_models([*settings.roster, *settings.panel])
        if settings.mlflow.active:  # what the tracker logs is what the reports say
            self.document = json.loads(redactor(json.dumps(doc, default=str)))
        if json_path is not None:
            json_report.write(json_path, doc, redactor)
            self.exported.append(json_path)
        if html_path is not None:
            from pytest_llmbias.report import html

            missing = html.plots_missing()
            if missing is not None:  # the page says it at its top, the end-of-run section once
                self.notes.append(f"HTML report: {missing}")
            html.write(html_path, doc, redactor, figures_for=figures_for)
            self.exported.append(html_path)
        if md_path is not None:
            from pytest_llmbias.report.markdown import markdown_report

            md_path.parent.mkdir(parents=True, exist_ok=True)
            md_path.write_text(redactor(markdown_report(doc["gates"])), encoding="utf-8")
            self.exported.append(md_path)
