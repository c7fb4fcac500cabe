"""Follow one argument of a public entry point through the package's calls, as a reader would.

A reader who follows ``evaluate_benchmark``'s ``dataset`` reads every function it is passed to, in
the order they run. This script runs a test (one of the project's own) under a profiler hook: once
the entry point is called, every later call of a function of the package that receives the same
object (by identity, or in a short tuple) as an argument, until the entry point returns, is one step of the walk; a
function is read once, in the order it first runs, however often it runs. Consecutive steps in one module are
one *stay*; of all the tests of the given file that call the entry point, the walk prints the
worst one's stays and three counts:

- stays: how many times the walk enters a module;
- returns: stays in a module the walk had already left (a reader turning back to a file);
- climbs: steps from a module to one above it in the package's layers (the folder order of
  ``tests/unit/test_architecture.py``, and inside a gate's package its ``gate`` module above its
  parts).

    python scripts/data_walk.py evaluate_benchmark dataset tests/unit/test_bias_benchmark.py::test_name

Without a test id it runs every entry of :data:`WALKS` and prints a table (docs/development.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "pytest_llmbias"

#: entry point, argument, a test that calls it with data a user would give
WALKS: tuple[tuple[str, str, str], ...] = (
    ("evaluate_benchmark", "dataset", "tests/unit/test_bias_benchmark.py"),
    ("evaluate_equivalence", "scores", "tests/unit/test_gate_statistics.py"),
    ("evaluate_impact_ratio", "values", "tests/unit/test_gate_statistics.py"),
    ("evaluate_bias_index", "annotations", "tests/unit/test_gate_statistics.py"),
    ("evaluate_stance", "kinds", "tests/unit/test_stance.py"),
    ("evaluate_preference", "choices", "tests/unit/test_preference.py"),
    ("evaluate_evenhanded", "pairs", "tests/unit/test_evenhanded.py"),
    ("plan", "request", "tests/unit/test_pipeline.py"),
    ("responses", "request", "tests/unit/test_pipeline.py"),
    ("collect", "planned", "tests/unit/test_pipeline.py"),
)


_ENTRY_MODULES = ("session", "stats.evenhanded") + tuple(
    f"gates.{g}.gate"
    for g in ("benchmark", "equivalent", "impact_ratio", "index", "stance", "preference", "evenhanded")
)


def _rank(module: str) -> tuple[int, int]:
    """A module's place in the layers: its folder's rank, then, inside a gate's package, the gate
    module above its parts."""
    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from test_architecture import layer

    parts = module.split(".")
    inner = 1 if len(parts) > 2 and parts[0] == "gates" and parts[2] == "gate" else 0
    return layer(module), inner


def _module_of(filename: str) -> str | None:
    path = Path(filename)
    try:
        rel = path.resolve().relative_to(PACKAGE).with_suffix("")
    except ValueError:
        return None
    return ".".join(p for p in rel.parts if p != "__init__")


def _carries(value: Any, tracked: Any) -> bool:
    """``value`` is the tracked object, or a short tuple or list that holds it (``(dataset,)``)."""
    if value is tracked:
        return True
    return isinstance(value, (tuple, list)) and len(value) <= 8 and any(v is tracked for v in value)


class Walk:
    """The profiler hook: the entry point's argument, then every call that receives it."""

    def __init__(self, entry: str, argument: str) -> None:
        self.entry, self.argument = entry, argument
        #: where the entry point is defined: a gate's package, or the session (BiasSession's methods)
        self.modules = {m for m in _ENTRY_MODULES if entry.startswith("evaluate_") != (m == "session")}
        self.tracked: Any = None
        self.frame: Any = None
        self.done = False
        self.read: set[Any] = set()
        self.steps: list[str] = []
        #: (caller's module, callee's module) of every call between two modules of the package
        self.edges: set[tuple[str, str]] = set()
        self.names: dict[tuple[str, str], str] = {}

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if self.done:
            return
        if event == "return" and frame is self.frame:
            self.done = True
            return
        if event != "call":
            return
        code = frame.f_code
        module = _module_of(code.co_filename)
        if module is None:
            return
        if self.tracked is None:
            if code.co_name == self.entry and self.argument in frame.f_locals and module in self.modules:
                self.tracked, self.frame = frame.f_locals[self.argument], frame
                self.read.add(code)
                self.steps.append(module)
            return
        caller = _module_of(frame.f_back.f_code.co_filename) if frame.f_back is not None else None
        if caller is not None and caller != module:
            self.edges.add((caller, module))
            self.names.setdefault((caller, module), f"{frame.f_back.f_code.co_name} -> {code.co_name}")
        if code in self.read:
            return  # a reader reads a function once, however often it runs
        n = code.co_argcount + code.co_kwonlyargcount
        names = code.co_varnames[:n]
        if any(_carries(frame.f_locals.get(name), self.tracked) for name in names):
            self.read.add(code)
            self.steps.append(module)

    def stays(self) -> list[str]:
        out: list[str] = []
        for m in self.steps:
            if not out or out[-1] != m:
                out.append(m)
        return out


def _counts(stays: list[str]) -> tuple[int, int]:
    seen: set[str] = set()
    returns = 0
    for m in stays:
        returns += m in seen
        seen.add(m)
    climbs = sum(_rank(b) > _rank(a) for a, b in zip(stays, stays[1:], strict=False))
    return returns, climbs


def measure(entry: str, argument: str, test: str) -> dict[str, Any]:
    """Every test in ``test`` that calls ``entry``, walked: the worst walk (most returns, then most
    climbs) with its test id, and the calls between modules that all of them made (calls up the
    layers, and pairs of modules that call each other)."""
    import pytest

    walks: list[tuple[str, list[str]]] = []
    edges: set[tuple[str, str]] = set()
    names: dict[tuple[str, str], str] = {}

    class Hook:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_call(self, item: Any) -> Any:
            walk = Walk(entry, argument)
            sys.setprofile(walk)
            try:
                return (yield)
            finally:
                sys.setprofile(None)
                if walk.tracked is not None:
                    walks.append((item.nodeid, walk.stays()))
                    edges.update(walk.edges)
                    names.update(walk.names)

    pytest.main(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--no-header", test], plugins=[Hook()])
    if not walks:
        raise SystemExit(f"{test}: no test calls {entry}")
    scored = [(_counts(stays), nodeid, stays) for nodeid, stays in walks]
    (returns, climbs), nodeid, stays = max(scored, key=lambda s: s[0])
    up = sorted((a, b) for a, b in edges if _rank(b) > _rank(a))
    both = sorted((a, b) for a, b in edges if a < b and (b, a) in edges)
    return {
        "test": nodeid,
        "stays": stays,
        "returns": returns,
        "climbs": climbs,
        "tests": len(walks),
        "edges": len(edges),
        "up": up,
        "both": both,
        "names": names,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("entry", nargs="?")
    parser.add_argument("argument", nargs="?")
    parser.add_argument("test", nargs="?")
    args = parser.parse_args(argv)
    walks = [(args.entry, args.argument, args.test)] if args.entry else list(WALKS)
    rows = []
    for entry, argument, test in walks:
        m = measure(entry, argument, test)
        print(f"{entry}({argument}), worst of {m['tests']} tests ({m['test']}):\n  " + " -> ".join(m["stays"]))
        for a, b in m["up"]:
            print(f"  calls up: {a} -> {b} ({m['names'][a, b]})")
        for a, b in m["both"]:
            print(f"  both ways: {a} <-> {b} ({m['names'][a, b]}; {m['names'][b, a]})")
        rows.append(
            (
                entry,
                argument,
                m["tests"],
                len(m["stays"]),
                m["returns"],
                m["climbs"],
                m["edges"],
                len(m["up"]),
                len(m["both"]),
            )
        )
    print("| entry point | argument | tests | stays | returns | climbs | module pairs called | called up | both ways |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| `{}` | `{}` | {} | {} | {} | {} | {} | {} | {} |".format(*row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
