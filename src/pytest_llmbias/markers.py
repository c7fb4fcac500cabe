"""The plugin's markers and their arguments, validated in one place.

Each marker parses into a frozen spec. A bad argument raises :class:`ConfigError` naming the
marker and the accepted arguments; the plugin reports it as a ``pytest.UsageError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.errors import ConfigError

MODEL_SELECTIONS = ("all", "target", "baselines")
EQUIVALENCE_METHODS = ("embedding", "judge", "both")


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
}


def parse_marker(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """Parse the arguments of one of :data:`MARKERS` into its spec."""
    return MARKERS[name].parse(name, tuple(args), kwargs)
