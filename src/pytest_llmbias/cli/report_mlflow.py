"""``llmbias report RUN.json --mlflow [--mlflow-model NAME/VERSION]``: log a saved run to MLflow
later, as the plugin logs a live one (see :mod:`pytest_llmbias.report.tracking`), for pipelines
that gate the registry in a step of their own. The experiment, alias, tags and tracking URI are
the project's ``mlflow:`` settings (its ``llmbias.yaml``, found as the plugin finds it), else the
defaults; MLflow's own variables give the URI and the credentials.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any, TextIO

#: the exit codes of :mod:`pytest_llmbias.cli.command`: logged, or MLflow could not be written
OK, ERROR = 0, 3


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mlflow", action="store_true", help="log the run to MLflow (MLFLOW_TRACKING_URI; the mlflow extra)"
    )
    parser.add_argument(
        "--mlflow-model",
        metavar="NAME/VERSION",
        help="tag this registered model version with the verdicts and move the alias to it if every gate passed",
    )


def wanted(args: argparse.Namespace) -> bool:
    return bool(args.mlflow or args.mlflow_model)


def log_saved(args: argparse.Namespace, doc: Mapping[str, Any], out: TextIO) -> int:
    """Log the saved run ``doc`` (read from ``args.document``) with its report file as artifact;
    one line on ``out``. Exit code 3 when MLflow could not be written."""
    from pytest_llmbias.cli.project import Project
    from pytest_llmbias.report.tracking.publish import publish

    # the project's settings, as the plugin resolves them (a bad NAME/VERSION is a ConfigError)
    project = Project.find(cli={"mlflow": True, "mlflow_model": args.mlflow_model})
    logged, line = publish(
        doc, project.settings.mlflow, artifacts=[args.document], rootdir=project.root, environ=os.environ
    )
    print(line, file=out)
    return OK if logged.ok else ERROR
