"""The public benchmarks' items as a gate asks them: loaded once per source (BBQ through
:mod:`pytest_llmbias.domains.bbq_file`, discrim-eval through
:mod:`pytest_llmbias.domains.discrim_file`), each with a key that names it in the store, in reports
and in a recorded release, its category, and a content hash that tells a changed item from a kept one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.config.benchmark_sources import BenchmarkSource
from pytest_llmbias.errors import ConfigError

#: how each dataset is named in messages
TITLES = {"bbq": "BBQ", "discrim_eval": "discrim-eval"}


@dataclass(frozen=True)
class BenchmarkItems:
    """A benchmark's items as loaded from its ``source``: the records as published, the categories
    the source holds (BBQ's categories, discrim-eval's fill types), and notices for the user."""

    source: BenchmarkSource
    items: tuple[Mapping[str, Any], ...]
    known_categories: tuple[str, ...]
    notices: tuple[str, ...] = ()

    @property
    def dataset(self) -> str:
        return self.source.dataset

    def key(self, item: Mapping[str, Any]) -> str:
        return item_key(self.dataset, item)

    def category(self, item: Mapping[str, Any]) -> str:
        return item_category(self.dataset, item)

    def select(self, categories: tuple[str, ...] | None) -> list[Mapping[str, Any]]:
        """The items of ``categories`` (all when None); ConfigError for a category that is not
        among the loaded ones (the loaded ones listed)."""
        if categories is None:
            return list(self.items)
        loaded = sorted({self.category(i) for i in self.items})
        unknown = [c for c in categories if c not in loaded]
        if unknown:
            raise ConfigError(
                f"{TITLES[self.dataset]}: no category {', '.join(map(repr, unknown))} among the items "
                f"loaded; they hold {', '.join(loaded)}"
            )
        return [i for i in self.items if self.category(i) in categories]


def item_key(dataset: str, item: Mapping[str, Any]) -> str:
    """The item's name: ``<category>/<example_id>`` for BBQ (its ids restart in each category),
    discrim-eval's :func:`~pytest_llmbias.stats.discrim.item_id`."""
    if dataset == "bbq":
        return f"{item['category']}/{item['example_id']}"
    from pytest_llmbias.stats.discrim import item_id

    return item_id(item)


def item_category(dataset: str, item: Mapping[str, Any]) -> str:
    """BBQ's ``category``; discrim-eval's fill type (``explicit`` or ``implicit``)."""
    if dataset == "bbq":
        return str(item["category"])
    return str(item.get("fill_type") or "explicit")


def item_hash(item: Mapping[str, Any]) -> str:
    """A short content hash of one record, for a recorded release's manifest."""
    body = json.dumps(item, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


_LOADED: dict[tuple[BenchmarkSource, tuple[int, int] | None], BenchmarkItems] = {}


def _stamp(source: BenchmarkSource) -> tuple[int, int] | None:
    """A local file's modification time and size: an edited file is read again, even in a process
    that runs pytest more than once."""
    if source.path is None:
        return None
    try:
        stat = source.path.stat()
    except OSError:  # missing: the loader says so
        return None
    return stat.st_mtime_ns, stat.st_size


def load_benchmark(source: BenchmarkSource) -> BenchmarkItems:
    """The items of ``source`` (read once per process and version of its file); DomainError for a
    missing or malformed file (the first bad line named), an unknown category, or an unreachable
    ``hf:`` dataset."""
    key = (source, _stamp(source))
    if key not in _LOADED:
        if source.dataset == "bbq":
            from pytest_llmbias.domains.bbq_file import load_bbq

            bbq = load_bbq(source.location, categories=source.categories, limit=source.limit, seed=source.seed)
            _LOADED[key] = BenchmarkItems(source, bbq.items, bbq.known_categories, bbq.notices)
        else:
            from pytest_llmbias.domains.discrim_file import load_discrim

            discrim = load_discrim(source.location, categories=source.categories, limit=source.limit, seed=source.seed)
            _LOADED[key] = BenchmarkItems(
                source, tuple(discrim.items), tuple(discrim.known_categories), tuple(discrim.notices)
            )
    return _LOADED[key]


def benchmark_hashes(source: BenchmarkSource) -> dict[str, str]:
    """Item key -> content hash of every item ``source`` loads."""
    loaded = load_benchmark(source)
    return {loaded.key(item): item_hash(item) for item in loaded.items}
