"""Where the public benchmarks' data live: the ``bbq`` and ``discrim_eval`` entries of the settings
file's ``domains:`` section, checked when the settings are read (standard library only: the data are
read when a gate asks for them, by :mod:`pytest_llmbias.domains.benchmarks`).

::

    domains:
      bbq: {path: data/bbq, categories: [Age, Gender_identity], limit: 800, seed: 0}
      discrim_eval: {hf: Anthropic/discrim-eval, categories: [explicit], limit: 1350}
      evenhandedness: {path: data/eval_set.csv, categories: [ECONOMY], templates: [reasoning], limit: 450}

``path`` (a JSONL file or a folder of them, relative to the settings file) or ``hf`` (a Hugging Face
dataset name, read through ``datasets``); ``categories`` keeps those subsets (BBQ's categories,
discrim-eval's fill types); ``limit`` keeps a stratified, seeded subset (``null``: every item;
default :data:`DEFAULT_LIMITS`);
``seed`` chooses which. ``evenhandedness`` (the published paired-prompt file, a CSV: a domain of
that name, see :mod:`pytest_llmbias.domains.pairs`) takes ``path`` only, and ``templates`` keeps
those task framings (``template_category``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import ConfigError

DEFAULT_LIMITS: dict[str, int | None] = {"bbq": 800, "discrim_eval": 1350}
"""The subset asked when ``limit`` is not given: BBQ items, discrim-eval rows (people). From
``benchmarks/validity.py --gate benchmark`` (see the validity table in docs/gates/benchmarks.md): at
800 BBQ items (about 400 ambiguous ones, which the default metric asks) a target answering like two baselines fails 2 %
of runs and one picking the stereotyped answer in 10 % more of the ambiguous items fails 94 %; at
600 items the false alarm was 6.5 %. At 1,350 discrim-eval rows (30 scenarios × the 45 people of a
balanced grid) a target deciding like two baselines fails 3 % of runs and one that is 1 logit
harder on one group 92 %; at 20 scenarios a quarter of good targets fail."""

DATASETS = tuple(DEFAULT_LIMITS)
#: the keys of one entry
KEYS = ("path", "hf", "categories", "limit", "seed")
#: published paired-prompt files, a domain each (:mod:`pytest_llmbias.domains.pairs`), and their
#: default subset
PAIRED_LIMITS: dict[str, int | None] = {"evenhandedness": 450}
"""From ``benchmarks/validity.py --gate evenhanded`` (the table in docs/gates/evenhandedness.md): at 450 pairs a target
judged like its release fails 4 % of runs and one that serves one side worse on 10 percentage points
more pairs fails 87-88 % (evenhandedness, refusal_gap); at 150 pairs that power is 44-54 %, and a
5-point regression needs the whole file."""
PAIRED_KEYS = ("path", "categories", "templates", "limit", "seed")


@dataclass(frozen=True)
class BenchmarkSource:
    """One benchmark's data: ``dataset`` (``bbq`` or ``discrim_eval``), read from ``path`` or
    ``hf``, its ``categories`` (None: all), at most ``limit`` items (None: all) chosen by ``seed``."""

    dataset: str
    path: Path | None = None
    hf: str | None = None
    categories: tuple[str, ...] | None = None
    limit: int | None = None
    seed: int = 0
    #: a paired-prompt file's task framings kept (``template_category``; None: all)
    templates: tuple[str, ...] | None = None

    @property
    def location(self) -> str:
        """The source as the loaders take it: a path, or ``hf:NAME``."""
        return f"hf:{self.hf}" if self.hf else str(self.path)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "path": None if self.path is None else str(self.path),
            "hf": self.hf,
            "categories": None if self.categories is None else list(self.categories),
            "limit": self.limit,
            "seed": self.seed,
            **({"templates": list(self.templates)} if self.templates is not None else {}),
        }


def parse_benchmark(dataset: str, raw: Any, where: str, base_dir: Path) -> BenchmarkSource:
    """The ``domains.<dataset>`` entry ``raw`` checked; ConfigError naming the key, prefixed by
    ``where`` (the file and line)."""
    key = f"domains.{dataset}"
    paired = dataset in PAIRED_LIMITS
    keys = PAIRED_KEYS if paired else KEYS
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where}: '{key}' must be a mapping with 'path' or 'hf' (and optionally categories, "
            f"limit, seed), got {raw!r}"
        )
    unknown = [k for k in raw if k not in keys]
    if unknown:
        raise ConfigError(f"{where}: unknown key '{key}.{unknown[0]}'; accepted keys: {', '.join(keys)}")
    path, hf = raw.get("path"), raw.get("hf")
    if (path is None) == (hf is None):
        raise ConfigError(
            f"{where}: '{key}' needs exactly one of 'path' (a local copy) or 'hf' (a Hugging Face dataset name)"
        )
    for name, value in (("path", path), ("hf", hf)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}: '{key}.{name}' must be a non-empty string, got {value!r}")

    def names(name: str) -> tuple[str, ...] | None:
        value = raw.get(name)
        if value is None:
            return None
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(c, str) and c for c in value):
            raise ConfigError(f"{where}: '{key}.{name}' must be a list of names, got {raw.get(name)!r}")
        return tuple(value)

    categories = names("categories")
    limit = raw.get("limit", (PAIRED_LIMITS if paired else DEFAULT_LIMITS)[dataset])
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ConfigError(
            f"{where}: '{key}.limit' must be a positive whole number (or null: every item), got {limit!r}"
        )
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{where}: '{key}.seed' must be a whole number, got {seed!r}")
    return BenchmarkSource(
        dataset=dataset,
        path=None if path is None else (base_dir / path.strip()).resolve(),
        hf=None if hf is None else hf.strip(),
        categories=categories,
        limit=limit,
        seed=seed,
        templates=names("templates") if paired else None,
    )
