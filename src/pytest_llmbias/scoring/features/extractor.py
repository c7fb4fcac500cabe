"""The feature interface, the check of what an extractor returns, and :func:`compute_features`.

A *feature* turns each response text into a single finite float (SAGED §3.2). A custom feature
subclasses :class:`FeatureExtractor`; :func:`compute_features` serves stored values and extracts
only the misses, each (text, reference) once, checking the extractor's output before storing it.
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmbias.errors import FeatureError, LLMBiasError
from pytest_llmbias.scoring.features.feature_store import FeatureStore
from pytest_llmbias.store.blobs import BlobCache

__all__ = ["FeatureExtractor", "compute_features"]


class FeatureExtractor(abc.ABC):
    """Turns each response text into one number: the interface of every feature.

    Subclass it, set :attr:`name` (the registry sets it to the registered name) and implement
    :meth:`extract`::

        class WordCount(FeatureExtractor):
            name = "word_count"
            version = "1"  # bump it whenever extract() would give other numbers

            def extract(self, texts, references=None):
                return [float(len(text.split())) for text in texts]

    The contract:

    - :meth:`extract` gets a list of texts and returns one finite real number per text, in order
      (a list, tuple or 1-d array). It is called with the texts whose values are not stored yet,
      each (text, reference) once, and should batch them. A wrong length or a non-finite or
      non-numeric value is a :class:`FeatureError` from :func:`compute_features`, and nothing
      of that call is stored.
    - :attr:`needs_reference`: when True, ``references`` is a list of the same length (the prompt's
      ``reference`` text of the domain file for each response); otherwise it is None and values do
      not depend on references.
    - :attr:`identity`: what stored values are keyed by (with the text and reference). It must change
      whenever the numbers could change: a new algorithm (bump :attr:`version`), another model or
      model file, other weights or settings. Default: ``f"{name}:{version}"``.
    - Values should be deterministic: a stored value is served instead of extracting again.
    """

    name: str = ""
    version: str = "1"
    needs_reference: bool = False

    @property
    def identity(self) -> str:
        """What stored values are keyed by; see the class docstring."""
        return f"{self.name}:{self.version}"

    @abc.abstractmethod
    def extract(self, texts: Sequence[str], references: Sequence[str] | None = None) -> Sequence[float]:
        """One finite float per text, in order (``references``: same length, when needed)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_output(
    label: str, output: Any, items: Sequence[tuple[str, str | None]], positions: Mapping[tuple[str, str | None], int]
) -> dict[tuple[str, str | None], float]:
    """What an extractor returned for ``items`` (its (text, reference) inputs, in order), as floats.

    Promises one finite float per item, keyed by the item, or a :class:`FeatureError` naming
    ``label`` (the extractor) and, for a bad value, the input's index in ``positions``: when
    ``output`` is not a sized iterable of numbers (a string is not), has another length than
    ``items``, or holds a value that is not a finite real number (a bool is not one).
    """
    if isinstance(output, (str, bytes)) or not hasattr(output, "__len__") or not hasattr(output, "__iter__"):
        raise FeatureError(f"{label} returned {type(output).__name__}, not a sequence of numbers")
    output = list(output)
    if len(output) != len(items):
        raise FeatureError(f"{label} returned {len(output)} values for {len(items)} texts")
    checked: dict[tuple[str, str | None], float] = {}
    for pair, value in zip(items, output, strict=True):
        good = isinstance(value, numbers.Real) and not isinstance(value, bool)
        number = float(value) if good else math.nan
        if not good or not math.isfinite(number):
            i = positions[pair]
            kind = "" if good else f" ({type(value).__name__})"
            raise FeatureError(
                f"{label} returned {_describe(value)}{kind} for text #{i} ({_describe(pair[0][:60])}): "
                "every value must be a finite real number. Nothing was stored."
            )
        checked[pair] = number
    return checked


def compute_features(
    extractor: FeatureExtractor,
    texts: Sequence[str],
    references: Sequence[str | None] | None = None,
    store: FeatureStore | BlobCache | None = None,
) -> list[float]:
    """The feature value of every text, in input order, through ``store``.

    Every (text, reference) is looked up in ``store`` first; the misses, each distinct pair once,
    are extracted in one :meth:`FeatureExtractor.extract` call, validated and stored. For an
    extractor that does not need references they are ignored (and not part of the keys).

    Raises :class:`FeatureError` when the extractor needs a reference and one is missing, when its
    name or identity is empty, when it fails, or when its output has the wrong length or holds a
    value that is not a finite real number (naming the extractor and the input index; nothing of
    that call is stored); :class:`StoreError` when the store cannot be used or holds a malformed
    value.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not a string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings, got {type(text).__name__} at index {i}")
    name = getattr(extractor, "name", None)
    if not isinstance(extractor, FeatureExtractor):
        raise TypeError(f"extractor must be a FeatureExtractor, got {type(extractor).__name__}")
    if not isinstance(name, str) or not name:
        raise FeatureError(f"the feature extractor {type(extractor).__name__} has no name (set its `name`)")
    needs_reference = bool(extractor.needs_reference)

    if needs_reference:
        if references is None:
            raise FeatureError(
                f"the feature {name!r} compares each response with a reference text: "
                "the prompt needs a `reference` text in the domain file"
            )
        if isinstance(references, str):
            raise TypeError("references must be a sequence of strings, not a string")
        refs: list[str | None] = list(references)
        if len(refs) != len(texts):
            raise ValueError(f"got {len(texts)} texts and {len(refs)} references")
        for i, ref in enumerate(refs):
            if ref is None:
                raise FeatureError(
                    f"the feature {name!r} compares each response with a reference text, and response #{i} "
                    "has none: the prompt needs a `reference` text in the domain file"
                )
            if not isinstance(ref, str):
                raise TypeError(f"references must be strings, got {type(ref).__name__} at index {i}")
    else:
        refs = [None] * len(texts)
    if not texts:
        return []

    identity = extractor.identity
    if not isinstance(identity, str) or not identity:
        raise FeatureError(f"the feature extractor {name!r} has an empty identity")
    if isinstance(store, BlobCache):
        store = FeatureStore(store)
    if store is None:
        store = FeatureStore(None)

    pairs = list(zip(texts, refs, strict=True))
    first_index: dict[tuple[str, str | None], int] = {}
    for i, pair in enumerate(pairs):
        first_index.setdefault(pair, i)
    values = store.get_many(identity, first_index)
    misses = [pair for pair in first_index if pair not in values]

    if misses:
        miss_texts = [t for t, _ in misses]
        miss_refs = [r for _, r in misses if r is not None] if needs_reference else None  # all str then
        label = f"the feature extractor {name!r} ({type(extractor).__name__})"
        try:
            output = extractor.extract(miss_texts, miss_refs)
        except LLMBiasError:
            raise
        except Exception as exc:
            raise FeatureError(f"{label} failed on {len(misses)} text(s) ({type(exc).__name__}: {exc})") from exc
        new = _check_output(label, output, misses, first_index)
        store.set_many(identity, new)
        values.update(new)
    return [values[pair] for pair in pairs]
