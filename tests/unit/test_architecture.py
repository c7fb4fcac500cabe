"""The shape of the package: layers, cycles, module sizes and names.

Every ``import`` and ``from ... import`` anywhere in a module counts, inside functions and under
``if TYPE_CHECKING:`` too: a cycle that only closes at run time is still a cycle to a reader.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

PACKAGE = "pytest_llmbias"
ROOT = Path(__file__).resolve().parents[2] / "src" / PACKAGE

#: The layer order docs/development.md states, lowest first: a module may import its own layer or lower.
#: The longest matching prefix names a module's layer.
LAYERS: dict[str, int] = {
    # standard library only
    "errors": 0,
    "choices": 0,
    "catalog": 0,
    "config.yamlutil": 0,
    "clients.aio": 0,
    # a local model server, standalone (llmbias serve)
    "local": 0,
    # numpy and scipy; tables, plots and figures for a reader that know no gate
    "stats": 1,
    "report.frames": 1,
    "report.plots": 1,
    "report.readable": 1,
    # configuration and the data it names
    "config": 2,
    "releases": 2,
    "store.calls": 2,
    "store.alternatives": 2,
    "markers": 2,
    "domains": 2,
    # where answers are kept and fetched
    "store": 3,
    "clients": 3,
    # what is asked, and how answers are scored
    "planning": 4,
    "scoring": 4,
    # the service a gate uses
    "session": 5,
    "releases.view": 5,
    "llm": 5,
    # the gates: the comparison engine, the result base, one module (or a few) per gate, the registry
    "gates": 6,
    # reports of a run
    "report": 7,
    # the entry points
    "cli": 8,
    "plugin": 8,
    "spending": 8,
    "fixtures": 8,
    "hookspecs": 8,
    "__main__": 8,
    "": 8,
}

#: The modules the package root may hold; everything else lives in a folder named for its layer's concept.
ROOT_MODULES = {
    "__init__",
    "__main__",
    "fixtures",
    "hookspecs",
    "catalog",
    "markers",
    "errors",
    "choices",
    "session",
    "llm",
    "spending",
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The package module ``name`` (relative to the package) refers to, or None outside it."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    short = name[len(PACKAGE) + 1 :] if name != PACKAGE else ""
    while short not in MODULES:
        if not short:
            return ""
        short = short.rpartition(".")[0]
    return short


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(r for a in node.names if (r := _resolve(a.name)) is not None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([PACKAGE, *parts, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full.startswith(PACKAGE + ".") and full[len(PACKAGE) + 1 :] in MODULES:
                    out.add(full[len(PACKAGE) + 1 :])  # a submodule imported by name
                elif (resolved := _resolve(base)) is not None:
                    out.add(resolved)
    out.discard(module)
    return out


GRAPH: dict[str, set[str]] = {m: _imports(m) for m in MODULES}


def layer(module: str) -> int:
    best = max((p for p in LAYERS if p == "" or module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in MODULES if m and not any(m == p or m.startswith(p + ".") for p in LAYERS if p)]
    assert not unplaced, f"modules with no layer in LAYERS (and docs/development.md's table): {unplaced}"


def test_no_import_cycle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_imports_never_climb_the_layer_order() -> None:
    climbing = sorted(
        f"{a or PACKAGE} (layer {layer(a)}) imports {b or PACKAGE} (layer {layer(b)})"
        for a, targets in GRAPH.items()
        for b in targets
        if layer(b) > layer(a)
    )
    assert not climbing, "\n".join(climbing)


def test_the_core_never_imports_the_plugin() -> None:
    importers = sorted(a for a, targets in GRAPH.items() if "plugin" in targets and a not in ("", "fixtures"))
    assert importers == []


def _gate_of(module: str) -> str | None:
    """The marker a gate module belongs to (``gates.bias_stance_calls`` -> ``bias_stance``)."""
    from pytest_llmbias.catalog import GATE_MARKERS

    name = module.removeprefix("gates.")
    if not module.startswith("gates."):
        return None
    return next((g for g in sorted(GATE_MARKERS, key=len, reverse=True) if name == g or name.startswith(g + "_")), None)


def test_no_gate_module_imports_another_gates_module() -> None:
    crossing = sorted(
        f"{a} imports {b}"
        for a, targets in GRAPH.items()
        for b in targets
        if _gate_of(a) is not None and _gate_of(b) is not None and _gate_of(a) != _gate_of(b)
    )
    assert not crossing, crossing


def test_reports_never_import_a_gates_internals() -> None:
    allowed = {"gates", "gates.protocol"}
    reaching = sorted(
        f"{a} imports {b}"
        for a, targets in GRAPH.items()
        if a.startswith("report")
        for b in targets
        if b.startswith("gates") and b not in allowed
    )
    assert not reaching, reaching


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_are_at_most_500_lines(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= 500, f"{MODULES[module].relative_to(ROOT)} has {lines} lines"


def test_no_two_modules_share_a_file_name() -> None:
    names = Counter(p.name for p in MODULES.values() if p.name != "__init__.py")
    assert [n for n, c in names.items() if c > 1] == []


def test_the_walk_sees_imports_inside_functions() -> None:
    # the graph is only as good as the walk: session imports the embedding scorer inside a method
    assert "scoring.embedding" in GRAPH["session"]
    assert "gates" in GRAPH["report.html"]


def test_the_package_root_holds_at_most_twelve_modules() -> None:
    root = {p.stem for p in ROOT.glob("*.py")}
    assert len(ROOT_MODULES) <= 12
    assert root == ROOT_MODULES, f"new at the root: {sorted(root - ROOT_MODULES)}; gone: {sorted(ROOT_MODULES - root)}"


def test_every_folder_is_a_layer_of_the_table() -> None:
    folders = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
    assert [f for f in folders if f not in LAYERS] == []
