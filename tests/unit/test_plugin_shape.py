"""The plugin class stays thin: it translates pytest's hooks into calls on the core, and whole
concepts (the plan at collection, the core's opening, the reports, the terminal) live in modules of
their own under ``plugin/``."""

from __future__ import annotations

import ast
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[2] / "src" / "pytest_llmbias" / "plugin" / "__init__.py"

#: the most lines the ``_Plugin`` class may span
MAX_LINES = 200


def test_the_plugin_class_spans_at_most_200_lines() -> None:
    tree = ast.parse(PLUGIN.read_text(encoding="utf-8"))
    (plugin,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Plugin"]
    assert plugin.end_lineno is not None
    span = plugin.end_lineno - plugin.lineno + 1
    assert span <= MAX_LINES, f"_Plugin spans {span} lines; move a whole concept into a module of its own"
