"""YAML loading that remembers where each key was written, so errors can name the file and line,
and that cannot explode: every file the plugin reads goes through :func:`compose_bounded`, which
refuses, before anything is built from it, a document nested deeper than :data:`MAX_DEPTH` levels,
one whose aliases expand it to more than :data:`MAX_NODES` values (an alias bomb: nine levels of
nine-fold aliases stand for 387 million strings in a few hundred bytes), and an alias that
refers to a node containing it."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

#: the deepest nesting of mappings and lists a file may hold: a settings file needs 5, a domain 4
MAX_DEPTH = 64
#: the most values (every key, value and list item, counted again at each use of an alias) a file
#: may stand for: a domain of 10,000 questions of three fields holds about 70,000
MAX_NODES = 250_000


def load_yaml_with_lines(path: Path, *, error: type[Exception]) -> tuple[Any, dict[str, int]]:
    """Parse ``path`` safely. Returns the data and a map of dotted key path -> 1-based line.

    List items appear in key paths as ``[i]`` (``baselines[0].model``). A syntax error, a duplicate
    key, an unreadable file, or a document beyond :data:`MAX_DEPTH` or :data:`MAX_NODES` raises
    ``error`` with the file (and the line where there is one).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    return load_yaml_text(text, source=str(path), error=error)


def load_yaml_text(text: str, *, source: str, error: type[Exception]) -> tuple[Any, dict[str, int]]:
    """:func:`load_yaml_with_lines` for ``text`` already read; ``source`` names it in errors."""
    import yaml

    loader = _lean_loader(_safe_loader(yaml))(text)
    try:
        # composed once: its marks give the lines, then the data. Without an anchor ("&") there is
        # no alias, so the nodes form a tree that the walk for the lines visits once each: it counts
        # them and their depth itself, and the graph walk of check_bounds is not needed.
        tree = "&" not in text
        node = compose_bounded(loader, source, error, check=not tree)
        if node is None:
            return None, {}
        lines: dict[str, int] = {}
        counted = _walk(node, "", lines, source, error)
        if tree and counted > MAX_NODES:
            raise error(f"{source}: the YAML holds more than {MAX_NODES:,} values; split it")
        # Composing accepts any tag; constructing refuses the unsafe ones (!!python/object...).
        data = _construct_tree(loader, node) if tree else loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise error(_describe(source, exc)) from None
    finally:
        loader.dispose()
    return data, lines


def compose_bounded(loader: Any, source: str, error: type[Exception], *, lines: bool = True, check: bool = True) -> Any:
    """The document's root node from ``loader`` (None for an empty document), checked by
    :func:`check_bounds` (unless ``check`` is false: the caller bounds a document it knows holds no
    alias itself). The pure-Python composer recurses once per level: a document nested deeper than
    Python's stack is refused as too deep (libyaml refuses 1,000 levels itself). ``lines``: name
    the line in errors (not for a one-line value given on the command line)."""
    try:
        node = loader.get_single_node()
    except RecursionError:
        raise error(f"{source}: the YAML nests deeper than {MAX_DEPTH} levels of mappings and lists") from None
    if node is not None and check:
        check_bounds(node, source, error, lines=lines)
    return node


def check_bounds(root: Any, source: str, error: type[Exception], *, lines: bool = True) -> None:
    """Raise ``error`` naming ``source`` and a line when the node graph under ``root`` nests deeper
    than :data:`MAX_DEPTH`, stands for more than :data:`MAX_NODES` values once its aliases are
    expanded, or holds a node inside itself (``&a [*a]``). Each distinct node is visited once (an
    alias's expanded size is remembered), so a bomb is refused in the time its text takes to read."""

    def at(node: Any) -> str:
        return f"{source}:{node.start_mark.line + 1}" if lines else source

    size: dict[int, int] = {}  # id(node) -> values under it once expanded, itself included
    height: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path: met again, a node contains itself
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = _children(node)
        if children_done:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            height[key] = 1 + max((height[id(c)] for c in children), default=0)
            if height[key] > MAX_DEPTH:
                raise error(f"{at(node)}: the YAML nests deeper than {MAX_DEPTH} levels of mappings and lists")
            if size[key] > MAX_NODES:
                raise error(
                    f"{at(node)}: the YAML's aliases expand it to more than {MAX_NODES:,} values "
                    "(an alias bomb?); write the values out, or use fewer aliases"
                )
            continue
        if key in size:
            continue
        if len(open_nodes) >= MAX_DEPTH:
            raise error(f"{at(node)}: the YAML nests deeper than {MAX_DEPTH} levels of mappings and lists")
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise error(
                    f"{at(child)}: a YAML alias refers to a mapping or list that "
                    "contains it; a recursive document cannot be read"
                )
            if id(child) not in size:
                stack.append((child, False))


def _children(node: Any) -> list[Any]:
    """The value nodes directly under ``node``: a list's items, a mapping's keys and values."""
    value = node.value
    if not isinstance(value, list):
        return []  # a scalar
    if value and isinstance(value[0], tuple):  # a mapping: (key node, value node) pairs
        return [n for pair in value for n in pair]
    return value


def _safe_loader(yaml: Any) -> type:
    """libyaml's parser where PyYAML has it (ten times faster on a domain of a thousand
    questions), the pure-Python one otherwise; the same safe constructor either way.

    libyaml's binding is a C extension that is initialised once per process, with the node
    classes of the first ``yaml`` package imported. If ``yaml`` has since been imported afresh
    (pytest's ``pytester`` restores ``sys.modules`` after each test), its nodes are other classes
    than the resolver's, and every tag resolves to None; the pure-Python parser is used then."""
    c_loader = getattr(yaml, "CSafeLoader", None)
    if c_loader is None:
        return yaml.SafeLoader
    try:
        from yaml import _yaml
    except ImportError:  # pragma: no cover - CSafeLoader exists only with the binding
        return yaml.SafeLoader
    return c_loader if getattr(_yaml, "ScalarNode", None) is yaml.nodes.ScalarNode else yaml.SafeLoader


def _lean_loader(base: type) -> type:
    """``base`` where it has a path resolver (PyYAML's ``add_path_resolver``); else ``base`` with
    the composer's calls for each node made lighter, the tags unchanged: libyaml's composer asks
    the Python resolver for every node's tag, and tells it every step down and up the tree, which
    it ignores without a path resolver (a domain of ten thousand questions makes 50,000 of each)."""
    if base.yaml_path_resolvers:  # type: ignore[attr-defined]
        return base
    return _lean_class(base)


@functools.lru_cache(maxsize=8)  # a few: each import of PyYAML has its own loader classes
def _lean_class(base: type) -> type:
    """The class of :func:`_lean_loader`: :meth:`resolve` as PyYAML's resolver answers
    without a path resolver (an implicit plain scalar's tag by the resolvers of its first
    character, then the wildcard ones; every other scalar a string; a list or a mapping its
    default tag), with the implicit resolvers read at each call as PyYAML reads them; the steps
    down and up, which only a path resolver reads, as built-in callables that do nothing (they
    take the same arguments and cost no Python frame)."""
    scalar_node = base.resolve.__globals__["ScalarNode"]  # type: ignore[attr-defined]
    default = base.resolve  # type: ignore[attr-defined]

    def resolve(self: Any, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not scalar_node:
            return default(self, kind, value, implicit)
        if implicit[0]:
            table = self.yaml_implicit_resolvers
            first = table.get(value[0] if value else "")
            wildcard = table.get(None)
            if first is not None or wildcard is not None:
                for tag, regexp in (first or []) + (wildcard or []):
                    if regexp.match(value):
                        return tag
        return self.DEFAULT_SCALAR_TAG

    methods = {"resolve": resolve, "descend_resolver": slice, "ascend_resolver": tuple}
    return type(f"Lean{base.__name__}", (base,), methods)


_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def _construct_tree(loader: Any, node: Any) -> Any:
    """What ``loader.construct_document(node)`` gives for a document without aliases (each node
    met once, so nothing is shared), with its strings, mappings and lists built here and every
    other node (numbers, booleans, dates, other tags, a mapping with a merge key) by the loader's
    own constructor: a domain of ten thousand questions is mostly strings."""
    tag = node.tag
    if tag == _STR and type(node.value) is str:
        return node.value
    if tag == _SEQ:
        return [_construct_tree(loader, item) for item in node.value]
    if tag == _MAP and all(key.tag == _STR for key, _ in node.value):
        return {key.value: _construct_tree(loader, value) for key, value in node.value}
    return loader.construct_object(node, deep=True)


def _walk(node: Any, prefix: str, lines: dict[str, int], path: str, error: type[Exception], depth: int = 1) -> int:
    """Record the line of every key and list item under ``node`` in ``lines``; the values visited
    (``node`` included). Raises ``error`` on a duplicate key, or where the nesting passes
    :data:`MAX_DEPTH`."""
    import yaml

    if depth > MAX_DEPTH:
        raise error(
            f"{path}:{node.start_mark.line + 1}: the YAML nests deeper than {MAX_DEPTH} levels of mappings and lists"
        )
    count = 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise error(f"{path}:{line}: duplicate key {key!r} (first at line {seen[key]})")
            seen[key] = line
            dotted = f"{prefix}.{key}" if prefix else key
            lines[dotted] = line
            count += 1 + _walk(value_node, dotted, lines, path, error, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            dotted = f"{prefix}[{i}]"
            lines[dotted] = item.start_mark.line + 1
            count += _walk(item, dotted, lines, path, error, depth + 1)
    return count


def _describe(path: str, exc: Exception) -> str:
    """``<file>:<line>: invalid YAML: <problem>`` for a YAML error (the line where it has one)."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        return f"{where}: invalid YAML: {problem}"
    return f"{path}: invalid YAML: {exc}"


def load_inline_mapping(text: str, *, what: str, error: type[Exception]) -> dict[str, Any]:
    """``text``, a YAML flow mapping (``{model: x, api_base: "http://..."}``), as a dict; ``error``
    naming ``what`` (an option, a variable) and the column of a syntax error, or saying that the
    text is not a mapping."""
    import yaml

    loader = _safe_loader(yaml)(text)
    try:
        node = compose_bounded(loader, f"{what}: the inline model {text!r}", error, lines=False)
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        column = f" at column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"{what}: the inline model {text!r} does not parse as YAML{column}: {problem}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise error(f"{what}: the inline model {text!r} is not a mapping such as '{{model: openai/x, api_base: URL}}'")
    return data
