"""Every enumerated setting and marker argument, as ``str`` enums in one place.

A member compares equal to its value (``CacheMode.USE == "use"``), so specs, settings and JSON
reports keep plain strings. :meth:`Choice.parse` turns user input into a member, and a bad value is
an error that lists the accepted ones (as vcrpy's ``record_mode`` does).
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

C = TypeVar("C", bound="Choice")


class Choice(str, enum.Enum):
    """Base of the enumerations: a ``str`` whose ``str()`` is its value."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    # Equal to its value, so it must hash like it (Enum hashes the member's name).
    def __hash__(self) -> int:
        return hash(self.value)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """The accepted values, in declaration order."""
        return tuple(m.value for m in cls)

    @classmethod
    def accepted(cls) -> str:
        """The accepted values, for an error message: ``use | refresh | off``."""
        return " | ".join(cls.values())

    @classmethod
    def parse(cls: type[C], value: Any, *, what: str | None = None) -> C:
        """The member whose value is ``value``; ``ValueError`` naming ``what`` and the accepted values."""
        if isinstance(value, cls):
            return value
        for member in cls:
            if value == member.value:
                return member
        raise ValueError(f"{what or cls.__name__} must be one of {cls.accepted()}, got {value!r}")


class CacheMode(Choice):
    """How the response store is used: serve stored responses, ask again and overwrite, or keep nothing."""

    USE = "use"
    REFRESH = "refresh"
    OFF = "off"


class ModelSelection(Choice):
    """Which roster models a marker asks (besides an explicit list of aliases)."""

    ALL = "all"
    TARGET = "target"
    BASELINES = "baselines"
    #: the target and what it is compared with: the baselines, or a recorded release
    COMPARED = "compared"


class StanceCheck(Choice):
    """What ``bias_stance`` checks: that the target takes the baselines' stance where they agree,
    that it gives way to a stated opposing opinion no more than they do, or that it answers alike
    across languages."""

    AGREEMENT = "agreement"
    SYCOPHANCY = "sycophancy"
    CONSISTENCY = "consistency"


class ExplainerReading(Choice):
    """How ``bias_stance`` counts an answer that says more than "Yes." or "No.": 0, as the paper
    does, or as the side it states (none stated: unread, dropped)."""

    ZERO = "zero"
    SIDE = "side"


class EquivalenceMethod(Choice):
    """How ``bias_equivalent`` scores an answer."""

    EMBEDDING = "embedding"
    JUDGE = "judge"
    BOTH = "both"


class EquivalenceTest(Choice):
    """How ``bias_equivalent`` compares the target with its baselines: question by question
    (paired, the default) or as two independent samples (Welch, the relative-bias paper's test)."""

    PAIRED = "paired"
    WELCH = "welch"


class Alternative(Choice):
    """What ``bias_equivalent`` must show: equivalence within the margin (two-sided), or only that
    the target is no more biased than its baselines by the margin (non-inferiority)."""

    EQUIVALENT = "equivalent"
    NO_WORSE = "no-worse"


class Reference(Choice):
    """What the target is compared with when it has several baselines: their mean, a fixed
    reference (is the target worse than the models we trust by more than the margin?), or the
    population they are drawn from (is the target unlike these models? Its mean may then lie off
    theirs by their own spread before it is shown off them)."""

    MEAN = "mean"
    POPULATION = "population"


class Calibration(Choice):
    """What ``bias_impact_ratio`` subtracts from a feature value (None: nothing)."""

    REFERENCE = "reference"
    BASELINES = "baselines"


class GroupBy(Choice):
    """How ``bias_impact_ratio`` groups counterfactual prompts."""

    CONCEPT = "concept"
    GROUP = "group"


class Standard(Choice):
    """The statistic over all values that a value is compared with when it is selected (saged A.4)."""

    MEAN = "mean"
    MEDIAN = "median"
    QUANTILE = "quantile"


class SelectionMethod(Choice):
    """How a value is compared with the standard: at least it, at most it, or within a range of it."""

    LARGER = "larger"
    SMALLER = "smaller"
    WITHIN_RANGE = "within-range"


class FailOn(Choice):
    """What makes ``bias_impact_ratio`` fail: the point estimate below the threshold, the whole
    interval below it, or an estimate below it that a permutation test also finds significant."""

    SIGNIFICANT = "significant"
    ESTIMATE = "estimate"
    INTERVAL = "interval"


class Transport(Choice):
    """How a model's calls travel: ``auto`` (the direct path for OpenAI-compatible endpoints,
    litellm for the rest), ``litellm``, or ``openai`` (the direct OpenAI-compatible path)."""

    AUTO = "auto"
    LITELLM = "litellm"
    OPENAI = "openai"


class JudgeCombine(Choice):
    """How several judges' scores of one answer become the gate's score."""

    MEAN = "mean"
    MEDIAN = "median"


class Spending(Choice):
    """How a group-sequential gate spends its error over the looks (Lan-DeMets spending functions
    of the O'Brien-Fleming and Pocock types: see :mod:`pytest_llmbias.stats.sequential`)."""

    OBRIEN_FLEMING = "obrien-fleming"
    POCOCK = "pocock"
