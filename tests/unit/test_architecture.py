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

#: The layer order docs/development.md states, lowest first, once: a folder (or a module at the package
#: root) may import its own layer or a lower one, never a higher one. A folder is one layer, whole.
ORDER: tuple[tuple[str, ...], ...] = (
    # standard library only: the errors, the named choices, the markers' catalog
    ("errors", "choices", "catalog"),
    # configuration, and the statistics (numpy and scipy), which know nothing else
    ("config", "stats"),
    # the marker arguments' parsing and the domains (question sets, benchmarks) configuration names
    ("markers", "domains"),
    # where answers are kept
    ("store",),
    # how a model is called
    ("clients",),
    # what is asked, and when
    ("planning",),
    # how an answer is scored
    ("scoring",),
    # recorded releases: their records, their answers, a run's view of one
    ("releases",),
    # the service a gate uses
    ("session", "llm"),
    # documents of a run (JSON, HTML, terminal, tracking) and their tables and plots: no gate by name
    ("report",),
    # what every gate shares: the comparison engine, designs, looks, sizing, the result base
    ("engine",),
    # one package per gate marker, and the registry
    ("gates",),
    # the entry points: the pytest plugin, the command line, the local model server
    ("plugin", "cli", "local", "spending", "fixtures", "hookspecs", "__main__", ""),
)
LAYERS: dict[str, int] = {name: rank for rank, names in enumerate(ORDER) for name in names}


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
    """The rank of ``module``'s folder (or root module) in :data:`ORDER`."""
    return LAYERS[module.partition(".")[0]]


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in MODULES if m.partition(".")[0] not in LAYERS]
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
    """The gate package a module belongs to (``gates.stance.calls`` -> ``stance``), None outside one."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "gates" else None


#: What a gate package shows the rest of the package: its gate (the catalog's ``gate``, the public
#: ``evaluate_*``) and its result (the public result types). The rest are its own parts.
GATE_FACES = ("gate", "result")


def test_every_gate_marker_has_a_package_of_its_own() -> None:
    from pytest_llmbias.catalog import MARKERS

    packages = {m.gate for m in MARKERS if m.gate is not None}
    assert all(g.startswith(f"{PACKAGE}.gates.") and g.endswith(".gate") for g in packages), packages
    assert len(packages) == len({g.split(".")[2] for g in packages}) == 7
    assert {g.split(".")[2] for g in packages} == {m for m in (_gate_of(x) for x in MODULES) if m}


def test_no_gate_module_imports_another_gates_module() -> None:
    crossing = sorted(
        f"{a} imports {b}"
        for a, targets in GRAPH.items()
        for b in targets
        if _gate_of(a) is not None and _gate_of(b) is not None and _gate_of(a) != _gate_of(b)
    )
    assert not crossing, crossing


def test_nothing_outside_a_gate_package_imports_its_parts() -> None:
    reaching = sorted(
        f"{a} imports {b}"
        for a, targets in GRAPH.items()
        for b in targets
        if (g := _gate_of(b)) is not None and _gate_of(a) != g and b.split(".")[2] not in GATE_FACES
    )
    assert not reaching, reaching


def test_the_engine_and_the_reports_know_no_gate() -> None:
    reaching = sorted(
        f"{a} imports {b}"
        for a, targets in GRAPH.items()
        if a.partition(".")[0] in ("engine", "report")
        for b in targets
        if b.partition(".")[0] == "gates"
    )
    assert not reaching, reaching


def test_a_gate_package_names_its_modules_by_concept() -> None:
    # the package is the gate's name: its modules say what part they are (spec, result, calls...)
    prefixed = sorted(m for m in MODULES if _gate_of(m) and m.split(".")[2].startswith(("bias_", _gate_of(m) + "_")))
    assert not prefixed, prefixed


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_are_at_most_500_lines(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= 500, f"{MODULES[module].relative_to(ROOT)} has {lines} lines"


def test_no_two_modules_share_a_file_name_outside_the_gate_packages() -> None:
    # inside a gate package the names repeat on purpose (each has its gate, spec, result...)
    names = Counter(p.name for m, p in MODULES.items() if p.name != "__init__.py" and _gate_of(m) is None)
    assert [n for n, c in names.items() if c > 1] == []


def test_the_walk_sees_imports_inside_functions() -> None:
    # the graph is only as good as the walk: session imports the embedding scorer inside a method
    assert "scoring.embedding" in GRAPH["session"]
    assert "gates" in GRAPH["cli.command"]


def test_the_package_root_holds_at_most_twelve_modules() -> None:
    root = {p.stem for p in ROOT.glob("*.py")}
    assert len(ROOT_MODULES) <= 12
    assert root == ROOT_MODULES, f"new at the root: {sorted(root - ROOT_MODULES)}; gone: {sorted(ROOT_MODULES - root)}"


def test_every_folder_is_a_layer_of_the_table() -> None:
    folders = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
    assert [f for f in folders if f not in LAYERS] == []
