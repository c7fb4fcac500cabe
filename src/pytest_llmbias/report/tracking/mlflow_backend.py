"""A :class:`~pytest_llmbias.report.tracking.run_log.RunLog` onto MLflow: one run (nested under the
pipeline's active run, if it opened one), its params, metrics, tags and artifacts, status FAILED
when a gate failed; then the registry gate: the model version's tags, and its alias moved to it
only when every gate passed (a failing run never moves it, and never takes it from an earlier
version).

MLflow (``mlflow-skinny``, the ``mlflow`` extra) is imported inside :func:`log_to_mlflow` only. The
tracking URI is ``mlflow.tracking_uri`` or MLflow's own (``MLFLOW_TRACKING_URI``); credentials are
MLflow's own variables (``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_USERNAME``/``PASSWORD``),
never read or written here. A failure is returned, not raised: the caller says it in one line.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.config.mlflow_settings import MlflowSettings
from pytest_llmbias.report.tracking.names import key
from pytest_llmbias.report.tracking.run_log import RunLog

#: MLflow's HTTP retries, lowered for this logging unless the environment sets them: MLflow's own
#: (7 retries, backoff factor 2, 120 s a request) would hold a pipeline for minutes on a server
#: that is down. With these a down server is said in about 3 s, a hung one in about 50 s.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
    # the run's link is in the plugin's own line: MLflow's "View run" lines would break the terminal's
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
#: where the reports go in the run's artifacts
ARTIFACT_DIR = "llmbias"


@dataclass(frozen=True)
class Logged:
    """What logging did: the tracking ``uri``; the ``run_id`` (None when no run was created);
    ``written``, each step done, in order (``run``, ``params``, ``metrics``, ``artifacts``,
    ``status``, ``version tags``, ``alias``); ``again``: the same session was logged before and
    that run is reused; ``error``: the step that failed and why (None: every step done);
    ``approved``: whether the alias moved (None: no model version named)."""

    uri: str
    run_id: str | None
    written: tuple[str, ...]
    error: str | None = None
    again: bool = False
    approved: bool | None = None
    link: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self, alias: str, model: str | None) -> str:
        """The one line the terminal shows."""
        if self.error is not None:
            done = f"written: {', '.join(self.written)}" if self.written else "nothing was written"
            run = f" (run {self.run_id})" if self.run_id else ""
            return f"MLflow at {self.uri}: {self.error}; {done}{run}; the verdicts stand"
        what = "already logged as run" if self.again else "logged run"
        line = f"MLflow at {self.uri}: {what} {self.run_id}"
        if model is not None:
            line += (
                f"; {model} tagged, alias {alias!r} moved to it"
                if self.approved
                else f"; {model} tagged, alias {alias!r} not moved (a gate did not pass)"
            )
        return line


@contextlib.contextmanager
def _http_defaults(environ: Mapping[str, str]) -> Iterator[None]:
    added = [name for name in HTTP_DEFAULTS if name not in environ]
    for name in added:
        os.environ[name] = HTTP_DEFAULTS[name]
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _why(exc: BaseException) -> str:
    """An MLflow error in a few words: its class and the first line of its message, with the
    HTTP status where MLflow gives one (a refused token reads 401 or 403)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > 240:
        text = text[:237] + "..."
    code = getattr(exc, "error_code", None)
    return f"{type(exc).__name__}{f' {code}' if code else ''}: {text}" if text else type(exc).__name__


def tracking_uri(settings: MlflowSettings, environ: Mapping[str, str]) -> str:
    """The tracking URI: ``mlflow.tracking_uri``, else ``MLFLOW_TRACKING_URI``, else MLflow's
    default (its local store)."""
    if settings.tracking_uri:
        return settings.tracking_uri
    if environ.get("MLFLOW_TRACKING_URI"):
        return environ["MLFLOW_TRACKING_URI"]
    from mlflow.tracking import get_tracking_uri

    return str(get_tracking_uri())


def _parent_run(environ: Mapping[str, str]) -> str | None:
    """The pipeline's own run, if it opened one: the active run of this process, or the run a
    parent process named in ``MLFLOW_RUN_ID`` (``mlflow run``, a pipeline step)."""
    import mlflow

    active = mlflow.active_run()
    if active is not None:
        return str(active.info.run_id)
    return environ.get("MLFLOW_RUN_ID") or None


def _link(uri: str, experiment_id: str, run_id: str) -> str:
    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    return f"runs:/{run_id}/{ARTIFACT_DIR}"


def log_to_mlflow(log: RunLog, settings: MlflowSettings, *, environ: Mapping[str, str] | None = None) -> Logged:
    """Log ``log`` as one run of ``settings.experiment`` (created if missing), then gate
    ``settings.model``, if any. A session logged before (the same :attr:`RunLog.key` in the
    experiment) is not logged twice: its run is reused and the registry step is done again,
    which changes nothing the first time did not. Never raises for MLflow's failures: the
    returned :class:`Logged` says which step failed and what had been written."""
    environ = os.environ if environ is None else environ
    written: list[str] = []
    run_id: str | None = None
    uri = settings.tracking_uri or environ.get("MLFLOW_TRACKING_URI") or "(MLflow's default)"
    step = "import"
    try:
        uri = tracking_uri(settings, environ)
        with _http_defaults(environ):
            from mlflow.entities import Metric, Param, RunStatus
            from mlflow.tracking import MlflowClient

            client = MlflowClient(tracking_uri=uri, registry_uri=uri)
            step = "experiment"
            experiment = client.get_experiment_by_name(settings.experiment)
            experiment_id = (
                experiment.experiment_id
                if experiment is not None
                else client.create_experiment(settings.experiment, tags={key("created_by"): "pytest-llmbias"})
            )
            step = "run"
            found = client.search_runs(
                [experiment_id], filter_string=f"tags.`{key('run_key')}` = '{log.key}'", max_results=1
            )
            again = bool(found)
            if again:
                run_id = found[0].info.run_id
                written.append("run (logged before)")
            else:
                tags = dict(log.tags)
                parent = _parent_run(environ)
                if parent is not None:
                    tags["mlflow.parentRunId"] = parent
                run = client.create_run(experiment_id, tags=tags, run_name=log.run_name)
                run_id = run.info.run_id
                written.append("run")
                step = "params"
                client.log_batch(run_id, params=[Param(k, v) for k, v in log.params.items()])
                written.append("params")
                step = "metrics"
                stamp = int(run.info.start_time or 0)
                client.log_batch(run_id, metrics=[Metric(k, v, stamp, 0) for k, v in log.metrics.items()])
                written.append("metrics")
                step = "artifacts"
                _log_artifacts(client, run_id, log)
                written.append("artifacts")
                step = "status"
                status = RunStatus.FINISHED if log.passed else RunStatus.FAILED
                client.set_terminated(run_id, RunStatus.to_string(status))
                written.append("status")
            link = _link(uri, experiment_id, run_id)
            approved = None
            if settings.model is not None:
                name, version = settings.model_name, settings.model_version
                assert name is not None and version is not None
                step = f"model version {settings.model}"
                client.get_model_version(name, version)  # a clear error when it does not exist
                for tag, value in log.version_tags(run_id, link).items():
                    client.set_model_version_tag(name, version, tag, value)
                written.append("version tags")
                approved = log.passed
                if approved:
                    step = f"alias {settings.alias!r}"
                    client.set_registered_model_alias(name, settings.alias, version)
                    written.append("alias")
            return Logged(uri, run_id, tuple(written), again=again, approved=approved, link=link)
    except ImportError as exc:
        why = f"MLflow is not installed ({exc.name}): pip install 'pytest-llmbias[mlflow]'"
        return Logged(uri, run_id, tuple(written), error=why)
    except Exception as exc:  # noqa: BLE001 - any failure of the tracker is said, never a verdict's change
        if run_id is not None and "status" not in written and _mark_failed(uri, run_id, environ):
            written.append("status FAILED")  # a run cut short is not left RUNNING
        return Logged(uri, run_id, tuple(written), error=f"{step} failed ({_why(exc)})")


def _mark_failed(uri: str, run_id: str, environ: Mapping[str, str]) -> bool:
    """Best effort: end a run whose logging failed part way as FAILED (False when that fails too)."""
    try:
        with _http_defaults(environ):
            from mlflow.tracking import MlflowClient

            MlflowClient(tracking_uri=uri).set_terminated(run_id, "FAILED")
        return True
    except Exception:  # noqa: BLE001 - the first failure is the one said
        return False


def _log_artifacts(client: Any, run_id: str, log: RunLog) -> None:
    """The report files (and the release manifest) under ``llmbias/``; without a JSON report
    among them, the run's JSON document as ``llmbias/llmbias-run.json``."""
    for path in log.artifacts:
        if path.is_file():
            client.log_artifact(run_id, str(path), ARTIFACT_DIR)
    if log.document is not None:
        with tempfile.TemporaryDirectory(prefix="llmbias-mlflow-") as tmp:
            doc = Path(tmp) / "llmbias-run.json"
            doc.write_text(log.document, encoding="utf-8")
            client.log_artifact(run_id, str(doc), ARTIFACT_DIR)
