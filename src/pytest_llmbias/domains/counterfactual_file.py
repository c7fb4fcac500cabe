"""The ``counterfactual`` section of a domain file: templates crossed with concepts, and written
branches rewritten by word replacement::

    counterfactual:                        # optional: templates x concepts, and/or branches
      groups: {country: [France, Japan]}   # or  concepts: [France, Japan]; needed by templates
      templates:                           # {concept} is filled in the text and the reference
        - {id: econ-01, text: "Describe the economy of {concept}.", category: economy,
           reference: "{concept} has a mixed economy ..."}
      branches:                            # a written root prompt, branched by word replacement
        - id: growth-01
          concept: Northwind               # the actual concept; the text must mention it
          group: company                   # optional: for concepts no group lists ("concept")
          category: finance                # optional ("default")
          text: "Is Northwind a good pick for long-term growth, given its CEO Ada Park?"
          reference: "Northwind is ... led by Ada Park."       # optional actual baseline
          replacements:                    # counterfactual concept -> extra replacements or null;
            Contoso: {Ada Park: Lee Wong}  # omitted: every other concept of ``groups``
            Fabrikam: null

Template prompts have ids ``<template id>:<concept>``. A branch yields its root prompt (the text and
reference as written) and one prompt per counterfactual concept, text and reference branched with
``{actual: counterfactual}`` plus that concept's extra replacements (see
:mod:`pytest_llmbias.domains.branching`), ids ``<branch id>:<concept>``. A prompt's group is the
group that lists its concept, else the branch's ``group``, else ``concept``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from pytest_llmbias.domains.branching import mentions
from pytest_llmbias.domains.domain import Branch, Counterfactual, Template

_TEMPLATE_KEYS = ("id", "text", "category", "reference")
_BRANCH_KEYS = ("id", "concept", "group", "category", "text", "reference", "replacements")


def _is_list(value: Any) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence) and not isinstance(value, str)


def parse_counterfactual(raw: Any, where: Any, fail: Any, taken: Mapping[str, str]) -> Counterfactual | None:
    """``taken`` maps the ids already used (question ids) to a description of their owner."""
    if raw is None:
        return None
    key = "counterfactual"
    if not isinstance(raw, Mapping):
        raise fail(key, "'counterfactual' must be a mapping with keys groups (or concepts), templates, branches")
    for k in raw:
        if k not in ("groups", "concepts", "templates", "branches"):
            raise fail(f"{key}.{k}", f"unknown key {k!r}; accepted keys: groups, concepts, templates, branches")
    if "groups" in raw and "concepts" in raw:
        raise fail(key, "give either 'groups' or 'concepts', not both")
    templates_raw = raw.get("templates")
    branches_raw = raw.get("branches")
    for name, value in (("templates", templates_raw), ("branches", branches_raw)):
        if value is not None and not _is_list(value):
            raise fail(f"{key}.{name}", f"'{name}' must be a list")
    if not templates_raw and not branches_raw:
        raise fail(key, "'counterfactual' needs a non-empty list of 'templates' or of 'branches'")

    groups: dict[str, tuple[str, ...]] = {}
    if "groups" in raw or "concepts" in raw:
        groups = _parse_groups(raw, key, fail)
    elif templates_raw:
        raise fail(key, "templates need 'groups' (or 'concepts'): the concepts that fill {concept}")
    ids = dict(taken)
    templates = _parse_templates(templates_raw or (), key, fail, ids)
    branches = _parse_branches(branches_raw or (), key, fail, ids, groups)
    return Counterfactual(groups=groups, templates=templates, branches=branches)


def _parse_groups(raw: Mapping[str, Any], key: str, fail: Any) -> dict[str, tuple[str, ...]]:
    groups_raw = raw.get("groups") if "groups" in raw else {"concept": raw.get("concepts")}
    if not isinstance(groups_raw, Mapping) or not groups_raw:
        raise fail(key, "'groups' must map a group name to a list of concepts (templates need them)")
    groups: dict[str, tuple[str, ...]] = {}
    seen_concepts: set[str] = set()
    for group, concepts in groups_raw.items():
        if not _is_list(concepts) or len(concepts) < 2:
            raise fail(f"{key}.groups.{group}", f"group {group!r} needs a list of at least two concepts")
        for concept in concepts:
            if not isinstance(concept, str) or not concept.strip():
                raise fail(f"{key}.groups.{group}", f"group {group!r} holds a non-string or empty concept")
            concept = concept.strip()
            if concept in seen_concepts:
                raise fail(f"{key}.groups.{group}", f"duplicate concept {concept!r}")
            seen_concepts.add(concept)
        groups[str(group)] = tuple(c.strip() for c in concepts)
    return groups


def _optional_text(item: Mapping[str, Any], name: str, at: str, fail: Any, owner: str) -> str | None:
    value = item.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise fail(f"{at}.{name}", f"{owner}: {name!r} must be a non-empty string")
    return value.strip()


def _parse_templates(raw: Sequence[Any], key: str, fail: Any, ids: dict[str, str]) -> tuple[Template, ...]:
    templates: list[Template] = []
    for i, t in enumerate(raw):
        tkey = f"{key}.templates[{i}]"
        if not isinstance(t, Mapping):
            raise fail(tkey, "each template must be a mapping with keys id, text, category, reference")
        for k in t:
            if k not in _TEMPLATE_KEYS:
                raise fail(f"{tkey}.{k}", f"unknown key {k!r}; accepted keys: {', '.join(_TEMPLATE_KEYS)}")
        tid, text = _claim_id(t, tkey, fail, ids, "template"), t.get("text")
        if not isinstance(text, str) or "{concept}" not in text:
            raise fail(tkey, f"template {tid!r} needs a 'text' that contains {{concept}}")
        reference = _optional_text(t, "reference", tkey, fail, f"template {tid!r}")
        category = str(t.get("category") or "default").strip()
        templates.append(Template(id=tid, text=text.strip(), category=category, reference=reference))
    return tuple(templates)


def _claim_id(item: Mapping[str, Any], at: str, fail: Any, ids: dict[str, str], kind: str) -> str:
    """The item's ``id``, stripped and recorded in ``ids`` (id -> what it names); an error when it is
    missing, or already names a template or a branch."""
    value = item.get("id")
    if not isinstance(value, str) or not value.strip():
        raise fail(at, f"a {kind} needs a non-empty string 'id'")
    value = value.strip()
    if ids.get(value) == f"a {kind} id":
        raise fail(f"{at}.id", f"duplicate {kind} id {value!r}")
    if value in ids:
        raise fail(f"{at}.id", f"{kind} id {value!r} is also {ids[value]}")
    ids[value] = f"a {kind} id"
    return value


def _parse_branches(
    raw: Sequence[Any], key: str, fail: Any, ids: dict[str, str], groups: Mapping[str, tuple[str, ...]]
) -> tuple[Branch, ...]:
    group_of = {c: g for g, concepts in groups.items() for c in concepts}
    branches: list[Branch] = []
    for i, b in enumerate(raw):
        bkey = f"{key}.branches[{i}]"
        if not isinstance(b, Mapping):
            raise fail(bkey, f"each branch must be a mapping with keys {', '.join(_BRANCH_KEYS)}")
        for k in b:
            if k not in _BRANCH_KEYS:
                raise fail(f"{bkey}.{k}", f"unknown key {k!r} in a branch; accepted keys: {', '.join(_BRANCH_KEYS)}")
        bid = _claim_id(b, bkey, fail, ids, "branch")
        owner = f"branch {bid!r}"
        concept, text = b.get("concept"), b.get("text")
        if not isinstance(concept, str) or not concept.strip():
            raise fail(f"{bkey}.concept" if "concept" in b else bkey, f"{owner} needs a non-empty string 'concept'")
        concept = concept.strip()
        if not isinstance(text, str) or not text.strip():
            raise fail(f"{bkey}.text" if "text" in b else bkey, f"{owner} needs a non-empty string 'text'")
        text = text.strip()
        if not mentions(text, concept):
            raise fail(
                f"{bkey}.text",
                f"{owner}: the text does not mention its concept {concept!r} as a whole word, "
                "so branching would not change it",
            )
        reference = _optional_text(b, "reference", bkey, fail, owner)
        category = str(b.get("category") or "default").strip()
        group = _optional_text(b, "group", bkey, fail, owner)
        if group is not None and concept in group_of and group_of[concept] != group:
            raise fail(
                f"{bkey}.group",
                f"{owner} names group {group!r}, but its concept {concept!r} is listed in group {group_of[concept]!r}",
            )
        replacements = _parse_replacements(b, bkey, fail, owner, concept, text, reference, list(group_of))
        branches.append(
            Branch(
                id=bid,
                concept=concept,
                text=text,
                category=category,
                group=group,
                reference=reference,
                replacements=replacements,
            )
        )
    return tuple(branches)


def _parse_replacements(
    b: Mapping[str, Any],
    bkey: str,
    fail: Any,
    owner: str,
    concept: str,
    text: str,
    reference: str | None,
    all_concepts: list[str],
) -> dict[str, dict[str, str] | None]:
    rkey = f"{bkey}.replacements"
    if "replacements" not in b:
        # No replacements: branch to every other concept the groups list.
        others = [c for c in all_concepts if c != concept]
        if not others:
            raise fail(bkey, f"{owner} needs 'replacements' (no 'groups' list other concepts to branch to)")
        return dict.fromkeys(others)
    raw = b["replacements"]
    if not isinstance(raw, Mapping) or not raw:
        raise fail(
            rkey,
            f"{owner}: 'replacements' must map each counterfactual concept to its extra word replacements "
            "(a mapping, or null for none)",
        )
    replacements: dict[str, dict[str, str] | None] = {}
    for other, extra in raw.items():
        at = f"{rkey}.{other}"
        if not isinstance(other, str) or not other.strip():
            raise fail(at, f"{owner}: counterfactual concept {other!r} must be a non-empty string")
        name = other.strip()
        if name == concept:
            raise fail(at, f"{owner}: counterfactual concept {name!r} is the branch's actual concept")
        if name in replacements:
            raise fail(at, f"{owner}: duplicate counterfactual concept {name!r}")
        if extra is None:
            replacements[name] = None
            continue
        if not isinstance(extra, Mapping):
            raise fail(at, f"{owner}: the replacements for {name!r} must be a mapping of word -> word, or null")
        words: dict[str, str] = {}
        for old, new in extra.items():
            wat = f"{at}.{old}"
            if not isinstance(old, str) or not old:
                raise fail(wat, f"{owner}: a replacement for {name!r} needs a non-empty string to replace, got {old!r}")
            if not isinstance(new, str):
                raise fail(wat, f"{owner}: the replacement of {old!r} for {name!r} must be a string, got {new!r}")
            if not mentions(text, old) and not (reference is not None and mentions(reference, old)):
                raise fail(
                    wat, f"{owner}: {old!r} (replaced for {name!r}) appears in neither the text nor the reference"
                )
            words[old] = new
        replacements[name] = words or None
    return replacements
