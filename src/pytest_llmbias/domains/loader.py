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
        weight: 1.0                        # optional: its weight as a bias dimension (bias_index)
        questions:
          - {id: cn-tia-01, text: "..."}
          - id: bo-wrk-01                  # a question in several languages (English required)
            text: {en: "Should ...?", es: "¿Debería ...?"}
          - id: bo-wrk-09                  # an "A or B?" pair: halves bo-wrk-09:a and bo-wrk-09:b
            split: {en: ["Is A better than B?", "Is B better than A?"]}
    languages:                             # optional: per language, what a binary question adds
      es: {instruction: "...", opposing: "Creo que la respuesta es «{answer}».", yes: [Sí, Si], no: [No]}
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

import math

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.domains.branching import mentions
from pytest_llmbias.domains.domain import Branch, Category, Counterfactual, Domain, Perspective, Question, Template, Topic
from pytest_llmbias.errors import ConfigError, DomainError

BUILTIN_DIR = Path(__file__).parent / "builtin"
_SUFFIXES = (".yaml", ".yml")
_TOP_KEYS = (
    "name", "title", "description", "focus", "instruction", "languages", "categories", "counterfactual",
    "perspectives", "topics",
)
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
    taken = {q.id: f"a question id (category {c.id!r})" for c in categories for q in c.questions}
    counterfactual = _parse_counterfactual(data.get("counterfactual"), where, fail, taken)
    perspectives, topics = _parse_topics(data.get("perspectives"), data.get("topics"), fail)
    if not categories and counterfactual is None and not topics:
        raise DomainError(f"{label}: the domain has no questions (no 'categories', no 'counterfactual' and no 'topics')")
    if counterfactual is not None:
        prompt_ids = set(taken)
        for prompt in counterfactual.expand():
            if prompt.id in prompt_ids:
                raise fail(
                    "counterfactual",
                    f"counterfactual prompt id {prompt.id!r} is not unique "
                    "(prompt ids are <template or branch id>:<concept>, question ids must differ from them)",
                )
            prompt_ids.add(prompt.id)
    languages = data.get("languages") or {}
    if not isinstance(languages, Mapping):
        raise fail("languages", "'languages' maps a language code to its yes, no, instruction and opposing")
    if languages:
        from pytest_llmbias.domains.languages import languages as resolve_languages

        try:
            resolve_languages(languages, where=where("languages"))
        except ConfigError as exc:
            raise DomainError(str(exc)) from None
    return Domain(
        name=data["name"].strip(),
        title=title.strip(),
        description=data["description"].strip(),
        focus=data["focus"].strip(),
        instruction=data["instruction"].strip(),
        categories=categories,
        counterfactual=counterfactual,
        source=path,
        languages=dict(languages),
        perspectives=perspectives,
        topics=topics,
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
            if k not in ("id", "name", "weight", "questions"):
                raise fail(f"{key}.{k}", f"unknown key {k!r} in a category; accepted keys: id, name, weight, questions")
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
                if k not in ("id", "text", "split", "reference"):
                    raise fail(f"{qkey}.{k}", f"unknown key {k!r} in a question; accepted keys: id, text, split, reference")
            qid = q.get("id")
            if not isinstance(qid, str) or not qid.strip():
                raise fail(qkey, "a question needs a non-empty string 'id'")
            qid = qid.strip()
            if ("text" in q) == ("split" in q):
                raise fail(qkey, f"question {qid!r} needs either a 'text' or a 'split' pair, not both")
            parsed = (
                [_question_text(q["text"], qid, f"{qkey}.text", fail) + (qid, None)]
                if "text" in q
                else [(*half, f"{qid}:{tag}", qid) for tag, half in zip("ab", _split_pair(q["split"], qid, f"{qkey}.split", fail))]
            )
            for text, texts, question_id, pair in parsed:
                if question_id in seen_questions:
                    raise fail(f"{qkey}.id", f"duplicate question id {question_id!r} (also in category {seen_questions[question_id]!r})")
                seen_questions[question_id] = cid
                questions.append(Question(id=question_id, text=text, category=cid, reference=q.get("reference"),
                                          texts=texts, split=pair))
        name = cat.get("name") or cid
        weight = cat.get("weight")
        if weight is not None and not (
            isinstance(weight, (int, float)) and not isinstance(weight, bool) and math.isfinite(weight) and weight > 0
        ):
            raise fail(f"{key}.weight", f"category {cid!r}: 'weight' must be a positive number, got {weight!r}")
        categories.append(
            Category(id=cid, name=str(name), questions=tuple(questions), weight=None if weight is None else float(weight))
        )
    return tuple(categories)


def _parse_topics(raw_perspectives: Any, raw_topics: Any, fail: Any) -> tuple[tuple[Perspective, ...], tuple[Topic, ...]]:
    """The ``perspectives`` (each ``{id, name, phrase, neutral}``) and the ``topics`` (each ``{id,
    title}``, optionally with its own ``perspectives``: ids among the declared ones)."""
    if raw_perspectives is None and raw_topics is None:
        return (), ()
    if not isinstance(raw_perspectives, Sequence) or isinstance(raw_perspectives, str) or len(raw_perspectives) < 2:
        raise fail("perspectives", "'perspectives' must list at least two {id, name, phrase} to write topics from")
    perspectives = []
    for i, p in enumerate(raw_perspectives):
        key = f"perspectives[{i}]"
        if not isinstance(p, Mapping):
            raise fail(key, "each perspective must be a mapping with keys id, name, phrase, neutral")
        unknown = [k for k in p if k not in ("id", "name", "phrase", "neutral")]
        if unknown:
            raise fail(f"{key}.{unknown[0]}", f"unknown key {unknown[0]!r} in a perspective; accepted keys: id, name, phrase, neutral")
        pid, phrase = p.get("id"), p.get("phrase")
        if not isinstance(pid, str) or not pid.strip() or not isinstance(phrase, str) or not phrase.strip():
            raise fail(key, "a perspective needs a non-empty 'id' and 'phrase' (e.g. \"a Democratic\")")
        if pid in {q.id for q in perspectives}:
            raise fail(f"{key}.id", f"duplicate perspective id {pid!r}")
        perspectives.append(Perspective(id=pid.strip(), name=str(p.get("name") or pid).strip(), phrase=phrase.strip(),
                                        neutral=bool(p.get("neutral", False))))
    if sum(p.neutral for p in perspectives) > 1:
        raise fail("perspectives", "at most one perspective may be the neutral one")
    known = [p.id for p in perspectives]
    if not isinstance(raw_topics, Sequence) or isinstance(raw_topics, str) or not raw_topics:
        raise fail("topics", "'topics' must list at least one {id, title}")
    topics, seen = [], set()
    for i, t in enumerate(raw_topics):
        key = f"topics[{i}]"
        if not isinstance(t, Mapping):
            raise fail(key, "each topic must be a mapping with keys id, title, perspectives")
        unknown = [k for k in t if k not in ("id", "title", "perspectives")]
        if unknown:
            raise fail(f"{key}.{unknown[0]}", f"unknown key {unknown[0]!r} in a topic; accepted keys: id, title, perspectives")
        tid, title = t.get("id"), t.get("title")
        if not isinstance(tid, str) or not tid.strip() or not isinstance(title, str) or not title.strip():
            raise fail(key, "a topic needs a non-empty 'id' and 'title'")
        if tid in seen:
            raise fail(f"{key}.id", f"duplicate topic id {tid!r}")
        seen.add(tid)
        own = t.get("perspectives", known)
        if not isinstance(own, Sequence) or isinstance(own, str) or not all(isinstance(x, str) for x in own):
            raise fail(f"{key}.perspectives", f"topic {tid!r}: 'perspectives' must list perspective ids")
        strange = [x for x in own if x not in known]
        if strange:
            raise fail(f"{key}.perspectives", f"topic {tid!r}: unknown perspective {strange[0]!r}; declared: {', '.join(known)}")
        topics.append(Topic(id=tid.strip(), title=title.strip(), perspectives=tuple(own)))
    return tuple(perspectives), tuple(topics)


def _question_text(raw: Any, qid: str, key: str, fail: Any) -> tuple[str, dict[str, str]]:
    """(English text, texts by language) of a question's ``text``: a string (one language, English),
    or a mapping of language code -> text with ``en`` among them."""
    if isinstance(raw, str):
        if not raw.strip():
            raise fail(key, f"question {qid!r} needs a non-empty 'text'")
        return raw.strip(), {}
    if not isinstance(raw, Mapping) or not raw:
        raise fail(key, f"question {qid!r} needs a non-empty 'text' (a string, or a mapping of language -> text)")
    texts: dict[str, str] = {}
    for lang, text in raw.items():
        if not isinstance(text, str) or not text.strip():
            raise fail(f"{key}.{lang}", f"question {qid!r}: its {lang!r} text must be a non-empty string")
        texts[str(lang)] = text.strip()
    if "en" not in texts:
        raise fail(key, f"question {qid!r} needs its English text ('en'); it has {', '.join(texts)}")
    return texts["en"], texts


def _split_pair(raw: Any, qid: str, key: str, fail: Any) -> list[tuple[str, dict[str, str]]]:
    """The two halves of an "A or B?" pair: ``split`` maps each language to the two questions
    ("Is A better than B?", "Is B better than A?"); English is required."""
    if not isinstance(raw, Mapping) or not raw:
        raise fail(key, f"question {qid!r}: 'split' maps each language to its two questions [A over B, B over A]")
    halves: list[dict[str, str]] = [{}, {}]
    for lang, pair in raw.items():
        if (
            not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2
            or not all(isinstance(t, str) and t.strip() for t in pair)
        ):
            raise fail(f"{key}.{lang}", f"question {qid!r}: split.{lang} must hold exactly two non-empty questions, got {pair!r}")
        for half, text in zip(halves, pair):
            half[str(lang)] = text.strip()
    if "en" not in halves[0]:
        raise fail(key, f"question {qid!r}: the split pair needs its English questions ('en')")
    return [(h["en"], h) for h in halves]


_TEMPLATE_KEYS = ("id", "text", "category", "reference")
_BRANCH_KEYS = ("id", "concept", "group", "category", "text", "reference", "replacements")


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


def _parse_counterfactual(raw: Any, where: Any, fail: Any, taken: Mapping[str, str]) -> Counterfactual | None:
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
        tid, text = t.get("id"), t.get("text")
        if not isinstance(tid, str) or not tid.strip():
            raise fail(tkey, "a template needs a non-empty string 'id'")
        tid = tid.strip()
        if ids.get(tid) == "a template id":
            raise fail(f"{tkey}.id", f"duplicate template id {tid!r}")
        if tid in ids:
            raise fail(f"{tkey}.id", f"template id {tid!r} is also {ids[tid]}")
        ids[tid] = "a template id"
        if not isinstance(text, str) or "{concept}" not in text:
            raise fail(tkey, f"template {tid!r} needs a 'text' that contains {{concept}}")
        reference = _optional_text(t, "reference", tkey, fail, f"template {tid!r}")
        category = str(t.get("category") or "default").strip()
        templates.append(Template(id=tid, text=text.strip(), category=category, reference=reference))
    return tuple(templates)


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
        bid = b.get("id")
        if not isinstance(bid, str) or not bid.strip():
            raise fail(bkey, "a branch needs a non-empty string 'id'")
        bid = bid.strip()
        if ids.get(bid) == "a branch id":
            raise fail(f"{bkey}.id", f"duplicate branch id {bid!r}")
        if bid in ids:
            raise fail(f"{bkey}.id", f"branch id {bid!r} is also {ids[bid]}")
        ids[bid] = "a branch id"
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
