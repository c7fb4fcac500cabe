"""One user-facing option and each of its spellings (:class:`Option`): the flag, the environment
variable, the ini key and the key of ``llmbias.yaml``; the kinds of values an option takes. The
table of every option is :data:`pytest_llmbias.config.option_table.OPTIONS`.

Standard library only: the plugin imports this module whenever pytest loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pytest_llmbias.choices import Choice

#: how a value is parsed and checked; see ``option_values._check_option``
KINDS = (
    "path",
    "optpath",
    "paths",
    "model",
    "models",
    "posint",
    "nonnegint",
    "posfloat",
    "fraction",
    "alpha",
    "bool",
    "choice",
    "str",
)
#: kinds whose value is a list: a repeatable flag, a separated environment variable, an ini line list
LIST_KINDS = ("paths", "models")


#: answers per gate a judge rates twice, and the least test-retest agreement accepted (chosen by
#: ``benchmarks/validity.py --gate judge-noise``; see the validity table in docs/judge.md)
RETEST_DEFAULT = 20
MIN_AGREEMENT_DEFAULT = 0.5


@dataclass(frozen=True)
class Option:
    """One option and each of its spellings.

    ``name`` is the common part of the spellings: flag ``--llmbias-<name>`` (singular for a
    repeatable flag, which takes one value per use), environment variable ``LLMBIAS_<NAME>``, ini key
    ``llmbias_<name>``. ``key`` is where the value lands in :class:`~pytest_llmbias.config.settings.Settings`
    (and its key in ``llmbias.yaml``). ``default`` is the settings default, shown in the help.
    ``separator`` splits a list from the environment; an ini list has one item per line.
    """

    name: str
    key: str
    kind: str
    help: str
    flag: str
    env: str
    ini: str
    metavar: str | None = None
    default: Any = None
    choices: type[Choice] | None = None
    separator: str | None = None

    @property
    def repeatable(self) -> bool:
        """True when the value is a list (the flag is repeated, the variable separated)."""
        return self.kind in LIST_KINDS

    @property
    def dest(self) -> str:
        """The attribute of ``config.option`` that holds the command-line value."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def help_text(self) -> str:
        """The help, with the default when it says something (not None, empty or False)."""
        if self.default in (None, (), False):
            return self.help
        return f"{self.help} (default: {self.default})"

    def argparse_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``addoption``. A value left off the command line reads as None,
        ``[]`` for a repeatable flag, False for a switch."""
        # argparse formats the help with %: a literal percent sign is written twice
        kwargs: dict[str, Any] = {
            "help": (self.help_text + ("; repeatable" if self.repeatable else "")).replace("%", "%%")
        }
        if self.kind == "bool":
            return {**kwargs, "action": "store_true", "default": False}
        if self.metavar:
            kwargs["metavar"] = self.metavar
        if self.repeatable:
            kwargs.update(action="append", default=[])
        if self.kind in ("posint", "nonnegint"):
            kwargs["type"] = int
        if self.kind in ("posfloat", "fraction"):
            kwargs["type"] = float
        if self.choices is not None:
            kwargs["choices"] = self.choices.values()
        return kwargs

    @property
    def ini_type(self) -> Literal["linelist", "string"]:
        """The ``addini`` type: one item per line for a list, else a string parsed as the
        environment variable is (so that a bad value is reported with its key and accepted values)."""
        return "linelist" if self.repeatable else "string"

    @property
    def ini_default(self) -> Any:
        """What ``getini`` returns when the key is absent: empty, meaning "not set"."""
        return [] if self.repeatable else ""

    @property
    def ini_help(self) -> str:
        """The help of the ini key: the option's, saying how a list is written and what a relative
        path is relative to."""
        text = self.help_text + ("; one per line" if self.repeatable else "")
        if self.kind in ("path", "optpath", "paths"):
            text += "; relative to the rootdir"
        return text
