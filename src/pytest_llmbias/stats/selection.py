"""Selection rates and the impact ratio: how often each group's scores are selected.

Source: the SAGED bias-benchmarking pipeline (Guan et al., §4.1 and appendix A.4). Scores are
split into groups (one per concept, e.g. "Apple", "Pear"):

* a :class:`SelectionRule` selects a score when it compares as asked with one standard taken over
  *all* scores pooled (the mean by default, or the median, or a quantile; methods: larger-than
  (the default), smaller-than, within-range);
* the **selection rate** (SR) of a group is the share of its scores selected;
* the **minimum impact ratio** (min IR) is min SR / max SR; the four-fifths rule reads bias when
  it is below 0.8.

Nothing here is a hypothesis test with a p-value: the impact ratio is a descriptive ratio read
against a rule of thumb. :func:`pytest_llmbias.stats.bootstrap_impact_ratio` gives its sampling
uncertainty; :mod:`pytest_llmbias.stats.outliers` says whether a disparity is concentrated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_llmbias.choices import SelectionMethod, Standard
from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats._common import Values, check_confidence, is_real, jsonable
from pytest_llmbias.stats.outliers import DisparityResult, disparity_metrics

__all__ = [
    "DEFAULT_RULE",
    "FOUR_FIFTHS",
    "GroupSummary",
    "ImpactRatioResult",
    "SelectionRule",
    "impact_ratio",
    "selection_rates",
    "selection_standard",
    "summarize_groups",
]

FOUR_FIFTHS = 0.8

# Relative tolerance of the comparison with the standard: see _tolerance().
_REL_TOL = 1e-9


@dataclass(frozen=True)
class SelectionRule:
    """How a score is selected: compared with one standard taken over all scores pooled.

    ``standard`` is the mean, the median or the ``quantile`` quantile of all scores (numpy's
    default linear interpolation between the two nearest order statistics; ``quantile`` is ignored
    for the other standards but must still lie strictly between 0 and 1). ``method``: a score g is
    selected when g ≥ S (``larger``), g ≤ S (``smaller``) or |g − S| ≤ ``within``
    (``within-range``; ``within`` is required, a positive finite number, for that method and
    refused for the others). Each comparison allows a slack of 1e-9 · max(1, |S|), so that
    floating-point rounding of S does not unselect scores that equal it.

    Strings are accepted for ``standard`` and ``method`` and stored as :class:`Standard` and
    :class:`SelectionMethod` members (which compare equal to their strings). Every field is
    validated on construction: a bad one is a :class:`StatisticsError` naming it and the accepted
    values. Source: SAGED (Guan et al.) §4.1 (eq. 1) and appendix A.4 (mode-with-binning and
    within-percentage are not offered).
    """

    standard: Standard = Standard.MEAN
    method: SelectionMethod = SelectionMethod.LARGER
    quantile: float = 0.5
    within: float | None = None

    def __post_init__(self) -> None:
        standard, method, quantile, within = self.standard, self.method, self.quantile, self.within
        if standard not in Standard.values():
            raise StatisticsError(f"unknown standard {standard!r}; accepted: {', '.join(Standard.values())}")
        if not (is_real(quantile) and 0.0 < float(quantile) < 1.0):
            raise StatisticsError(f"quantile must lie strictly between 0 and 1, got {quantile!r}")
        if method not in SelectionMethod.values():
            raise StatisticsError(
                f"unknown selection method {method!r}; accepted: {', '.join(SelectionMethod.values())}"
            )
        if method == SelectionMethod.WITHIN_RANGE:
            if within is None:
                raise StatisticsError(
                    "the within-range method needs within=r, the largest distance from the standard that "
                    "counts as selected (a positive number)"
                )
            if not (is_real(within) and math.isfinite(float(within)) and float(within) > 0):
                raise StatisticsError(f"within must be a positive finite number, got {within!r}")
        elif within is not None:
            raise StatisticsError(
                f"within={within!r} only applies to method='within-range', not method={str(method)!r}; "
                "drop within= or use method='within-range'"
            )
        object.__setattr__(self, "standard", Standard(standard))
        object.__setattr__(self, "method", SelectionMethod(method))
        object.__setattr__(self, "quantile", float(quantile))
        object.__setattr__(self, "within", None if within is None else float(within))

    @classmethod
    def parse(
        cls, standard: str = "mean", method: str = "larger", *, quantile: float = 0.5, within: float | None = None
    ) -> SelectionRule:
        """The rule from plain strings (a marker's arguments, say), validated as the constructor does."""
        return cls(standard, method, quantile, within)  # type: ignore[arg-type]  # __post_init__ parses them

    def standard_of(self, arr: np.ndarray[Any, Any]) -> float:
        """The standard S of the pooled scores ``arr`` (finite, non-empty, 1-d)."""
        return float(self._standard(arr, None))

    def row_standards(self, sample: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The standard of each row of ``sample`` (a 2-d array of pooled scores, one replicate a row)."""
        return np.asarray(self._standard(sample, 1))

    def _standard(self, arr: np.ndarray[Any, Any], axis: int | None) -> Any:
        if self.standard == Standard.MEAN:
            return np.mean(arr, axis=axis)
        if self.standard == Standard.MEDIAN:
            return np.median(arr, axis=axis)
        return np.quantile(arr, self.quantile, axis=axis)

    def selects(self, x: Any, s: Any) -> Any:
        """Boolean mask of the scores ``x`` selected against the standard ``s`` (broadcasts)."""
        tol = _tolerance(s)
        if self.method == SelectionMethod.LARGER:
            return x >= s - tol
        if self.method == SelectionMethod.SMALLER:
            return x <= s + tol
        assert self.within is not None
        return np.abs(x - s) <= self.within + tol

    def to_dict(self) -> dict[str, Any]:
        return {
            "standard": self.standard.value,
            "method": self.method.value,
            "quantile": self.quantile,
            "within": self.within,
        }


DEFAULT_RULE = SelectionRule()
"""Mean standard, larger-than method: SAGED's default."""


def _check_rule(rule: Any) -> SelectionRule:
    if not isinstance(rule, SelectionRule):
        raise TypeError(
            f"rule must be a SelectionRule, got {rule!r}; write e.g. SelectionRule(standard='median', method='smaller')"
        )
    return rule


@dataclass(frozen=True)
class GroupSummary:
    """Summary statistics of one group's scores.

    ``sd`` uses ddof=1 (nan for a single value); ``selection_rate`` is the share of the group's
    scores selected against the pooled standard (see :func:`selection_rates`).
    """

    group: str
    n: int
    mean: float
    median: float
    sd: float
    selection_rate: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "n": self.n,
            "mean": jsonable(self.mean),
            "median": jsonable(self.median),
            "sd": jsonable(self.sd),
            "selection_rate": jsonable(self.selection_rate),
        }


@dataclass(frozen=True)
class ImpactRatioResult:
    """The impact ratio of a set of grouped scores, with the figures behind it.

    ``groups`` is sorted by group name. ``impact_ratios[g]`` = SR_g / max SR;
    ``min_impact_ratio`` = min SR / max SR; ``worst_pair`` = (the group with the lowest SR, the
    group with the highest SR). ``means`` holds the disparity metrics over the group means,
    ``rates`` those over the selection rates.
    """

    standard: str
    method: str
    standard_value: float
    groups: tuple[GroupSummary, ...]
    selection_rates: Mapping[str, float]
    impact_ratios: Mapping[str, float]
    min_impact_ratio: float
    worst_pair: tuple[str, str]
    means: DisparityResult
    rates: DisparityResult

    @property
    def n(self) -> int:
        """Number of scores over all groups."""
        return sum(g.n for g in self.groups)

    @property
    def four_fifths_bias(self) -> bool:
        """True when the four-fifths rule reads bias: min IR < 0.8."""
        return self.min_impact_ratio < FOUR_FIFTHS

    def group(self, name: str) -> GroupSummary:
        """The summary of group ``name``; KeyError naming the known groups otherwise."""
        for g in self.groups:
            if g.group == name:
                return g
        raise KeyError(f"no group {name!r}; groups: {', '.join(g.group for g in self.groups)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "standard": self.standard,
            "method": self.method,
            "standard_value": jsonable(self.standard_value),
            "n": self.n,
            "groups": [g.to_dict() for g in self.groups],
            "selection_rates": jsonable(self.selection_rates),
            "impact_ratios": jsonable(self.impact_ratios),
            "min_impact_ratio": jsonable(self.min_impact_ratio),
            "worst_pair": list(self.worst_pair),
            "four_fifths_bias": self.four_fifths_bias,
            "means": self.means.to_dict(),
            "rates": self.rates.to_dict(),
        }


def _as_values(values: Values) -> np.ndarray[Any, Any]:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise StatisticsError(f"values must be numbers: {exc}") from None
    if arr.ndim != 1:
        raise StatisticsError(f"values: expected a flat sequence of numbers, got shape {arr.shape}")
    if arr.size == 0:
        raise StatisticsError("no values: there is nothing to compute a standard or a selection rate from")
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise StatisticsError(
            f"{bad} of {arr.size} value(s) are NaN or infinite; drop or re-score them before computing selection rates"
        )
    return arr


def _grouped(values: Values, groups: Sequence[str]) -> tuple[np.ndarray[Any, Any], list[str], np.ndarray[Any, Any]]:
    """Validated values, the sorted group names and each value's index into those names."""
    if isinstance(groups, str):
        raise StatisticsError("groups must be a sequence of group labels (one per value), not a single string")
    arr = _as_values(values)
    labels = list(groups)
    if len(labels) != arr.size:
        raise StatisticsError(
            f"values and groups differ in length: {arr.size} values but {len(labels)} group labels; "
            "give exactly one group label per value"
        )
    for label in labels:
        if not isinstance(label, str):
            raise StatisticsError(f"group labels must be strings, got {label!r} ({type(label).__name__})")
    names, codes = np.unique(np.asarray([str(label) for label in labels], dtype=object), return_inverse=True)
    names_list = [str(n) for n in names]
    if len(names_list) < 2:
        raise StatisticsError(
            f"only one group ({names_list[0]!r}): disparity compares groups, so at least 2 are needed; "
            "check the grouping column (concept) of the data"
        )
    return arr, names_list, np.asarray(codes, dtype=np.intp).reshape(-1)


def _tolerance(standard_value: Any) -> Any:
    """Slack of the comparison with the standard: 1e-9 · max(1, |S|).

    The standard is computed in floating point: the mean of identical values can come out a hair
    above them (e.g. the mean of three 0.1s is 0.10000000000000002), and a linearly interpolated
    quantile can land a hair off a data value. Without slack such a group would select nothing
    ("larger": 0.1 ≥ 0.10000000000000002 is false) and show a spurious disparity. Scores closer to
    the standard than this slack count as on it; for scores of order 1 it is far below any
    meaningful difference.
    """
    return _REL_TOL * np.maximum(1.0, np.abs(standard_value))


def selection_standard(values: Values, standard: str = "mean", *, quantile: float = 0.5) -> float:
    """The standard S_D[V] that selection compares each score with, over ALL scores pooled.

    ``standard`` is ``"mean"``, ``"median"`` or ``"quantile"`` (the ``quantile`` quantile, numpy's
    default linear interpolation between the two nearest order statistics; ``quantile`` is ignored
    for the other standards). Source: SAGED (Guan et al.) §4.1 and appendix A.4 (mode-with-binning and
    within-percentage are not offered).
    """
    return SelectionRule.parse(standard, quantile=quantile).standard_of(_as_values(values))


def _rates(
    arr: np.ndarray[Any, Any], codes: np.ndarray[Any, Any], k: int, s: float, rule: SelectionRule
) -> np.ndarray[Any, Any]:
    sel = rule.selects(arr, s)
    counts = np.bincount(codes, minlength=k)
    hits = np.bincount(codes, weights=sel.astype(float), minlength=k)
    return np.asarray(hits / counts, dtype=float)


def selection_rates(values: Values, groups: Sequence[str], rule: SelectionRule = DEFAULT_RULE) -> dict[str, float]:
    """Per group (sorted by name), the share of its scores that ``rule`` selects.

    With S the rule's standard of all values pooled (:meth:`SelectionRule.standard_of`), a score g
    is selected when g ≥ S (``larger``), g ≤ S (``smaller``) or |g − S| ≤ ``within``
    (``within-range``), each with a slack of 1e-9 · max(1, |S|) (see :class:`SelectionRule`).
    Raises :class:`StatisticsError` for bad input: no values, NaN or infinite values, groups of
    another length than the values, fewer than 2 groups; :class:`TypeError` when ``rule`` is not a
    :class:`SelectionRule`. Source: SAGED (Guan et al.) §4.1 (eq. 1) and appendix A.4.
    """
    rule = _check_rule(rule)
    arr, names, codes = _grouped(values, groups)
    rates = _rates(arr, codes, len(names), rule.standard_of(arr), rule)
    return {name: float(r) for name, r in zip(names, rates, strict=True)}


def _summaries(
    arr: np.ndarray[Any, Any], names: list[str], codes: np.ndarray[Any, Any], rates: np.ndarray[Any, Any]
) -> tuple[GroupSummary, ...]:
    order = np.argsort(codes, kind="stable")
    parts = np.split(arr[order], np.cumsum(np.bincount(codes, minlength=len(names)))[:-1])
    out = []
    for i, (name, g) in enumerate(zip(names, parts, strict=True)):
        sd = float(np.std(g, ddof=1)) if g.size > 1 else math.nan
        out.append(
            GroupSummary(
                group=name,
                n=int(g.size),
                mean=float(np.mean(g)),
                median=float(np.median(g)),
                sd=sd,
                selection_rate=float(rates[i]),
            )
        )
    return tuple(out)


def summarize_groups(
    values: Values, groups: Sequence[str], rule: SelectionRule = DEFAULT_RULE
) -> tuple[GroupSummary, ...]:
    """One :class:`GroupSummary` per group, sorted by group name: size, mean, median, SD (ddof=1,
    nan for one value) and the selection rate as :func:`selection_rates` computes it."""
    rule = _check_rule(rule)
    arr, names, codes = _grouped(values, groups)
    return _summaries(arr, names, codes, _rates(arr, codes, len(names), rule.standard_of(arr), rule))


def impact_ratio(
    values: Values, groups: Sequence[str], rule: SelectionRule = DEFAULT_RULE, *, confidence: float = 0.95
) -> ImpactRatioResult:
    """The minimum impact ratio: min SR / max SR over the groups' selection rates.

    Selection rates as in :func:`selection_rates` (the scores ``rule`` selects). Read it with the
    four-fifths rule (US EEOC 1978): bias is reported when min IR < 0.8. One can phrase this as H0
    "every group is selected at the same rate" against H1 "some group is selected at under 4/5 of
    the rate of the most selected one", but it is a rule of thumb on an observed ratio, not a
    hypothesis test: it has no p-value and no error rate; use
    :func:`~pytest_llmbias.stats.bootstrap_impact_ratio` for its sampling uncertainty.
    ``confidence`` is used by the Dixon's Q tests in ``means`` and ``rates``.

    Raises :class:`StatisticsError` for bad input (see :func:`selection_rates`) and when no score
    of any group is selected (max SR = 0: the ratio is undefined). Source: SAGED (Guan et al.) §4.1–4.2
    (min IR) and appendix A.4 (standards and selection methods).
    """
    rule = _check_rule(rule)
    check_confidence(confidence)
    arr, names, codes = _grouped(values, groups)
    s = rule.standard_of(arr)
    rates = _rates(arr, codes, len(names), s, rule)
    top = float(rates.max())
    if top == 0.0:
        extra = f", within={rule.within}" if rule.method == SelectionMethod.WITHIN_RANGE else ""
        raise StatisticsError(
            f"no response of any group was selected (standard={rule.standard.value!r} = {s:.6g}, "
            f"method={rule.method.value!r}{extra}), so the impact ratio is undefined; choose another "
            "standard or method, or widen the range"
        )
    summaries = _summaries(arr, names, codes, rates)
    sr = {name: float(r) for name, r in zip(names, rates, strict=True)}
    lowest = min(names, key=lambda k: (sr[k], k))
    highest = min((k for k in names if k != lowest), key=lambda k: (-sr[k], k))
    return ImpactRatioResult(
        standard=rule.standard.value,
        method=rule.method.value,
        standard_value=s,
        groups=summaries,
        selection_rates=sr,
        impact_ratios={k: v / top for k, v in sr.items()},
        min_impact_ratio=float(rates.min()) / top,
        worst_pair=(lowest, highest),
        means=disparity_metrics({g.group: g.mean for g in summaries}, statistic="mean", confidence=confidence),
        rates=disparity_metrics(sr, statistic="selection_rate", confidence=confidence),
    )
