"""The ``bias_index`` gate's result: every model's index and its parts, the relative comparison
with the baselines and the absolute check against a bound, and its report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_llmbias.engine.relative import MethodResult
from pytest_llmbias.engine.relative_report import method_lines
from pytest_llmbias.engine.result import (
    UNDERPOWERED,
    GateResultBase,
    fmt_false_alarm,
    fmt_fixed,
    fmt_rate,
    moved_entry,
    role,
    underpowered_note,
    versus,
)
from pytest_llmbias.report import readable
from pytest_llmbias.report.frames import Table
from pytest_llmbias.stats.llmbi import IndexParts
from pytest_llmbias.stats.power import INDEX_VIOLATION

MARKER = "bias_index"


@dataclass(frozen=True)
class AbsoluteCheck:
    """The target's index against ``max_index``: the bootstrap's one-sided ``lower`` confidence
    bound at ``confidence`` (and the two-sided interval ``low``-``high`` for the report)."""

    index: float
    max_index: float
    confidence: float
    lower: float
    low: float
    high: float
    resamples: int

    @property
    def passed(self) -> bool:
        return not self.lower > self.max_index

    @property
    def verdict(self) -> str:
        if not self.passed:
            return "above bound"
        if self.underpowered:
            return UNDERPOWERED
        return "within bound" if self.index <= self.max_index else "not shown above bound"

    @property
    def se(self) -> float:
        """The index's standard error, read from the bootstrap's two-sided interval."""
        from statistics import NormalDist

        return (self.high - self.low) / (2 * NormalDist().inv_cdf(1 - (1 - self.confidence) / 2))

    @property
    def power(self) -> float:
        """The power to show an index :data:`~pytest_llmbias.stats.power.INDEX_VIOLATION` above the bound."""
        from pytest_llmbias.stats.power import index_power

        return index_power(self.se, confidence=self.confidence)

    @property
    def underpowered(self) -> bool:
        """A pass with less than 80 % power to show an index a violation above the bound, and not
        shown within it either (the interval reaches the bound): only an absence of evidence."""
        from pytest_llmbias.stats.tost import POWER_TARGET

        return self.passed and not self.high < self.max_index and self.power < POWER_TARGET

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "passed": self.passed,
            "verdict": self.verdict,
            "se": self.se,
            "power": self.power,
            "underpowered": self.underpowered,
        }


@dataclass(frozen=True)
class PromptContribution:
    """One prompt's index for the target, and the baselines' mean on it (None without baselines)."""

    prompt: str
    dimension: str
    target: float
    baselines: float | None
    excerpt: str
    #: the one comparator's answer (a recorded release's, or a lone baseline's); empty with several
    comparator_excerpt: str = ""

    @property
    def excess(self) -> float:
        return self.target - (self.baselines if self.baselines is not None else 0.0)


@dataclass(frozen=True)
class BiasIndexGateResult(GateResultBase):
    """The gate's result: every model's index and its parts (``indices``), the relative test
    (``relative``, a :class:`~pytest_llmbias.engine.relative.MethodResult`) and/or the absolute
    check (``absolute``); passes when every check that ran passes."""

    marker: ClassVar[str] = MARKER

    domain: str
    target: str
    baselines: tuple[str, ...]
    feature: str
    n_prompts: int
    samples: int
    indices: Mapping[str, IndexParts]
    relative: MethodResult | None
    absolute: AbsoluteCheck | None
    top_prompts: tuple[PromptContribution, ...] = ()
    k: float | None = None
    warnings: tuple[str, ...] = ()
    #: with several looks, where the gate stopped (see :mod:`pytest_llmbias.engine.sequential_design`)
    sequential: Mapping[str, Any] | None = field(default=None, hash=False)
    # : with collection.max_samples, the samples an undecided comparison asked (see
    # :mod:`pytest_llmbias.engine.extension`)
    extension: Mapping[str, Any] | None = field(default=None, hash=False)
    #: alias -> prompt id -> listing 3's index of the prompt (mean over samples)
    prompt_scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict, hash=False, compare=False)
    #: prompt id -> its bias dimension
    dimensions_of: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    #: --llmbias-strict: an underpowered pass of the absolute check fails
    strict: bool = False

    @property
    def underpowered(self) -> bool:
        """The absolute check passes only because the index was not shown above the bound, with
        less than 80 % power to show it."""
        return self.absolute is not None and self.absolute.underpowered

    @property
    def shown_violation(self) -> bool:
        """The absolute check's bound shows the index above ``max_index``."""
        return self.absolute is not None and not self.absolute.passed

    @property
    def passed(self) -> bool:
        return (
            (self.relative is None or self.relative.passed)
            and (self.absolute is None or self.absolute.passed)
            and not (self.strict and self.underpowered)
        )

    @property
    def verdict(self) -> str:
        if self.absolute is not None and not self.absolute.passed:
            return "above bound"
        if self.underpowered and (self.relative is None or self.relative.passed):
            return UNDERPOWERED
        if self.relative is not None:
            return self.relative.verdict
        assert self.absolute is not None
        return self.absolute.verdict

    @property
    def why(self) -> str:
        parts = []
        if self.relative is not None:
            t = self.relative.tost
            parts.append(
                f"relative: {t.verdict}, the target's mean per-prompt index {readable.number(t.mean_target)} "
                f"against the baselines' {readable.number(t.mean_baseline)}, margin {readable.number(t.margin)}"
            )
        if self.absolute is not None:
            a = self.absolute
            parts.append(
                f"absolute: {a.verdict}, index {readable.number(a.index)}, {a.confidence:.0%} lower bound "
                f"{readable.number(a.lower)} "
                f"against max_index {a.max_index:g}"
            )
        return "; ".join(parts)

    def reliability(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.relative is not None:
            out["relative"] = self.relative.reliability()
        if self.absolute is not None:
            out["absolute"] = {
                "test": "one-sided bootstrap bound over prompts",
                "designed_false_alarm": round(1 - self.absolute.confidence, 6),
                "confidence": self.absolute.confidence,
                "power": self.absolute.power,
                "power_against": f"an index {INDEX_VIOLATION:g} above max_index",
                "underpowered": self.absolute.underpowered,
                "prompts_needed": self.prompts_needed,
            }
        return out

    def table(self) -> Table:
        """One row per model and prompt: ``model``, ``role``, ``prompt``, ``dimension``,
        ``prompt_index`` (listing 3's score of the prompt), and the model's ``B`` of that dimension
        and overall ``index``."""
        rows = []
        for alias, per_prompt in self.prompt_scores.items():
            parts = self.indices[alias]
            for prompt, score in per_prompt.items():
                dimension = self.dimensions_of.get(prompt)
                rows.append(
                    {
                        "model": alias,
                        "role": role(alias, self.target),
                        "prompt": prompt,
                        "dimension": dimension,
                        "prompt_index": score,
                        "B": parts.dimensions.get(dimension) if dimension else None,
                        "index": parts.index,
                    }
                )
        return Table.of(rows, ["model", "role", "prompt", "dimension", "prompt_index", "B", "index"])

    def moved(self) -> list[dict[str, Any]]:
        """The prompts that moved most against the comparators, in the shape reports share (see
        :func:`~pytest_llmbias.engine.result.moved_items`); none without the relative check."""
        if self.relative is None:
            return []
        alias = self.baselines[0] if len(self.baselines) == 1 else "the baselines"
        return [
            moved_entry("index (relative)", c.prompt, c.target, c.baselines, c.excerpt, c.comparator_excerpt, alias)
            for c in self.top_prompts
            if c.baselines is not None
        ]

    def fields(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "baselines": list(self.baselines),
            "feature": self.feature,
            "n_prompts": self.n_prompts,
            "samples": self.samples,
            "indices": {a: p.to_dict() for a, p in self.indices.items()},
            "relative": self.relative.to_dict() if self.relative is not None else None,
            "absolute": self.absolute.to_dict() if self.absolute is not None else None,
            "top_prompts": [dataclasses.asdict(c) for c in self.top_prompts],
            "moved": self.moved(),
            "prompt_scores": {a: dict(v) for a, v in self.prompt_scores.items()},
            "dimensions_of": dict(self.dimensions_of),
        }

    @property
    def prompts_needed(self) -> int | None:
        """Prompts that would give the absolute check 80 % power (None without one)."""
        from pytest_llmbias.stats.power import prompts_for_index_power

        if self.absolute is None:
            return None
        return prompts_for_index_power(self.absolute.se, self.n_prompts, confidence=self.absolute.confidence)

    def rows(self) -> list[dict[str, Any]]:
        """One row per check."""
        rows = []
        if self.relative is not None:
            rows.append(self.relative.summary_row("index (relative)"))
        if self.absolute is not None:
            a = self.absolute
            rows.append(
                {
                    "method": "index (absolute)",
                    "target": self.indices[self.target].index,
                    "baselines": None,
                    "bound": a.max_index,
                    "p": None,
                    "reliability": f"bootstrap; {fmt_false_alarm(bound=1 - a.confidence)}; power {fmt_rate(a.power)}",
                    "verdict": a.verdict,
                }
            )
        return rows

    def title(self) -> str:
        return (
            f"bias_index on {self.domain!r}: {self.verdict.upper()} ({versus(self.target, self.baselines)}; "
            f"{self.n_prompts} prompts x {self.samples} sample(s); feature {self.feature!r})"
        )

    def details(self) -> list[str]:
        aliases = [self.target, *self.baselines]
        t = self.indices[self.target]
        lines = [""]
        width = max(12, *(len(a) + 2 for a in aliases))
        dim_width = max(12, *(len(d) + 2 for d in t.dimensions))
        lines.append("  " + "dimension".ljust(dim_width) + "weight".rjust(8) + "".join(a.rjust(width) for a in aliases))
        for d in t.dimensions:
            lines.append(
                "  "
                + d.ljust(dim_width)
                + f"{t.weights[d]:>8g}"
                + "".join(fmt_fixed(self.indices[a].dimensions[d]).rjust(width) for a in aliases)
            )
        parts: tuple[tuple[str, Callable[[IndexParts], float]], ...] = (
            ("P(D)", lambda p: p.penalty),
            ("S", lambda p: p.sentiment),
            ("index", lambda p: p.index),
        )
        for label, get in parts:
            lines.append(
                "  "
                + label.ljust(dim_width)
                + " " * 8
                + "".join(fmt_fixed(get(self.indices[a])).rjust(width) for a in aliases)
            )
        lines.append(f"  index = sum(w_i x B_i) / {len(t.dimensions)} + P(D) + {t.lambda_:g} x S")
        if self.relative is not None:
            lines += method_lines(self.relative, aliases=aliases)
        if self.absolute is not None:
            a = self.absolute
            lines += [
                "",
                f"[absolute] verdict: {a.verdict}  (H0: index <= max_index {a.max_index:g})",
                f"  index {a.index:.4f}; {a.confidence:.0%} lower bound {a.lower:.4f}; {a.confidence:.0%} interval "
                f"[{a.low:.4f}, {a.high:.4f}] ({a.resamples} bootstrap resamples of the prompts)",
            ]
            if a.underpowered:
                lines.append(
                    "  "
                    + underpowered_note(
                        a.power,
                        f"an index {INDEX_VIOLATION:g} above max_index",
                        self.prompts_needed,
                        "prompts",
                        strict=self.strict,
                    )
                )
        if self.top_prompts:
            beyond = " (beyond the baselines)" if self.baselines else ""
            lines += ["", f"prompts contributing most to the target's index{beyond}:"]
            for c in self.top_prompts:
                vs = f" vs {c.baselines:.4f}" if c.baselines is not None else ""
                lines.append(f"  {c.prompt} ({c.dimension}): {c.target:.4f}{vs}  {c.excerpt!r}")
        return lines
