from __future__ import annotations

import ast
from pathlib import Path

import pytest_llmbias

PACKAGE = Path(pytest_llmbias.__file__).resolve().parent
GLUE = ("plugin", "fixtures.py", "hookspecs.py")  # the pytest glue: the plugin package, its fixtures and hooks
CORE_FILES = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in GLUE)


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_core_files_found() -> None:
    names = {p.relative_to(PACKAGE).as_posix() for p in CORE_FILES}
    assert {
        "config/settings.py",
        "store/calls.py",
        "markers.py",
        "store/response_store.py",
        "clients/litellm_client.py",
    } <= names
    assert not any(n.startswith("plugin/") for n in names)
    assert (PACKAGE / "plugin" / "__init__.py").is_file()


def test_core_does_not_import_pytest() -> None:
    offenders = {
        p.relative_to(PACKAGE).as_posix(): sorted(r for r in imported_roots(p) if r in ("pytest", "_pytest"))
        for p in CORE_FILES
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert offenders == {}


def test_checker_sees_imports(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("import os\nif True:\n    import pytest\nfrom _pytest.fixtures import x\nfrom . import y\n")
    assert imported_roots(sample) == {"os", "pytest", "_pytest"}
