"""pytest-llmbias: bias regression tests for large language models, as pytest markers.

The public API is listed in ``__all__``. Names are imported from their modules on first use, so
``import pytest_llmbias`` stays as cheap as the standard library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0.dev0"

_EXPORTS: dict[str, str] = {
    # gate statistics, as the markers call them
    "evaluate_equivalence": "pytest_llmbias.gates.equivalent.gate",
    "evaluate_impact_ratio": "pytest_llmbias.gates.impact_ratio.gate",
    "evaluate_bias_index": "pytest_llmbias.gates.index.gate",
    "bias_index": "pytest_llmbias.scoring.index_annotation",
    "evaluate_stance": "pytest_llmbias.gates.stance.gate",
    "evaluate_preference": "pytest_llmbias.gates.preference.gate",
    "evaluate_benchmark": "pytest_llmbias.gates.benchmark.gate",
    "evaluate_evenhanded": "pytest_llmbias.stats.evenhanded",
    # the judges' agreement and the session's family of gates
    "judge_agreement": "pytest_llmbias.stats.agreement",
    "Agreement": "pytest_llmbias.stats.agreement",
    "holm": "pytest_llmbias.stats.multiple",
    "HolmResult": "pytest_llmbias.stats.multiple",
    "familywise_bound": "pytest_llmbias.stats.multiple",
    "sequential_boundaries": "pytest_llmbias.stats.sequential",
    "Boundaries": "pytest_llmbias.stats.sequential",
    "run_looks": "pytest_llmbias.engine.sequential_design",
    "FamilyBound": "pytest_llmbias.stats.multiple",
    # a public benchmark's metrics, as its reference harness computes them
    "evaluate_bbq": "pytest_llmbias.stats.bbq",
    "BBQScores": "pytest_llmbias.stats.bbq",
    "BBQFigures": "pytest_llmbias.stats.bbq",
    "evaluate_discrim": "pytest_llmbias.stats.discrim",
    "DiscrimScores": "pytest_llmbias.stats.discrim",
    "GroupScore": "pytest_llmbias.stats.discrim",
    "EvenhandedFigures": "pytest_llmbias.stats.evenhanded",
    # results
    "EquivalentResult": "pytest_llmbias.gates.equivalent.result",
    "MethodResult": "pytest_llmbias.engine.relative",
    "ImpactRatioGateResult": "pytest_llmbias.gates.impact_ratio.result",
    "ModelImpact": "pytest_llmbias.gates.impact_ratio.result",
    "BiasIndexResult": "pytest_llmbias.scoring.index_annotation",
    "BiasIndexGateResult": "pytest_llmbias.gates.index.result",
    "StanceResult": "pytest_llmbias.gates.stance.result",
    "PreferenceResult": "pytest_llmbias.gates.preference.result",
    "BenchmarkResult": "pytest_llmbias.gates.benchmark.result",
    "EvenhandedResult": "pytest_llmbias.gates.evenhanded.result",
    "TostResult": "pytest_llmbias.stats.tost",
    "ImpactRatioResult": "pytest_llmbias.stats.selection",
    "ResponseSet": "pytest_llmbias.planning.response_set",
    # extension points
    "FeatureExtractor": "pytest_llmbias.scoring.features",
    "FeatureRegistry": "pytest_llmbias.scoring.features",
    "Gate": "pytest_llmbias.engine.protocol",
    "GateResult": "pytest_llmbias.engine.protocol",
    "GateResultBase": "pytest_llmbias.engine.result",
    "ComparisonOptions": "pytest_llmbias.engine.comparison_options",
    "compare": "pytest_llmbias.engine.relative",
    "method_lines": "pytest_llmbias.engine.relative_report",
    "ResponseRequest": "pytest_llmbias.planning.request",
    "Table": "pytest_llmbias.report.frames",
    # warnings and errors
    "LLMBiasWarning": "pytest_llmbias.errors",
    "LLMBiasError": "pytest_llmbias.errors",
    "ConfigError": "pytest_llmbias.errors",
    "DomainError": "pytest_llmbias.errors",
    "StoreError": "pytest_llmbias.errors",
    "ProviderError": "pytest_llmbias.errors",
    "MissingResponsesError": "pytest_llmbias.errors",
    "StatisticsError": "pytest_llmbias.errors",
    "FeatureError": "pytest_llmbias.errors",
    "ScorerError": "pytest_llmbias.errors",
    "JudgeParseError": "pytest_llmbias.errors",
    "JudgeDataError": "pytest_llmbias.errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from pytest_llmbias.engine.comparison_options import ComparisonOptions as ComparisonOptions
    from pytest_llmbias.engine.protocol import Gate as Gate, GateResult as GateResult
    from pytest_llmbias.engine.relative import MethodResult as MethodResult, compare as compare
    from pytest_llmbias.engine.relative_report import method_lines as method_lines
    from pytest_llmbias.engine.result import GateResultBase as GateResultBase
    from pytest_llmbias.engine.sequential_design import run_looks as run_looks
    from pytest_llmbias.errors import (
        ConfigError as ConfigError,
        DomainError as DomainError,
        FeatureError as FeatureError,
        JudgeDataError as JudgeDataError,
        JudgeParseError as JudgeParseError,
        LLMBiasError as LLMBiasError,
        LLMBiasWarning as LLMBiasWarning,
        MissingResponsesError as MissingResponsesError,
        ProviderError as ProviderError,
        ScorerError as ScorerError,
        StatisticsError as StatisticsError,
        StoreError as StoreError,
    )
    from pytest_llmbias.gates.benchmark.gate import evaluate_benchmark as evaluate_benchmark
    from pytest_llmbias.gates.benchmark.result import BenchmarkResult as BenchmarkResult
    from pytest_llmbias.gates.equivalent.gate import evaluate_equivalence as evaluate_equivalence
    from pytest_llmbias.gates.equivalent.result import EquivalentResult as EquivalentResult
    from pytest_llmbias.gates.evenhanded.result import EvenhandedResult as EvenhandedResult
    from pytest_llmbias.gates.impact_ratio.gate import evaluate_impact_ratio as evaluate_impact_ratio
    from pytest_llmbias.gates.impact_ratio.result import (
        ImpactRatioGateResult as ImpactRatioGateResult,
        ModelImpact as ModelImpact,
    )
    from pytest_llmbias.gates.index.gate import evaluate_bias_index as evaluate_bias_index
    from pytest_llmbias.gates.index.result import BiasIndexGateResult as BiasIndexGateResult
    from pytest_llmbias.gates.preference.gate import evaluate_preference as evaluate_preference
    from pytest_llmbias.gates.preference.result import PreferenceResult as PreferenceResult
    from pytest_llmbias.gates.stance.gate import evaluate_stance as evaluate_stance
    from pytest_llmbias.gates.stance.result import StanceResult as StanceResult
    from pytest_llmbias.planning.request import ResponseRequest as ResponseRequest
    from pytest_llmbias.planning.response_set import ResponseSet as ResponseSet
    from pytest_llmbias.report.frames import Table as Table
    from pytest_llmbias.scoring.features import FeatureExtractor as FeatureExtractor, FeatureRegistry as FeatureRegistry
    from pytest_llmbias.scoring.index_annotation import BiasIndexResult as BiasIndexResult, bias_index as bias_index
    from pytest_llmbias.stats.agreement import Agreement as Agreement, judge_agreement as judge_agreement
    from pytest_llmbias.stats.bbq import BBQFigures as BBQFigures, BBQScores as BBQScores, evaluate_bbq as evaluate_bbq
    from pytest_llmbias.stats.discrim import (
        DiscrimScores as DiscrimScores,
        GroupScore as GroupScore,
        evaluate_discrim as evaluate_discrim,
    )
    from pytest_llmbias.stats.evenhanded import (
        EvenhandedFigures as EvenhandedFigures,
        evaluate_evenhanded as evaluate_evenhanded,
    )
    from pytest_llmbias.stats.multiple import (
        FamilyBound as FamilyBound,
        HolmResult as HolmResult,
        familywise_bound as familywise_bound,
        holm as holm,
    )
    from pytest_llmbias.stats.selection import ImpactRatioResult as ImpactRatioResult
    from pytest_llmbias.stats.sequential import Boundaries as Boundaries, sequential_boundaries as sequential_boundaries
    from pytest_llmbias.stats.tost import TostResult as TostResult


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
