"""How the selected tests use the plugin's markers, checked before anything is planned: a marker
named like the plugin's but unknown (a misspelt ``bias_equivalant``), and a marker of the plugin
given twice to one test, are usage errors naming the test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_llmbias.catalog import MarkerRegistry

#: the prefix of every marker the plugin declares; another marker with it is taken for a misspelling
PREFIX = "bias_"


def check_marker_use(
    config: pytest.Config,
    registry: MarkerRegistry,
    items: Sequence[pytest.Item],
    marked: Sequence[tuple[pytest.Item, str, pytest.Mark]],
) -> None:
    """Raise :class:`~pytest_llmbias.errors.ConfigError` naming the test for the first of:

    - a ``bias_*`` marker that neither the plugin (its gates, those a conftest adds included) nor the
      project's ``markers`` configuration declares: the error names the closest of the plugin's
      markers (difflib), since pytest itself would only warn of an unknown mark and run the test
      without its gate;
    - one of the plugin's markers given twice to one test (on the function, its class, its module or
      a parameter; ``marked`` holds the markers found): pytest would read the closest one alone, and
      the other's check would go unheard."""
    ours = [d.name for d in registry.docs]
    declared = set(ours) | _declared(config)
    for item in items:
        for mark in item.iter_markers():
            if mark.name.startswith(PREFIX) and mark.name not in declared:
                _unknown(item.nodeid, mark.name, ours)
    for item, name, _ in marked:
        count = sum(1 for _ in item.iter_markers(name))
        if count > 1:
            from pytest_llmbias.errors import ConfigError

            raise ConfigError(
                f"{item.nodeid} carries @pytest.mark.{name} {count} times: a test gives one verdict per gate, "
                "and only the closest marker would be read; give each its own test (or parametrize one test "
                "with pytest.param(..., marks=...))"
            )


def _declared(config: pytest.Config) -> set[str]:
    """The marker names the project's ``markers`` configuration declares (as pytest reads them)."""
    lines: Any = config.getini("markers")
    return {line.split(":")[0].split("(")[0].strip() for line in lines}


def _unknown(nodeid: str, name: str, ours: Sequence[str]) -> None:
    import difflib

    from pytest_llmbias.errors import ConfigError

    # compared without the prefix they share, which would make every bias_* name look close
    rest = {n.removeprefix(PREFIX): n for n in ours}
    close = difflib.get_close_matches(name.removeprefix(PREFIX), list(rest), n=1, cutoff=0.6)
    guess = f"did you mean @pytest.mark.{rest[close[0]]}? " if close else ""
    raise ConfigError(
        f"{nodeid}: unknown marker @pytest.mark.{name}: {guess}The plugin's markers: {', '.join(ours)}. "
        f"A marker of the project's own whose name starts with {PREFIX!r} is declared under 'markers' in the "
        "pytest configuration"
    )
