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
    counterfactual:                        # optional: see pytest_llmbias.domains.counterfactual_file
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.domains.counterfactual_file import parse_counterfactual
from pytest_llmbias.domains.domain import Category, Domain, Pair, Perspective, Question, Topic
from pytest_llmbias.errors import ConfigError, DomainError

BUILTIN_DIR = Path(__file__).parent / "builtin"
_SUFFIXES = (".yaml", ".yml")
_TOP_KEYS = (
    "name",
    "title",
    "description",
    "focus",
    "instruction",
    "languages",
    "categories",
    "counterfactual",
    "perspectives",
    "topics",
    "rubric",
    "anchors",
    "anchor_misses",
    "pairs",
)
_REQUIRED = ("name", "description", "focus", "instruction")
#: the keys a question may have (id, and text or split)
_QUESTION_KEYS = frozenset(("id", "text", "split", "reference"))


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


def load_domain(
    name_or_path: str | Path, search_paths: Iterable[Path] = (), sources: Any = None, *, cache: Path | None = None
) -> Domain:
    """Load a domain by name (configured paths first, then built-ins) or by file path. ``sources``
    (the settings' ``domains`` section): a published paired-prompt file configured there
    (``evenhandedness``) is the domain of that name. ``cache``: a folder where a file's parsed
    YAML is kept for the next run (see :mod:`pytest_llmbias.domains.parsed_cache`); the domain is
    validated from it as from the file, so a kept parse fails, or not, as the file does.

    Raises :class:`DomainError` naming the file and line for malformed files, and listing the known
    names for an unknown one.
    """
    paired = getattr(sources, "paired", None)
    source = paired(str(name_or_path)) if paired is not None else None
    if source is not None:
        from pytest_llmbias.domains.pairs import published_domain

        return published_domain(source)
    search_paths = [Path(p) for p in search_paths]
    for directory in search_paths:
        if not directory.exists():
            raise DomainError(f"configured domain path {directory} does not exist")
    candidate = Path(name_or_path)
    if candidate.suffix in _SUFFIXES or isinstance(name_or_path, Path) or len(candidate.parts) > 1:
        if not candidate.is_file():
            raise DomainError(f"domain file {candidate} does not exist")
        return _load_file(candidate, cache)
    known = list_domains(search_paths)
    if str(name_or_path) not in known:
        raise DomainError(
            f"unknown domain {str(name_or_path)!r}; known domains: {', '.join(sorted(known)) or 'none'}"
            + (f" (searched {', '.join(str(p) for p in search_paths)} and the built-ins)" if search_paths else "")
        )
    return _load_file(known[str(name_or_path)], cache)


def _load_file(path: Path, cache: Path | None = None) -> Domain:
    from pytest_llmbias.config.yamlutil import load_yaml_text, load_yaml_with_lines

    lines: Mapping[str, int]
    if cache is None:
        data, lines = load_yaml_with_lines(path, error=DomainError)
        return _named(parse_domain(data, path=path, lines=lines), path, lines)
    from pytest_llmbias.domains import parsed_cache

    try:
        content = path.read_bytes()
        # as Path.read_text reads it: universal newlines
        text = content.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise DomainError(f"{path}: cannot read: {exc}") from None
    entry = parsed_cache.entry_path(cache, content)
    kept = parsed_cache.read_entry(entry, lambda: load_yaml_text(text, source=str(path), error=DomainError)[1])
    data, lines = kept if kept is not None else load_yaml_text(text, source=str(path), error=DomainError)
    domain = _named(parse_domain(data, path=path, lines=lines), path, lines)
    if kept is None:
        parsed_cache.write_entry(entry, data, lines)
    return domain


def _named(domain: Domain, path: Path, lines: Mapping[str, int]) -> Domain:
    """``domain``, read from ``path``, once its name is the file's."""
    if domain.name != path.stem:
        raise DomainError(
            f"{path}:{lines.get('name', 1)}: domain name {domain.name!r} does not match the file name "
            f"{path.stem!r}; rename one of them"
        )
    return domain


def parse_domain(data: Any, *, path: Path | None = None, lines: Mapping[str, int] | None = None) -> Domain:
    """Validate parsed YAML into a :class:`Domain`; ``lines`` (dotted key -> line) is read only
    to name a line in an error."""
    lines = {} if lines is None else lines
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
    taken = (
        {q.id: f"a question id (category {c.id!r})" for c in categories for q in c.questions}
        if data.get("counterfactual") is not None
        else {}
    )
    counterfactual = parse_counterfactual(data.get("counterfactual"), where, fail, taken)
    perspectives, topics = _parse_topics(data.get("perspectives"), data.get("topics"), fail)
    pairs: tuple[Pair, ...] = ()
    if data.get("pairs") is not None:
        from pytest_llmbias.domains.pairs import pairs_domain, parse_pairs

        if categories:
            raise fail("pairs", "a domain of 'pairs' asks their prompts: leave 'categories' out")
        pairs = parse_pairs(data["pairs"], fail)
        categories = pairs_domain("", pairs, title="", description="").categories
    if not categories and counterfactual is None and not topics:
        raise DomainError(
            f"{label}: the domain has no questions (no 'categories', 'counterfactual', 'topics' or 'pairs')"
        )
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
    rubric, anchors, misses = _parse_judging(data, path, where, fail)
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
        pairs=pairs,
        rubric=rubric,
        anchors=anchors,
        anchor_misses=misses,
    )


def _parse_judging(data: Mapping[str, Any], path: Path | None, where: Any, fail: Any) -> tuple[Path | None, tuple, int]:
    """The domain's judge rubric (a path relative to the domain file), its anchor answers (scores
    checked against the rubric's scale once the rubric is known) and the anchors a judge may miss."""
    from pytest_llmbias.config.rubric_file import parse_anchors

    rubric = data.get("rubric")
    if rubric is not None:
        if not isinstance(rubric, str) or not rubric.strip():
            raise fail("rubric", "'rubric' must be the path of a rubric file, relative to the domain file")
        rubric = Path(rubric) if Path(rubric).is_absolute() or path is None else (path.parent / rubric).resolve()
    anchors = parse_anchors(data.get("anchors"), key="anchors", where=where, scale=None, error=DomainError)
    misses = data.get("anchor_misses", 0)
    if isinstance(misses, bool) or not isinstance(misses, int) or misses < 0:
        raise fail("anchor_misses", f"'anchor_misses' must be a whole number >= 0, got {misses!r}")
    if "anchor_misses" in data and misses >= max(len(anchors), 1):
        raise fail(
            "anchor_misses",
            f"'anchor_misses' {misses} allows every one of the {len(anchors)} anchor(s) "
            "to be missed: it must be smaller than their number",
        )
    return rubric, anchors, misses


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
            # the common question, {id, text} with both non-blank strings, is checked and built in a
            # few steps: a domain of ten thousand questions is validated on every run
            if (
                type(q) is dict
                and len(q) == 2
                and type(qid := q.get("id")) is str
                and type(text := q.get("text")) is str
            ):
                qid, text = qid.strip(), text.strip()
                if qid and text and qid not in seen_questions:
                    seen_questions[qid] = cid
                    questions.append(_question(qid, text, cid))
                    continue
            qkey = f"{key}.questions[{j}]"
            plain = type(q) is dict and q.keys() <= _QUESTION_KEYS
            if not plain and not isinstance(q, Mapping):
                raise fail(qkey, "each question must be a mapping with keys id, text")
            if not plain:
                for k in q:
                    if k not in _QUESTION_KEYS:
                        raise fail(
                            f"{qkey}.{k}", f"unknown key {k!r} in a question; accepted keys: id, text, split, reference"
                        )
            qid = q.get("id")
            if not isinstance(qid, str) or not qid.strip():
                raise fail(qkey, "a question needs a non-empty string 'id'")
            qid = qid.strip()
            if ("text" in q) == ("split" in q):
                raise fail(qkey, f"question {qid!r} needs either a 'text' or a 'split' pair, not both")
            text = q.get("text")
            if type(text) is str and (stripped := text.strip()):
                parsed: list[tuple[str, dict[str, str], str, str | None]] = [(stripped, {}, qid, None)]
            elif "text" in q:
                parsed = [_question_text(text, qid, f"{qkey}.text", fail) + (qid, None)]
            else:
                parsed = [
                    (*half, f"{qid}:{tag}", qid)
                    for tag, half in zip("ab", _split_pair(q["split"], qid, f"{qkey}.split", fail), strict=True)
                ]
            for text, texts, question_id, pair in parsed:
                if question_id in seen_questions:
                    raise fail(
                        f"{qkey}.id",
                        f"duplicate question id {question_id!r} (also in category {seen_questions[question_id]!r})",
                    )
                seen_questions[question_id] = cid
                questions.append(
                    Question(
                        id=question_id, text=text, category=cid, reference=q.get("reference"), texts=texts, split=pair
                    )
                )
        name = cat.get("name") or cid
        weight = cat.get("weight")
        if weight is not None and not (
            isinstance(weight, (int, float)) and not isinstance(weight, bool) and math.isfinite(weight) and weight > 0
        ):
            raise fail(f"{key}.weight", f"category {cid!r}: 'weight' must be a positive number, got {weight!r}")
        categories.append(
            Category(
                id=cid, name=str(name), questions=tuple(questions), weight=None if weight is None else float(weight)
            )
        )
    return tuple(categories)


def _question(qid: str, text: str, category: str) -> Question:
    """``Question(id=qid, text=text, category=category)``, without the frozen dataclass's
    ``__init__`` and its one ``object.__setattr__`` a field: the fields left out are read from the
    class, at their defaults, as ``__init__`` would have set them."""
    question = object.__new__(Question)
    vars(question).update(id=qid, text=text, category=category, texts={})
    return question


def _parse_topics(
    raw_perspectives: Any, raw_topics: Any, fail: Any
) -> tuple[tuple[Perspective, ...], tuple[Topic, ...]]:
    """The ``perspectives`` (each ``{id, name, phrase, neutral}``) and the ``topics`` (each ``{id,
    title}``, optionally with its own ``perspectives``: ids among the declared ones)."""
    if raw_perspectives is None and raw_topics is None:
        return (), ()
    if not isinstance(raw_perspectives, Sequence) or isinstance(raw_perspectives, str) or len(raw_perspectives) < 2:
        raise fail("perspectives", "'perspectives' must list at least two {id, name, phrase} to write topics from")
    perspectives: list[Perspective] = []
    for i, p in enumerate(raw_perspectives):
        key = f"perspectives[{i}]"
        if not isinstance(p, Mapping):
            raise fail(key, "each perspective must be a mapping with keys id, name, phrase, neutral")
        unknown = [k for k in p if k not in ("id", "name", "phrase", "neutral")]
        if unknown:
            raise fail(
                f"{key}.{unknown[0]}",
                f"unknown key {unknown[0]!r} in a perspective; accepted keys: id, name, phrase, neutral",
            )
        pid, phrase = p.get("id"), p.get("phrase")
        if not isinstance(pid, str) or not pid.strip() or not isinstance(phrase, str) or not phrase.strip():
            raise fail(key, "a perspective needs a non-empty 'id' and 'phrase' (e.g. \"a Democratic\")")
        if pid in {q.id for q in perspectives}:
            raise fail(f"{key}.id", f"duplicate perspective id {pid!r}")
        perspectives.append(
            Perspective(
                id=pid.strip(),
                name=str(p.get("name") or pid).strip(),
                phrase=phrase.strip(),
                neutral=bool(p.get("neutral", False)),
            )
        )
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
            raise fail(
                f"{key}.{unknown[0]}", f"unknown key {unknown[0]!r} in a topic; accepted keys: id, title, perspectives"
            )
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
            raise fail(
                f"{key}.perspectives",
                f"topic {tid!r}: unknown perspective {strange[0]!r}; declared: {', '.join(known)}",
            )
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
            not isinstance(pair, Sequence)
            or isinstance(pair, str)
            or len(pair) != 2
            or not all(isinstance(t, str) and t.strip() for t in pair)
        ):
            raise fail(
                f"{key}.{lang}",
                f"question {qid!r}: split.{lang} must hold exactly two non-empty questions, got {pair!r}",
            )
        for half, text in zip(halves, pair, strict=True):
            half[str(lang)] = text.strip()
    if "en" not in halves[0]:
        raise fail(key, f"question {qid!r}: the split pair needs its English questions ('en')")
    return [(h["en"], h) for h in halves]
