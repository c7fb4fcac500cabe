"""YAML loading that remembers where each key was written, so errors can name the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_yaml_with_lines(path: Path, *, error: type[Exception]) -> tuple[Any, dict[str, int]]:
    """Parse ``path`` safely. Returns the data and a map of dotted key path -> 1-based line.

    List items appear in key paths as ``[i]`` (``baselines[0].model``). A syntax error, a duplicate
    key, or an unreadable file raises ``error`` with the file and line.
    """
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    loader = _safe_loader(yaml)(text)
    try:
        node = loader.get_single_node()  # composed once: its marks give the lines, then the data
        if node is None:
            return None, {}
        lines: dict[str, int] = {}
        _walk(node, "", lines, path, error)
        # Composing accepts any tag; constructing refuses the unsafe ones (!!python/object...).
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise error(_describe(path, exc)) from None
    finally:
        loader.dispose()
    return data, lines


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


def _walk(node: Any, prefix: str, lines: dict[str, int], path: Path, error: type[Exception]) -> None:
    import yaml

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
            _walk(value_node, dotted, lines, path, error)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            dotted = f"{prefix}[{i}]"
            lines[dotted] = item.start_mark.line + 1
            _walk(item, dotted, lines, path, error)


def _describe(path: Path, exc: Exception) -> str:
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
        data = loader.get_single_data()
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
