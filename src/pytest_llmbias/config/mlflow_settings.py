"""The ``mlflow`` section: one MLflow run per session, and the registry gate (see
:mod:`pytest_llmbias.report.tracking` and docs/mlflow-and-ci.md).

Standard library only: MLflow itself is imported only when a run logs to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmbias.errors import ConfigError

#: the alias the registry gate moves to a version whose every gate passed
DEFAULT_ALIAS = "bias-approved"
DEFAULT_EXPERIMENT = "pytest-llmbias"
# MLflow's own rule for an alias: letters, digits, '-' and '_' (not "latest", not v<digits>)
_ALIAS = re.compile(r"^[A-Za-z0-9_-]{1,255}$")


@dataclass(frozen=True)
class MlflowSettings:
    """``enabled``: log the session as one MLflow run (``--llmbias-mlflow``); ``tracking_uri``: the
    tracking server (None: MLflow's own ``MLFLOW_TRACKING_URI``, else its default); ``experiment``;
    ``model``: the registered model version ``NAME/VERSION`` the run gates (``--llmbias-mlflow-model``;
    it turns logging on by itself); ``alias``: the alias that moves to that version only when every
    gate passed; ``tags``: added to the run; ``strict``: a logging failure fails the run
    (``--llmbias-mlflow-strict``), else it is one line and the verdicts stand."""

    enabled: bool = False
    tracking_uri: str | None = None
    experiment: str = DEFAULT_EXPERIMENT
    model: str | None = None
    alias: str = DEFAULT_ALIAS
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)
    strict: bool = False

    def __post_init__(self) -> None:
        if self.model is not None:
            model_version(self.model)
        if self.tracking_uri is not None and "@" in self.tracking_uri.partition("://")[2].partition("/")[0]:
            # the settings go into every report: a credential stays in MLflow's own variables
            raise ConfigError(
                "mlflow.tracking_uri must not carry a user or password: set MLFLOW_TRACKING_USERNAME and "
                "MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN, in the environment instead"
            )
        if not _ALIAS.match(self.alias) or self.alias == "latest" or re.fullmatch(r"[vV]\d+", self.alias):
            raise ConfigError(
                f"mlflow.alias must be letters, digits, '-' or '_' (not 'latest' nor v<number>: MLflow "
                f"reserves them), got {self.alias!r}"
            )

    @property
    def active(self) -> bool:
        """Whether the run logs to MLflow: ``enabled``, or a model version to gate."""
        return self.enabled or self.model is not None

    @property
    def model_name(self) -> str | None:
        return model_version(self.model)[0] if self.model else None

    @property
    def model_version(self) -> str | None:
        return model_version(self.model)[1] if self.model else None


def model_version(value: str) -> tuple[str, str]:
    """``NAME/VERSION`` split into the registered model's name and its version number;
    ConfigError unless the version is a positive integer and the name is not empty."""
    name, sep, version = str(value).rpartition("/")
    if not sep or not name.strip() or not version.isdigit() or int(version) < 1:
        raise ConfigError(
            f"mlflow.model must be NAME/VERSION, a registered model and one of its version numbers "
            f"(say my-model/3), got {value!r}"
        )
    return name, version


def parse_tags(raw: Any, where: str) -> dict[str, str]:
    """The ``mlflow.tags`` mapping checked: names and values scalars, made strings; ConfigError
    naming the key, prefixed by ``where`` (the file and line)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: 'mlflow.tags' must be a mapping of tag names to values, got {raw!r}")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f"{where}: 'mlflow.tags' has a name that is not a non-empty string: {key!r}")
        if isinstance(value, (Mapping, list, tuple)) or value is None:
            raise ConfigError(f"{where}: 'mlflow.tags.{key}' must be a string or a number, got {value!r}")
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out
