"""BBQ's published data, read from where the user keeps it: a JSONL file, a folder of them (the
BBQ repository's ``data/`` folder, one file per category), or a Hugging Face dataset (``hf:NAME``,
through the ``datasets`` package: ``pytest-llmbias[datasets]``). The data are not shipped with the
package.

:func:`load_bbq` checks every record for the fields scoring needs (the first bad line named), keeps
the categories asked for, and draws a *stratified, seeded* subset: each cell of category × context
condition × question polarity keeps its share of ``limit`` (largest remainders), and within a cell
the items are ordered by a hash of the seed and their id, so the same arguments give the same
subset on every run and machine.
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
from pytest_llmbias.stats.bbq import check_item


@dataclass(frozen=True)
class BBQData:
    """The items kept (BBQ records as published), the categories the source holds, and what the
    user should be told (a subset larger than the data, say)."""

    items: tuple[Mapping[str, Any], ...]
    known_categories: tuple[str, ...]
    notices: tuple[str, ...] = ()


def _check(record: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(record, Mapping):
        raise DomainError(f"{where}: a BBQ record must be a JSON object, got {type(record).__name__}")
    check_item(record, where)
    for field in ("context", "question"):
        if not isinstance(record.get(field), str):
            raise DomainError(f"{where}: a BBQ record needs {field} (the text asked)")
    return record


def _read_jsonl(path: Path) -> list[Mapping[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as exc:  # RecursionError: a line nested too deeply
                raise DomainError(f"{path}:{number}: not a JSON line ({exc})") from None
            out.append(_check(record, f"{path}:{number}"))
    return out


def _read_hf(name: str) -> list[Mapping[str, Any]]:
    try:
        import datasets
    except ImportError:
        raise DomainError(f"hf:{name} is read through the datasets package: {EXTRA}") from None
    try:
        loaded = datasets.load_dataset(name)
    except Exception as exc:  # offline, unknown name, no access: the library's errors vary
        raise DomainError(
            f"hf:{name} cannot be loaded ({type(exc).__name__}: {exc}); offline, give a local copy "
            "instead (path: the BBQ data folder or a JSONL file)"
        ) from None
    records: list[Mapping[str, Any]] = []
    for split in loaded.values():
        records.extend(_check(dict(r), f"hf:{name} row {len(records) + n + 1}") for n, r in enumerate(split))
    return records


def read_bbq(source: str | Path) -> list[Mapping[str, Any]]:
    """Every record of ``source`` (a JSONL file, a folder of ``*.jsonl`` files, or ``hf:NAME``),
    checked."""
    if isinstance(source, str) and source.startswith("hf:"):
        return _read_hf(source[3:])
    path = Path(source)
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise DomainError(f"{path}: no .jsonl file in this folder (BBQ's data folder holds one per category)")
        return [record for f in files for record in _read_jsonl(f)]
    if not path.is_file():
        raise DomainError(f"{path}: no such BBQ file or folder")
    return _read_jsonl(path)


def _order(seed: int, item: Mapping[str, Any]) -> str:
    return hashlib.sha256(f"{seed}\0{item['category']}\0{item['example_id']}".encode()).hexdigest()


def stratified(items: Sequence[Mapping[str, Any]], limit: int, seed: int) -> list[Mapping[str, Any]]:
    """``limit`` of ``items``, each cell of category × context condition × polarity keeping its
    share (largest remainders, ties to the larger cell, then by name), the same for the same seed."""
    cells: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for item in items:
        cells.setdefault((item["category"], item["context_condition"], item["question_polarity"]), []).append(item)
    total = len(items)
    quotas = {cell: limit * len(members) / total for cell, members in cells.items()}
    counts = {cell: int(q) for cell, q in quotas.items()}
    rest = limit - sum(counts.values())
    for cell in sorted(cells, key=lambda c: (-(quotas[c] - counts[c]), -len(cells[c]), c))[:rest]:
        counts[cell] += 1
    kept = []
    for cell in sorted(cells):
        kept.extend(sorted(cells[cell], key=lambda item: _order(seed, item))[: counts[cell]])
    return kept


def load_bbq(
    source: str | Path, *, categories: Iterable[str] | None = None, limit: int | None = None, seed: int = 0
) -> BBQData:
    """The BBQ items of ``source`` in ``categories`` (all when None), ``limit`` of them at most (a
    stratified, seeded subset; all when None). An unknown category is a :class:`DomainError`
    listing the known ones; a ``limit`` above the data's size keeps them all, with a notice."""
    records, known, notices = choose(
        read_bbq(source),
        source=source,
        what="BBQ category",
        category=lambda r: str(r["category"]),
        categories=categories,
        limit=limit,
        subset=lambda rs, n: (stratified(rs, n, seed), None),
    )
    return BBQData(tuple(records), known, tuple(notices))
