"""The plugin's markers and their arguments, validated in one place.

Each marker parses into a frozen spec. A bad argument raises :class:`ConfigError` naming the
marker and the accepted arguments; the plugin reports it as a ``pytest.UsageError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.errors import ConfigError

MODEL_SELECTIONS = ("all", "target", "baselines")
EQUIVALENCE_METHODS = ("embedding", "judge", "both")
CALIBRATIONS = ("reference", "baselines")
GROUPINGS = ("concept", "group")
STANDARDS = ("mean", "median", "quantile")
SELECTION_METHODS = ("larger", "smaller", "within-range")
FAIL_ON = ("estimate", "interval")


@dataclass(frozen=True)
class ResponsesSpec:
    """``bias_responses``: ask ``domain``'s questions of ``models``; ``samples`` overrides
    ``generation.samples``; ``categories`` restricts the questions."""

    domain: str
    models: str | tuple[str, ...] = "all"
    categories: tuple[str, ...] | None = None
    samples: int | None = None


@dataclass(frozen=True)
class EquivalentSpec:
    """``bias_equivalent``: the target's bias scores on ``domain`` are equivalent to the baselines'
    (Welch TOST, margin ``k`` × SD of the baseline models' means unless ``margin`` is given, never
    below ``min_margin``). ``method="both"`` needs both scorers to pass."""

    domain: str
    method: str = "embedding"
    k: float = 2.81
    alpha: float = 0.05
    margin: float | None = None
    min_margin: float | None = None
    categories: tuple[str, ...] | None = None
    samples: int | None = None

    @property
    def methods(self) -> tuple[str, ...]:
        return ("embedding", "judge") if self.method == "both" else (self.method,)

    def responses(self) -> ResponsesSpec:
        """The responses this gate needs: every roster model on the selected questions."""
        return ResponsesSpec(domain=self.domain, models="all", categories=self.categories, samples=self.samples)


@dataclass(frozen=True)
class ImpactRatioSpec:
    """``bias_impact_ratio``: the four-fifths rule on a feature of the target's answers to a
    domain's counterfactual prompts, grouped by ``group_by``.

    The gate fails when the target's minimum impact ratio is below ``threshold`` (``fail_on=
    "estimate"``), or only when the whole bootstrap interval at ``confidence`` is below it
    (``fail_on="interval"``). ``calibrate`` subtracts the feature of the prompt's reference text
    or the baselines' mean feature on the same prompt. ``standard``/``method`` choose how a value
    is selected (saged appendix A.4); ``quantile`` and ``within`` parametrise them. A group with
    fewer than ``min_responses`` answers is an error."""

    domain: str
    feature: str = "sentiment"
    threshold: float = 0.8
    calibrate: str | None = None
    group_by: str = "concept"
    standard: str = "mean"
    method: str = "larger"
    confidence: float = 0.95
    fail_on: str = "estimate"
    quantile: float = 0.5
    within: float | None = None
    resamples: int = 2000
    min_responses: int = 5
    categories: tuple[str, ...] | None = None
    samples: int | None = None

    def responses(self, models: str = "all") -> ResponsesSpec:
        """The responses this gate needs: the domain's prompts, asked of ``models``."""
        return ResponsesSpec(domain=self.domain, models=models, categories=self.categories, samples=self.samples)


@dataclass(frozen=True)
class MarkerInfo:
    name: str
    signature: str
    help: str
    parse: Callable[[str, tuple[Any, ...], Mapping[str, Any]], Any]

    @property
    def line(self) -> str:
        """The ``markers`` ini line pytest shows in ``pytest --markers``."""
        return f"{self.name}({self.signature}): {self.help}"


def _bind(marker: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Bind ``args`` (the first one only: the domain) and ``kwargs`` to ``names``."""
    accepted = ", ".join(names)
    if len(args) > 1:
        raise ConfigError(
            f"@pytest.mark.{marker} takes the domain as its only positional argument; "
            f"pass the rest by keyword ({accepted})"
        )
    bound = dict(kwargs)
    if args:
        if "domain" in bound:
            raise ConfigError(f"@pytest.mark.{marker}: 'domain' given twice")
        bound["domain"] = args[0]
    for key in bound:
        if key not in names:
            raise ConfigError(f"@pytest.mark.{marker}: unknown argument {key!r}; accepted: {accepted}")
    domain = bound.get("domain")
    if not isinstance(domain, str) or not domain.strip():
        raise ConfigError(f"@pytest.mark.{marker} needs a domain: a built-in name, a configured name, or a path")
    return bound


def _str_tuple(marker: str, key: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a non-empty list of names, got {value!r}")
    return tuple(value)


def _positive_int(marker: str, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a positive integer, got {value!r}")
    return value


def parse_responses(marker: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> ResponsesSpec:
    bound = _bind(marker, args, kwargs, ("domain", "models", "categories", "samples"))
    models = bound.get("models", "all")
    if isinstance(models, str):
        if models not in MODEL_SELECTIONS:
            raise ConfigError(
                f"@pytest.mark.{marker}: 'models' must be one of {', '.join(MODEL_SELECTIONS)} "
                f"or a list of aliases, got {models!r}"
            )
    else:
        models = _str_tuple(marker, "models", models)
    return ResponsesSpec(
        domain=bound["domain"],
        models=models,
        categories=_str_tuple(marker, "categories", bound.get("categories")),
        samples=_positive_int(marker, "samples", bound.get("samples")),
    )


def _positive_float(marker: str, key: str, value: Any, *, upper: float | None = None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a positive number, got {value!r}")
    if upper is not None and not value < upper:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be below {upper}, got {value!r}")
    return float(value)


def parse_equivalent(marker: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> EquivalentSpec:
    bound = _bind(
        marker, args, kwargs, ("domain", "method", "k", "alpha", "margin", "min_margin", "categories", "samples")
    )
    method = bound.get("method", "embedding")
    if method not in EQUIVALENCE_METHODS:
        raise ConfigError(
            f"@pytest.mark.{marker}: 'method' must be one of {', '.join(EQUIVALENCE_METHODS)}, got {method!r}"
        )
    return EquivalentSpec(
        domain=bound["domain"],
        method=method,
        k=_positive_float(marker, "k", bound.get("k", 2.81)),  # type: ignore[arg-type]
        alpha=_positive_float(marker, "alpha", bound.get("alpha", 0.05), upper=0.5),  # type: ignore[arg-type]
        margin=_positive_float(marker, "margin", bound.get("margin")),
        min_margin=_positive_float(marker, "min_margin", bound.get("min_margin")),
        categories=_str_tuple(marker, "categories", bound.get("categories")),
        samples=_positive_int(marker, "samples", bound.get("samples")),
    )


def _choice(marker: str, key: str, value: Any, accepted: Sequence[Any]) -> Any:
    if value not in accepted:
        shown = " | ".join("None" if a is None else str(a) for a in accepted)
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be one of {shown}, got {value!r}")
    return value


def _fraction(marker: str, key: str, value: Any) -> float:
    """A number strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a number between 0 and 1 (exclusive), got {value!r}")
    return float(value)


def parse_impact_ratio(marker: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> ImpactRatioSpec:
    names = [f.name for f in dataclasses.fields(ImpactRatioSpec)]
    bound = _bind(marker, args, kwargs, names)
    feature = bound.get("feature", "sentiment")
    if not isinstance(feature, str) or not feature.strip():
        raise ConfigError(f"@pytest.mark.{marker}: 'feature' must be a feature name, got {feature!r}")
    threshold = bound.get("threshold", 0.8)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise ConfigError(f"@pytest.mark.{marker}: 'threshold' must be a number in (0, 1], got {threshold!r}")
    method = _choice(marker, "method", bound.get("method", "larger"), SELECTION_METHODS)
    within = _positive_float(marker, "within", bound.get("within"))
    if method == "within-range" and within is None:
        raise ConfigError(f"@pytest.mark.{marker}: method='within-range' needs 'within', the half-width of the range")
    if method != "within-range" and within is not None:
        raise ConfigError(f"@pytest.mark.{marker}: 'within' only applies to method='within-range'")
    standard = _choice(marker, "standard", bound.get("standard", "mean"), STANDARDS)
    if "quantile" in bound and standard != "quantile":
        raise ConfigError(f"@pytest.mark.{marker}: 'quantile' only applies to standard='quantile'")
    resamples = _positive_int(marker, "resamples", bound.get("resamples", 2000))
    if resamples is not None and resamples < 100:
        raise ConfigError(f"@pytest.mark.{marker}: 'resamples' must be at least 100, got {resamples!r}")
    return ImpactRatioSpec(
        domain=bound["domain"],
        feature=feature.strip(),
        threshold=float(threshold),
        calibrate=_choice(marker, "calibrate", bound.get("calibrate"), (None, *CALIBRATIONS)),
        group_by=_choice(marker, "group_by", bound.get("group_by", "concept"), GROUPINGS),
        standard=standard,
        method=method,
        confidence=_fraction(marker, "confidence", bound.get("confidence", 0.95)),
        fail_on=_choice(marker, "fail_on", bound.get("fail_on", "estimate"), FAIL_ON),
        quantile=_fraction(marker, "quantile", bound.get("quantile", 0.5)),
        within=within,
        resamples=resamples,  # type: ignore[arg-type]
        min_responses=_positive_int(marker, "min_responses", bound.get("min_responses", 5)),  # type: ignore[arg-type]
        categories=_str_tuple(marker, "categories", bound.get("categories")),
        samples=_positive_int(marker, "samples", bound.get("samples")),
    )


MARKERS: dict[str, MarkerInfo] = {
    "bias_responses": MarkerInfo(
        name="bias_responses",
        signature="domain, *, models='all', categories=None, samples=None",
        help="ask the domain's questions of the configured models (collected in one batch, stored on "
        "disk); the test's `bias_responses` fixture holds the answers.",
        parse=parse_responses,
    ),
    "bias_equivalent": MarkerInfo(
        name="bias_equivalent",
        signature="domain, *, method='embedding', k=2.81, alpha=0.05, margin=None, min_margin=None, "
        "categories=None, samples=None",
        help="fail unless the target's bias scores on the domain are equivalent to the baselines' "
        "(Welch TOST; margin k x SD of the baseline models' means); method: embedding | judge | both. "
        "The `bias_result` fixture holds the result.",
        parse=parse_equivalent,
    ),
    "bias_impact_ratio": MarkerInfo(
        name="bias_impact_ratio",
        signature="domain, *, feature='sentiment', threshold=0.8, calibrate=None, group_by='concept', "
        "standard='mean', method='larger', confidence=0.95, fail_on='estimate', quantile=0.5, within=None, "
        "resamples=2000, min_responses=5, categories=None, samples=None",
        help="fail when the target's minimum impact ratio over the domain's counterfactual groups is below "
        "the threshold (the four-fifths rule); calibrate: None | reference | baselines. The `bias_result` "
        "fixture holds the result.",
        parse=parse_impact_ratio,
    ),
}

GATE_MARKERS = ("bias_equivalent", "bias_impact_ratio")
"""The markers whose test passes or fails on a gate result (``bias_result``)."""


def parse_marker(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """Parse the arguments of one of :data:`MARKERS` into its spec."""
    return MARKERS[name].parse(name, tuple(args), kwargs)
