"""What the run hands a pipeline at its end, in the controller only: the MLflow run and registry
gate (:mod:`pytest_llmbias.report.tracking`), GitHub's annotations
(:mod:`pytest_llmbias.report.annotations`) and the run's JUnit XML properties.

JUnit XML: pytest writes the ``xunit2`` family by default, whose schema has no per-test
``<properties>``. The run-level properties (``llmbias.target``, ``llmbias.comparator``,
``llmbias.plugin_version``, ``llmbias.suite.alpha``, ``llmbias.verdict``) go on the test suite, as
``record_testsuite_property`` puts them, in every family; each gate's row (the ``llmbias`` user
property, JSON, its test id in it) stays on its test case under ``xunit1``/``legacy`` and moves
to the test suite, under the same name, under ``xunit2``.

Loading this module imports only the standard library and pytest.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from pytest_llmbias.plugin.failures import report_late  # pytest only


def _junit(config: pytest.Config) -> Any:
    from _pytest.junitxml import xml_key

    return config.stash.get(xml_key, None)


def drop_row_property(config: pytest.Config, report: pytest.TestReport, name: str) -> None:
    """Take the gate row's user property ``name`` off the test's report where the JUnit XML being
    written is ``xunit2`` (its schema forbids a test case's properties); the run has read it."""
    xml = _junit(config)
    if xml is not None and getattr(xml, "family", None) == "xunit2" and report.user_properties:
        report.user_properties = [(n, v) for n, v in report.user_properties if n != name]


def add_junit_properties(reports: Any, row_name: str) -> None:
    """The run's properties on the JUnit XML test suite (controller only; a run without gates
    adds none); under ``xunit2`` each gate's row too, as ``row_name``."""
    xml = _junit(reports.config)
    record = reports._record
    if xml is None or reports.plugin.is_worker or record is None or not record.gate_docs:
        return
    settings = reports._run_settings()
    from pytest_llmbias import __version__
    from pytest_llmbias.report.tracking.run_log import gate_outcome

    outcomes = [gate_outcome({**e, "outcome": record.outcomes.get(t)}) for t, e in record.gate_docs.items()]
    strict = settings is not None and settings.suite.strict
    passed = all(o == "passed" or (o == "underpowered" and not strict) for o in outcomes)
    properties: dict[str, Any] = {
        "llmbias.plugin_version": __version__,
        "llmbias.verdict": "passed" if passed else "failed",
    }
    if settings is not None:
        release = settings.release.against
        properties["llmbias.target"] = settings.target.alias if settings.target else ""
        properties["llmbias.comparator"] = (
            f"release {release}" if release else "baselines " + ", ".join(b.alias for b in settings.baselines)
        )
        properties["llmbias.suite.alpha"] = "off" if settings.suite.alpha is None else settings.suite.alpha
    for name, value in properties.items():
        xml.add_global_property(name, value)
    if getattr(xml, "family", None) == "xunit2":
        for row in record.rows:
            xml.add_global_property(row_name, json.dumps(row, default=str))


def track(reports: Any, session: pytest.Session) -> None:
    """Log the run to MLflow when ``mlflow`` is on: one line says what was logged, or what failed
    (the verdicts stand; with ``mlflow.strict`` a failure fails the run)."""
    settings = reports._run_settings()
    record = reports.record
    if settings is None or not settings.mlflow.active or record.document is None:
        return
    from pytest_llmbias.report.tracking.publish import publish

    files = [*record.exported, *([reports.manifest] if reports.manifest is not None else [])]
    logged, line = publish(record.document, settings.mlflow, artifacts=files, rootdir=reports.config.rootpath)
    writer = reports.config.get_terminal_writer()
    if logged.ok or not settings.mlflow.strict:
        if writer.width_of_current_line:  # say, the progress line's [100%]
            writer.line()
        writer.line(line, **({} if logged.ok else {"yellow": True}))
    else:
        report_late(reports.config, session, f"pytest-llmbias: {line.removeprefix('llmbias: ')}")


def annotate(reports: Any) -> None:
    """With ``GITHUB_ACTIONS=true``: a workflow command per gate that failed or was underpowered."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    from pytest_llmbias.report.annotations import github_annotations

    record = reports.record
    entries = [{**e, "outcome": record.outcomes.get(t, "error")} for t, e in record.gate_docs.items()]
    writer = reports.config.get_terminal_writer()
    lines = github_annotations(entries, reports.locations)
    if lines and writer.width_of_current_line:  # a workflow command must start its line
        writer.line()
    for line in lines:
        writer.line(line)
