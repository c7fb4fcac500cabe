"""Loading the plugin in a project that uses none of its markers costs nothing: no heavy import,
no file written, no connection opened."""

from __future__ import annotations

import pytest

#: the plugin's own modules that loading it may import: its fixtures, the hooks' specs, the options, the markers'
#: catalog, the exceptions and warning, how its errors are shown and its markers' use checked (pytest only), and
#: the run's record of outcomes and what it hands a pipeline at its end (all standard library only);
#: the core (settings, store, planning, gates...) must stay out
LIGHT = (
    "pytest_llmbias",
    "pytest_llmbias.plugin",
    "pytest_llmbias.plugin.reporting",
    "pytest_llmbias.plugin.screen",
    "pytest_llmbias.plugin.failures",
    "pytest_llmbias.plugin.ci",
    "pytest_llmbias.plugin.marker_use",
    "pytest_llmbias.fixtures",
    "pytest_llmbias.hookspecs",
    "pytest_llmbias.config",
    "pytest_llmbias.config.options",
    "pytest_llmbias.config.option_table",
    "pytest_llmbias.choices",
    "pytest_llmbias.catalog",
    "pytest_llmbias.errors",
    "pytest_llmbias.report",
    "pytest_llmbias.report.run_record",
)
HEAVY = (
    "litellm",
    "torch",
    "sentence_transformers",
    "textblob",
    "pandas",
    "scipy",
    "numpy",
    "diskcache",
    "yaml",
    "mlflow",
    "sqlalchemy",
)

CONFTEST = """
import socket, sys

CONNECTS = []

def _audit(event, args):
    if event in ("socket.connect", "socket.getaddrinfo"):
        CONNECTS.append((event, repr(args)[:200]))

sys.addaudithook(_audit)

def pytest_sessionfinish(session):
    heavy = [m for m in {heavy!r} if m in sys.modules]
    core = sorted(m for m in sys.modules if m.startswith("pytest_llmbias") and m not in {light!r})
    with open({report!r}, "w") as fh:
        fh.write(repr({{"heavy": heavy, "core": core, "connects": CONNECTS,
                        "plugin": session.config.pluginmanager.has_plugin("llmbias")}}))
"""


def test_unused_plugin_imports_nothing_heavy_writes_nothing_connects_nowhere(pytester: pytest.Pytester, tmp_path):
    report = tmp_path / "report.txt"
    project = pytester.mkdir("project")
    (project / "conftest.py").write_text(CONFTEST.format(heavy=HEAVY, light=LIGHT, report=str(report)))
    (project / "test_plain.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    before = sorted(p.relative_to(project) for p in project.rglob("*"))

    result = pytester.runpytest_subprocess(
        str(project), "-p", "no:cacheprovider", "-p", "no:pytester", "--rootdir", str(project)
    )

    result.assert_outcomes(passed=1)
    data = eval(report.read_text())  # written by the conftest above
    assert data["plugin"], "the llmbias plugin was not loaded through its entry point"
    assert data["heavy"] == []
    assert data["core"] == []
    assert data["connects"] == []
    after = sorted(p.relative_to(project) for p in project.rglob("*") if "__pycache__" not in p.parts)
    assert after == [p for p in before if "__pycache__" not in p.parts]


def test_an_llmbias_yaml_alone_does_not_wake_the_plugin(pytester: pytest.Pytester):
    """A settings file is read only when a marker or fixture needs it: even a broken one."""
    pytester.makefile(".yaml", llmbias="collection: {concurrency: many}\n")
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".llmbias").exists()
