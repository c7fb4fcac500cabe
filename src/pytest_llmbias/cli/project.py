"""The project an ``llmbias`` command runs in: its settings file, found as pytest finds it, and the
folders the commands default to (the store, the releases, the run history, the domain paths).

pytest's rootdir is the first folder, from the current one upwards, that holds an ini file
(``pytest.ini``, ``.pytest.ini``, ``pyproject.toml``, ``tox.ini``, ``setup.cfg``) or an
``llmbias.yaml`` or, failing that, the current folder. The settings file is ``--config``, else ``$LLMBIAS_CONFIG``, else
``llmbias.yaml`` in the rootdir; the environment's ``LLMBIAS_*`` variables apply as in a run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pytest_llmbias.config.settings import Settings

_INI_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def rootdir(cwd: Path) -> Path:
    """The folder pytest would take as the rootdir, from ``cwd`` (see the module docstring)."""
    for folder in (cwd, *cwd.parents):
        if any((folder / name).is_file() for name in _INI_FILES) or (folder / "llmbias.yaml").is_file():
            return folder
    return cwd


@dataclass(frozen=True)
class Project:
    """The settings of the project a command runs in (defaults where it has no settings file)."""

    settings: Settings
    root: Path

    @classmethod
    def find(
        cls,
        config: Path | None = None,
        cwd: Path | None = None,
        *,
        root: Path | None = None,
        cli: Mapping[str, Any] | None = None,
    ) -> Project:
        """The project of ``cwd`` (default: the current folder), its rootdir found upwards unless
        ``root`` names it; ``cli`` holds option values given on the command (by option name, as
        :func:`~pytest_llmbias.config.settings_sources.resolve_settings` takes them)."""
        from pytest_llmbias.config.settings_sources import find_config, resolve_settings

        cwd = (cwd or Path.cwd()).resolve()
        root = root.resolve() if root is not None else rootdir(cwd)
        path = find_config(
            cli_path=str(config) if config else None, ini_path=None, environ=os.environ, rootdir=root, cwd=cwd
        )
        return cls(resolve_settings(cli=cli, config_path=path, environ=os.environ, cwd=cwd), root)

    @property
    def store(self) -> Path:
        return self.settings.store.dir if self.settings.store.dir.is_absolute() else self.root / self.settings.store.dir

    @property
    def snapshots(self) -> tuple[Path, ...]:
        return self.settings.store.snapshots

    @property
    def releases(self) -> Path:
        d = self.settings.release.dir
        return d if d.is_absolute() else self.root / d

    @property
    def history(self) -> Path:
        given = self.settings.report.history
        if given and given != "off":
            return Path(given) if Path(given).is_absolute() else self.root / given
        return self.store / "history.sqlite"

    @property
    def domain_paths(self) -> tuple[Path, ...]:
        return self.settings.domains.paths


#: an example per command, shown at the end of its ``--help``
EXAMPLES = {
    "domains list": "llmbias domains list --path bias_domains/",
    "domains show": "llmbias domains show countries",
    "domains validate": "llmbias domains validate bias_domains/*.yaml",
    "store stats": "llmbias store stats                      "
    "# the project's store (llmbias.yaml: store.url or store.dir)",
    "store verify": "llmbias store verify --snapshot snapshots/demo.jsonl",
    "store check": "llmbias store check --store .llmbias     # exit status 1 when it is damaged; changes nothing",
    "store repair": "llmbias store repair --store .llmbias",
    "store export": "llmbias store export used.jsonl",
    "store import": "llmbias store import snapshots/baselines.jsonl",
    "store migrate": "llmbias store migrate --to redis://ci-redis:6379/0   # the folder's answers into the team store",
    "store clear": "llmbias store clear --yes",
    "store batches": "llmbias store batches --cancel batch_abc123   # the open batches; cancel one",
    "release list": "llmbias release list",
    "release show": "llmbias release show v1",
    "history": "llmbias history --gate bias_equivalent --last 10",
    "report": "llmbias report out/run.json --markdown",
    "init": (
        "llmbias init --target openai/gpt-4o-mini --baseline openai/gpt-4o --baseline anthropic/claude-haiku-4-5 "
        "--judge openai/gpt-4.1-mini"
    ),
    "serve": "llmbias serve smollm2-135m --port 8000   # prints READY 8000 once the model answers",
    "generate-domain": (
        "llmbias generate-domain --name my_topics --description 'How a model discusses X' "
        "--category 'First theme' --category 'Second theme' --questions 10"
    ),
}


def epilog(command: str) -> str:
    """The ``--help`` epilog of ``command``: its example."""
    return f"example:\n  {EXAMPLES[command]}"
