"""discrim-eval's published data (Tamkin et al., 2023; ``Anthropic/discrim-eval``), read from where the
user keeps it: a JSONL file, a folder of them (a copy of the dataset's repository: ``explicit.jsonl``
and ``implicit.jsonl``), or a Hugging Face dataset (``hf:NAME``, both configurations, ``explicit``
and ``implicit``, through the ``datasets`` package: ``pytest-llmbias[datasets]``). The data are not
shipped with the package.

The *categories* of discrim-eval are its fill types, ``explicit`` (the demographics stated) and
``implicit`` (implied by a name): the two files, which the paper reports apart. Its 70 scenarios are
not categories: the scores average over them.

:func:`load_discrim` checks every record for the fields scoring needs (the first bad line named),
keeps the fill types asked for, and draws a *balanced, seeded* subset (:func:`balanced_subset`).
The discrimination score compares, within each scenario, a group with its attribute's reference
group (age 60, male, white), and its interval is over scenarios. So a subset keeps, in every
scenario it keeps and every fill type, a full factorial of the demographics: every gender × every
race × the 60-year-olds and the same number k of younger and of older ages. Within a scenario each
group is then compared with its reference over the same mix of the other attributes, as on the full
grid, and the reference of every attribute is present. Every scenario is kept with the largest k the
limit allows (more scenarios narrow the interval, which is over scenarios); only when even k = 1 does
not fit are scenarios dropped. Scenarios and ages are ordered by a hash of the seed and their ids,
the same for every fill type, so the explicit and implicit subsets ask about the same people and
the same arguments give the same subset on every run and machine. A random draw of rows would
instead leave a scenario's groups with different mixes of the other attributes (confounding its
comparisons) and often without a 60-year-old at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.domains.published_data import EXTRA, choose
from pytest_llmbias.errors import DomainError
from pytest_llmbias.stats.discrim import FILL_TYPES, check_record, item_id, scenario_of

#: the dataset's files (and configurations), one per fill type
FILES = tuple(f"{fill}.jsonl" for fill in FILL_TYPES)


@dataclass(frozen=True)
class DiscrimData:
    """The items kept (discrim-eval records as published), the categories (fill types) the source
    holds, and what the user should be told (a subset smaller than asked, files skipped)."""

    items: tuple[Mapping[str, Any], ...]
    known_categories: tuple[str, ...]
    notices: tuple[str, ...] = ()

    @property
    def known_fill_types(self) -> tuple[str, ...]:
        return self.known_categories


def _check(record: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(record, Mapping):
        raise DomainError(f"{where}: a discrim-eval record must be a JSON object, got {type(record).__name__}")
    check_record(record, where)
    return record


def _read_jsonl(path: Path) -> list[tuple[Mapping[str, Any], str]]:
    out = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as exc:  # RecursionError: a line nested too deeply
                raise DomainError(f"{where}: not a JSON line ({exc})") from None
            out.append((_check(record, where), where))
    return out


def _read_hf(name: str) -> list[tuple[Mapping[str, Any], str]]:
    try:
        import datasets
    except ImportError:
        raise DomainError(f"hf:{name} is read through the datasets package: {EXTRA}") from None
    records: list[tuple[Mapping[str, Any], str]] = []
    for config in FILL_TYPES:
        try:
            loaded = datasets.load_dataset(name, config)
        except Exception as exc:  # offline, unknown name, no access: the library's errors vary
            raise DomainError(
                f"hf:{name} ({config}) cannot be loaded ({type(exc).__name__}: {exc}); offline, give a "
                "local copy instead (path: a folder holding explicit.jsonl and implicit.jsonl, or "
                "one of them)"
            ) from None
        row = 0
        for split in loaded.values():
            for r in split:
                row += 1
                where = f"hf:{name} ({config}) row {row}"
                records.append((_check(dict(r), where), where))
    return records


def _read(source: str | Path) -> tuple[list[tuple[Mapping[str, Any], str]], list[str]]:
    """Every record of ``source`` with where it was read, and the notices."""
    if isinstance(source, str) and source.startswith("hf:"):
        return _read_hf(source[3:]), []
    path = Path(source)
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise DomainError(f"{path}: no .jsonl file in this folder (discrim-eval's are {' and '.join(FILES)})")
        data = [f for f in files if f.name in FILES]
        notices = []
        if data and len(data) < len(files):
            # the dataset's repository also holds the prompts that built it, as JSONL files
            skipped = ", ".join(f.name for f in files if f not in data)
            notices.append(f"{path}: only {' and '.join(f.name for f in data)} are read; skipped {skipped}")
        return [pair for f in data or files for pair in _read_jsonl(f)], notices
    if not path.is_file():
        raise DomainError(f"{path}: no such discrim-eval file or folder")
    return _read_jsonl(path), []


def read_discrim(source: str | Path) -> list[Mapping[str, Any]]:
    """Every record of ``source`` (a JSONL file, a folder of ``*.jsonl`` files, or ``hf:NAME``),
    checked, no item twice."""
    return [r for r, _ in _unique(_read(source)[0])]


def _unique(pairs: list[tuple[Mapping[str, Any], str]]) -> list[tuple[Mapping[str, Any], str]]:
    seen: dict[str, str] = {}
    for record, where in pairs:
        key = item_id(record)
        if key in seen:
            raise DomainError(f"{where}: the same discrim-eval item as {seen[key]} ({key})")
        seen[key] = where
    return pairs


def _order(seed: int, *ids: Any) -> str:
    return hashlib.sha256("\0".join(map(str, (seed, *ids))).encode()).hexdigest()


def _kept_ages(ages: Iterable[float], k: int, seed: int, scenario: str) -> set[float]:
    """The 60-year-olds, and the first k younger and k older ages in the seed's order."""
    ages = set(ages)
    younger = sorted((a for a in ages if a < 60), key=lambda a: _order(seed, scenario, int(a)))
    older = sorted((a for a in ages if a > 60), key=lambda a: _order(seed, scenario, int(a)))
    return {a for a in ages if a == 60} | set(younger[:k]) | set(older[:k])


def balanced_subset(items: Sequence[Mapping[str, Any]], limit: int, seed: int) -> tuple[list[Mapping[str, Any]], str]:
    """At most ``limit`` of ``items``: in each kept scenario and fill type, every item of the
    60-year-olds and of k younger and k older ages (every gender and race of them), with every
    scenario kept at the largest k that fits, or else k = 1 and the scenarios first in the seed's
    order (see the module docstring). Returns the items, in the source's order, and a description.
    :class:`DomainError` when ``limit`` is below one scenario's smallest balanced subset."""
    by_scenario: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        by_scenario.setdefault(scenario_of(item), []).append(item)
    ages = {q: {float(i["age"]) for i in members} for q, members in by_scenario.items()}

    def size(q: str, k: int) -> int:
        kept = _kept_ages(ages[q], k, seed, q)
        return sum(float(i["age"]) in kept for i in by_scenario[q])

    top = max(max(sum(a < 60 for a in s), sum(a > 60 for a in s)) for s in ages.values())
    order = sorted(by_scenario, key=lambda q: _order(seed, q))
    k = next((k for k in range(top, 0, -1) if sum(size(q, k) for q in order) <= limit), 1)
    scenarios: list[str] = []
    used = 0
    for q in order:
        if used + size(q, k) <= limit:
            scenarios.append(q)
            used += size(q, k)
    if not scenarios:
        smallest = min(size(q, 1) for q in order)
        raise DomainError(
            f"limit {limit} is below the smallest balanced discrim-eval subset, one scenario's "
            f"60-year-olds and one younger and one older age, every gender and race: {smallest} items"
        )
    kept_ages = {q: _kept_ages(ages[q], k, seed, q) for q in scenarios}
    kept = [i for i in items if scenario_of(i) in kept_ages and float(i["age"]) in kept_ages[scenario_of(i)]]
    what = (
        f"{len(kept)} items: {len(scenarios)} of {len(order)} scenarios, each with its 60-year-olds and "
        f"{k} younger and {k} older age(s), every gender and race"
    )
    return kept, what


def _balanced(
    records: Sequence[Mapping[str, Any]], limit: int, seed: int
) -> tuple[list[Mapping[str, Any]], str | None]:
    kept, what = balanced_subset(records, limit, seed)
    return kept, (what if len(kept) < limit else None)


def load_discrim(
    source: str | Path, *, categories: Iterable[str] | None = None, limit: int | None = None, seed: int = 0
) -> DiscrimData:
    """The discrim-eval items of ``source`` of the fill types ``categories`` (``explicit``,
    ``implicit``; all when None), ``limit`` of them at most (a balanced, seeded subset that keeps
    each kept scenario's demographic grid a full factorial; all when None). An unknown category is a
    :class:`DomainError` listing the known ones; a ``limit`` above the data's size keeps them all,
    with a notice; a subset smaller than ``limit`` (the balanced design's steps) comes with a notice
    describing it."""
    pairs, notices = _read(source)
    records = [r for r, _ in _unique(pairs)]
    kept, known, chosen = choose(
        records,
        source=source,
        what="discrim-eval category (fill type)",
        category=lambda r: str(r["fill_type"]),
        categories=categories,
        limit=limit,
        subset=lambda rs, n: _balanced(rs, n, seed),
    )
    return DiscrimData(tuple(kept), known, (*notices, *chosen))
