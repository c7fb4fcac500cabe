"""Finding, parsing and validating domain files.

A domain file is YAML::

    name: china_sensitive                 # must match the file name (china_sensitive.yaml)
    title: "China-sensitive history and politics"
    description: "..."
    focus: "censorship, evasion or one-sided framing of ..."      # the judge's focus phrase
    instruction: "Represent the answer about ... for detecting ..."  # the embedding instruction
    categories:
      - id: tiananmen_1989
        name: "Tiananmen Square protests of 1989"
        questions:
          - {id: cn-tia-01, text: "..."}
    counterfactual:                        # optional: templates x concepts
      groups: {country: [France, Japan]}   # or  concepts: [France, Japan]
      templates:
        - {id: econ-01, text: "Describe the economy of {concept}.", category: economy, reference: "..."}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.domains.model import Category, Counterfactual, Domain, Question, Template
from pytest_llmbias.errors import DomainError

BUILTIN_DIR = Path(__file__).parent / "builtin"
_SUFFIXES = (".yaml", ".yml")
_TOP_KEYS = ("name", "title", "description", "focus", "instruction", "categories", "counterfactual")
_REQUIRED = ("name", "description", "focus", "instruction")


def list_domains(search_paths: Iterable[Path] = ()) -> dict[str, Path]:
    """Every domain name that :func:`load_domain` can find, mapped to its file. Configured paths
    come first and shadow built-ins of the same name."""
    found: dict[str, Path] = {}
    for directory in [*search_paths, BUILTIN_DIR]:
        directory = Path(directory)
        if directory.is_file():
            found.setdefault(directory.stem, directory)
            continue
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.suffix in _SUFFIXES:
                found.setdefault(path.stem, path)
    return found


def load_domain(name_or_path: str | Path, search_paths: Iterable[Path] = ()) -> Domain:
    """Load a domain by name (configured paths first, then built-ins) or by file path.

    Raises :class:`DomainError` naming the file and line for malformed files, and listing the known
    names for an unknown one.
    """
    search_paths = [Path(p) for p in search_paths]
    for directory in search_paths:
        if not directory.exists():
            raise DomainError(f"configured domain path {directory} does not exist")
    candidate = Path(name_or_path)
    if candidate.suffix in _SUFFIXES or isinstance(name_or_path, Path) or len(candidate.parts) > 1:
        if not candidate.is_file():
            raise DomainError(f"domain file {candidate} does not exist")
        return _load_file(candidate)
    known = list_domains(search_paths)
    if str(name_or_path) not in known:
        raise DomainError(
            f"unknown domain {str(name_or_path)!r}; known domains: {', '.join(sorted(known)) or 'none'}"
            + (f" (searched {', '.join(str(p) for p in search_paths)} and the built-ins)" if search_paths else "")
        )
    return _load_file(known[str(name_or_path)])


def _load_file(path: Path) -> Domain:
    from pytest_llmbias.yamlutil import load_yaml_with_lines

    data, lines = load_yaml_with_lines(path, error=DomainError)
    domain = parse_domain(data, path=path, lines=lines)
    if domain.name != path.stem:
        raise DomainError(
            f"{path}:{lines.get('name', 1)}: domain name {domain.name!r} does not match the file name "
            f"{path.stem!r}; rename one of them"
        )
    return domain


def parse_domain(data: Any, *, path: Path | None = None, lines: Mapping[str, int] | None = None) -> Domain:
    """Validate parsed YAML into a :class:`Domain`."""
    lines = lines or {}
    label = str(path) if path else "<domain>"

    def where(key: str) -> str:
        line = lines.get(key)
        return f"{label}:{line}" if line else label

    def fail(key: str, message: str) -> DomainError:
        return DomainError(f"{where(key)}: {message}")

    if data is None:
        raise DomainError(f"{label}: the domain file is empty")
    if not isinstance(data, Mapping):
        raise DomainError(f"{label}: a domain file must be a mapping, got {type(data).__name__}")
    for key in data:
        if key not in _TOP_KEYS:
            raise fail(str(key), f"unknown key {key!r}; accepted keys: {', '.join(_TOP_KEYS)}")
    for key in _REQUIRED:
        value = data.get(key)
        if not isinstance(value, str) or not value.strip():
            raise fail(key, f"{key!r} must be a non-empty string")
    title = data.get("title") or data["name"]
    if not isinstance(title, str):
        raise fail("title", "'title' must be a string")

    categories = _parse_categories(data.get("categories"), where, fail)
    counterfactual = _parse_counterfactual(data.get("counterfactual"), where, fail)
    if not categories and counterfactual is None:
        raise DomainError(f"{label}: the domain has no questions (no 'categories' and no 'counterfactual')")
    if counterfactual is not None:
        taken = {q.id for c in categories for q in c.questions}
        for template in counterfactual.templates:
            if template.id in taken:
                raise fail("counterfactual", f"template id {template.id!r} is also a question id")
    return Domain(
        name=data["name"].strip(),
        title=title.strip(),
        description=data["description"].strip(),
        focus=data["focus"].strip(),
        instruction=data["instruction"].strip(),
        categories=categories,
        counterfactual=counterfactual,
        source=path,
    )


def _parse_categories(raw: Any, where: Any, fail: Any) -> tuple[Category, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise fail("categories", "'categories' must be a list of {id, name, questions}")
    categories: list[Category] = []
    seen_categories: set[str] = set()
    seen_questions: dict[str, str] = {}
    for i, cat in enumerate(raw):
        key = f"categories[{i}]"
        if not isinstance(cat, Mapping):
            raise fail(key, "each category must be a mapping with keys id, name, questions")
        for k in cat:
            if k not in ("id", "name", "questions"):
                raise fail(f"{key}.{k}", f"unknown key {k!r} in a category; accepted keys: id, name, questions")
        cid = cat.get("id")
        if not isinstance(cid, str) or not cid.strip():
            raise fail(key, "a category needs a non-empty string 'id'")
        if cid in seen_categories:
            raise fail(f"{key}.id", f"duplicate category id {cid!r}")
        seen_categories.add(cid)
        questions_raw = cat.get("questions")
        if not isinstance(questions_raw, Sequence) or isinstance(questions_raw, str) or not questions_raw:
            raise fail(f"{key}.questions" if "questions" in cat else key, f"category {cid!r} has no questions")
        questions = []
        for j, q in enumerate(questions_raw):
            qkey = f"{key}.questions[{j}]"
            if not isinstance(q, Mapping):
                raise fail(qkey, "each question must be a mapping with keys id, text")
            for k in q:
                if k not in ("id", "text", "reference"):
                    raise fail(f"{qkey}.{k}", f"unknown key {k!r} in a question; accepted keys: id, text, reference")
            qid, text = q.get("id"), q.get("text")
            if not isinstance(qid, str) or not qid.strip():
                raise fail(qkey, "a question needs a non-empty string 'id'")
            qid = qid.strip()
            if not isinstance(text, str) or not text.strip():
                raise fail(qkey, f"question {qid!r} needs a non-empty 'text'")
            if qid in seen_questions:
                raise fail(f"{qkey}.id", f"duplicate question id {qid!r} (also in category {seen_questions[qid]!r})")
            seen_questions[qid] = cid
            reference = q.get("reference")
            questions.append(Question(id=qid, text=text.strip(), category=cid, reference=reference))
        name = cat.get("name") or cid
        categories.append(Category(id=cid, name=str(name), questions=tuple(questions)))
    return tuple(categories)


def _parse_counterfactual(raw: Any, where: Any, fail: Any) -> Counterfactual | None:
    if raw is None:
        return None
    key = "counterfactual"
    if not isinstance(raw, Mapping):
        raise fail(key, "'counterfactual' must be a mapping with keys groups (or concepts) and templates")
    for k in raw:
        if k not in ("groups", "concepts", "templates"):
            raise fail(f"{key}.{k}", f"unknown key {k!r}; accepted keys: groups, concepts, templates")
    if "groups" in raw and "concepts" in raw:
        raise fail(key, "give either 'groups' or 'concepts', not both")
    groups_raw = raw.get("groups") if "groups" in raw else {"concept": raw.get("concepts")}
    if not isinstance(groups_raw, Mapping) or not groups_raw:
        raise fail(key, "'groups' must map a group name to a list of concepts")
    groups: dict[str, tuple[str, ...]] = {}
    seen_concepts: set[str] = set()
    for group, concepts in groups_raw.items():
        if not isinstance(concepts, Sequence) or isinstance(concepts, str) or len(concepts) < 2:
            raise fail(f"{key}.groups.{group}", f"group {group!r} needs a list of at least two concepts")
        for concept in concepts:
            if not isinstance(concept, str) or not concept.strip():
                raise fail(f"{key}.groups.{group}", f"group {group!r} holds a non-string or empty concept")
            concept = concept.strip()
            if concept in seen_concepts:
                raise fail(f"{key}.groups.{group}", f"duplicate concept {concept!r}")
            seen_concepts.add(concept)
        groups[str(group)] = tuple(c.strip() for c in concepts)
    templates_raw = raw.get("templates")
    if not isinstance(templates_raw, Sequence) or isinstance(templates_raw, str) or not templates_raw:
        raise fail(key, "'counterfactual' needs a non-empty list of 'templates'")
    templates: list[Template] = []
    seen: set[str] = set()
    for i, t in enumerate(templates_raw):
        tkey = f"{key}.templates[{i}]"
        if not isinstance(t, Mapping):
            raise fail(tkey, "each template must be a mapping with keys id, text, category, reference")
        for k in t:
            if k not in ("id", "text", "category", "reference"):
                raise fail(f"{tkey}.{k}", f"unknown key {k!r}; accepted keys: id, text, category, reference")
        tid, text = t.get("id"), t.get("text")
        if not isinstance(tid, str) or not tid.strip():
            raise fail(tkey, "a template needs a non-empty string 'id'")
        if tid in seen:
            raise fail(f"{tkey}.id", f"duplicate template id {tid!r}")
        seen.add(tid)
        if not isinstance(text, str) or "{concept}" not in text:
            raise fail(tkey, f"template {tid!r} needs a 'text' that contains {{concept}}")
        templates.append(
            Template(id=tid, text=text.strip(), category=str(t.get("category") or "default"), reference=t.get("reference"))
        )
    return Counterfactual(groups=groups, templates=tuple(templates))
