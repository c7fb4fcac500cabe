"""Every exception class of the package lives in ``pytest_llmbias.errors``."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest_llmbias
from pytest_llmbias import errors

PACKAGE = Path(pytest_llmbias.__file__).resolve().parent


def _exception_classes_outside_errors() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(b) for b in node.bases]
            if node.name.endswith("Error") or any(
                b.split(".")[-1] in ("Exception", "ValueError") or b.endswith("Error") for b in bases
            ):
                found.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.name}")
    return found


def test_no_exception_class_is_defined_outside_errors() -> None:
    assert _exception_classes_outside_errors() == []


def test_errors_exports_every_exception_it_defines() -> None:
    defined = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == errors.__name__
    }
    assert defined == set(errors.__all__)
    assert all(issubclass(getattr(errors, name), errors.LLMBiasError) for name in defined - {"LLMBiasWarning"})
    assert issubclass(errors.LLMBiasWarning, UserWarning)


def test_base_classes_are_kept() -> None:
    assert issubclass(errors.StatisticsError, errors.LLMBiasError) and issubclass(errors.StatisticsError, ValueError)
    assert issubclass(errors.JudgeDataError, errors.LLMBiasError) and issubclass(errors.JudgeDataError, ValueError)
    assert issubclass(errors.FeatureError, errors.ScorerError)
    assert issubclass(errors.DomainError, errors.ConfigError)
    assert errors.JudgeParseError("bad", raw="x").raw == "x"


def test_errors_imports_nothing_heavy() -> None:
    code = "import sys, pytest_llmbias.errors; print(sorted(m for m in sys.modules if m.startswith('pytest_llmbias')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['pytest_llmbias', 'pytest_llmbias.errors']"
    tree = ast.parse((PACKAGE / "errors.py").read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [getattr(n, "module", None) for n in imports] == ["__future__"]
