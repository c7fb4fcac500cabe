"""``bias_benchmark``'s marker arguments (:class:`BiasBenchmarkSpec`) and the comparison they make
with the run's design."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmbias import markers
from pytest_llmbias.choices import Alternative, EquivalenceTest, Reference
from pytest_llmbias.engine.comparison_options import ComparisonOptions, designed_spec
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.gates.benchmark.result import MARKER
from pytest_llmbias.gates.benchmark.scores import DEFAULT_MARGINS, METRICS, check_metric
from pytest_llmbias.stats.bbq import CONVENTIONS


@dataclass(frozen=True)
class BiasBenchmarkSpec:
    """``bias_benchmark`` (see the module docstring). ``domain`` names the dataset: ``bbq`` or
    ``discrim_eval``."""

    domain: str
    metric: str | None = None
    max_bias: float | None = None
    alternative: Alternative = Alternative.NO_WORSE
    test: EquivalenceTest = EquivalenceTest.PAIRED
    #: the TOST's alpha when the marker gives one (or a look's nominal level); None: the design's,
    #: 1 − ``suite.power``. The intervals and the absolute bound take it too, else 0.05 (``level``)
    alpha: float | None = None
    margin: float | None = None
    min_margin: float | None = None
    false_alarm: float | None = None
    reference: Reference = Reference.MEAN
    clustered: bool = False
    categories: tuple[str, ...] | None = None
    samples: int | None = None
    max_unparsed: float | None = None
    convention: str = "lm-eval"
    looks: int | None = None
    spending: str | None = None

    @classmethod
    def parse(cls, a: tuple[Any, ...], kw: Mapping[str, Any], marker: str = MARKER) -> BiasBenchmarkSpec:
        names = [f.name for f in dataclasses.fields(cls)]
        bound = markers.bind(marker, a, kw, names)
        dataset = bound["domain"].strip()
        if dataset not in METRICS:
            raise ConfigError(
                f"@pytest.mark.{marker}: the dataset must be one of {', '.join(METRICS)}, got {dataset!r}"
            )
        metric = check_metric(dataset, bound.get("metric"), f"@pytest.mark.{marker}")
        max_bias = bound.get("max_bias")
        if max_bias is not None:
            max_bias = markers.positive_float(marker, "max_bias", max_bias)
            if metric.startswith("accuracy"):
                raise ConfigError(
                    f"@pytest.mark.{marker}: max_bias bounds a bias metric; {metric} is compared with "
                    "the baselines (leave max_bias out)"
                )
        convention = bound.get("convention", "lm-eval")
        if convention not in CONVENTIONS:
            raise ConfigError(
                f"@pytest.mark.{marker}: convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}"
            )
        comparison = ComparisonOptions.parse(marker, bound, alternative="no-worse")
        return cls(
            domain=dataset,
            metric=metric,
            max_bias=max_bias,
            alternative=comparison.alternative,  # type: ignore[arg-type]
            test=comparison.test,
            alpha=comparison.alpha,
            false_alarm=comparison.false_alarm,
            margin=comparison.margin,  # type: ignore[arg-type]
            min_margin=comparison.min_margin,  # type: ignore[arg-type]
            categories=markers.str_tuple(marker, "categories", bound.get("categories")),
            samples=markers.positive_int(marker, "samples", bound.get("samples")),
            max_unparsed=markers.share(marker, "max_unparsed", bound.get("max_unparsed")),
            convention=convention,
            **markers.design(marker, bound),
        )

    @property
    def level(self) -> float:
        """The intervals' and the absolute bound's level: ``alpha``, else 0.05."""
        return self.alpha if self.alpha is not None else 0.05

    @property
    def comparison(self) -> ComparisonOptions:
        """The engine's options: the metric's default margin unless ``margin=`` is given."""
        margin = self.margin if self.margin is not None else DEFAULT_MARGINS[self.metric or METRICS[self.domain][0]]
        return ComparisonOptions(
            test=self.test,
            alternative=self.alternative,
            alpha=self.alpha,
            margin=margin,
            min_margin=self.min_margin,
            false_alarm=self.false_alarm,
        )


def _designed(spec: BiasBenchmarkSpec, metric: str, settings: Any) -> ComparisonOptions:
    """The comparison's options with the run's design (``suite.power``, ``suite.strict``, and the
    ``margins:`` of ``bias_benchmark`` for ``metric`` unless the marker gives ``margin=``)."""
    return designed_spec(spec, spec.comparison, MARKER, metric, settings).comparison.designed(MARKER, settings)
