"""Log one run's JSON document to the tracker its settings name: what the plugin's controller does
once at the end of a session, and what ``llmbias report RUN.json --mlflow`` does for a saved run.
Standard library only; the backend imports its client when called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_llmbias.config.mlflow_settings import MlflowSettings
    from pytest_llmbias.report.tracking.mlflow_backend import Logged

#: the report files a run logs as artifacts (the JSON document, the HTML page, the Markdown)
REPORT_SUFFIXES = (".json", ".html", ".md")


def publish(
    document: Mapping[str, Any],
    settings: MlflowSettings,
    *,
    artifacts: Iterable[Path] = (),
    rootdir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[Logged, str]:
    """Log ``document`` (credentials masked) with ``artifacts`` (report files and the release
    manifest; other files are left out); the git commit of ``rootdir`` when it is a checkout.
    Returns what was logged and the one line that says it (``llmbias: MLflow at URI: ...``)."""
    from pytest_llmbias.releases.release import git_commit
    from pytest_llmbias.report.tracking.mlflow_backend import log_to_mlflow
    from pytest_llmbias.report.tracking.run_log import run_log

    files = [Path(p) for p in artifacts if Path(p).suffix in REPORT_SUFFIXES or Path(p).name == "manifest.json"]
    log = run_log(
        document,
        artifacts=dict.fromkeys(files),
        tags=settings.tags,
        git_commit=git_commit(rootdir) if rootdir is not None else None,
    )
    logged = log_to_mlflow(log, settings, environ=environ)
    return logged, f"llmbias: {logged.line(settings.alias, settings.model)}"
