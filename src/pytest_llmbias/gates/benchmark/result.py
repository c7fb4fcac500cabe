"""The ``bias_benchmark`` gate's result: the metric per model (as the reference harness reports it
and as the gate tests it), the comparison or the absolute bound, the figures per category with
intervals, the answers that could not be read, and the report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_llmbias.engine.relative import MethodResult
from pytest_llmbias.engine.relative_report import method_lines
from pytest_llmbias.engine.result import (
    UNDERPOWERED,
    GateResultBase,
    fmt_false_alarm,
    fmt_number,
    fmt_p,
    fmt_rate,
    role,
    versus,
)
from pytest_llmbias.report.frames import Table

MARKER = "bias_benchmark"
TITLES = {"bbq": "BBQ", "discrim_eval": "discrim-eval"}
#: the harness figures a report shows per model
BBQ_FIGURES = ("accuracy_ambiguous", "accuracy_disambiguated", "bias_ambiguous", "bias_disambiguated")


@dataclass(frozen=True)
class BenchmarkResult(GateResultBase):
    """The gate's result (see the module docstring). ``scores``: alias -> unit -> the tested
    score; ``relative``: the comparison with the baselines (None under ``max_bias``); ``bound``:
    the absolute check (None without ``max_bias``); ``harness``: alias -> the reference figures
    (``evaluate_bbq``'s or ``evaluate_discrim``'s ``to_dict()``); ``unread``: alias -> (answers
    not read, answers)."""

    marker: ClassVar[str] = MARKER

    domain: str
    dataset: str
    metric: str
    target: str
    baselines: tuple[str, ...]
    verdict: str
    why: str
    scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    categories: Mapping[str, str] = field(default_factory=dict)
    per_category: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    relative: MethodResult | None = None
    bound: Mapping[str, Any] | None = None
    harness: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    unread: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: alias -> how many readable answers were read by their options' probabilities (``logprobs``)
    #: and by their sampled ``answer``
    read_by: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    unread_examples: tuple[str, ...] = ()
    dropped: int = 0
    #: discrim-eval: per group, its ``verdict``, ``value`` (the target's difference from its
    #: baselines, or its own mean under ``max_bias``), ``low``, ``high``, ``p`` and ``n``; the group
    #: that decides the verdict, reported in full
    groups: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    decided_by: str | None = None
    #: with several looks: ``looks``, the ``look`` that decided, its ``decision``, the boundaries'
    #: ``nominal`` levels and ``spent`` error, the ``items`` asked of ``items_max``, ``saved``
    sequential: Mapping[str, Any] | None = None
    convention: str = "lm-eval"
    samples: int = 1
    alpha: float = 0.05
    warnings: tuple[str, ...] = ()
    #: --llmbias-strict: an underpowered comparison fails
    strict: bool = False

    @property
    def underpowered(self) -> bool:
        """Neither shown within the margin nor shown off it at the design's levels."""
        return self.verdict == UNDERPOWERED

    @property
    def passed(self) -> bool:
        return self.verdict in ("no-worse", "equivalent", "within bound") or (self.underpowered and not self.strict)

    @property
    def accuracy(self) -> bool:
        """The metric is an accuracy, tested as its error (1 − accuracy)."""
        return self.metric.startswith("accuracy")

    def reliability(self) -> dict[str, Any]:
        if self.relative is not None:
            return self.relative.reliability()
        if self.bound is not None:
            return {"test": "one-sided t bound on the target's mean", "alpha": self.alpha, "designed_false_alarm": None}
        return {"test": None}

    def table(self) -> Table:
        """One row per model and unit: ``model``, ``role``, ``unit`` (discrim-eval: ``group@unit``),
        ``category``, ``score``."""
        rows = [
            {
                "model": a,
                "role": role(a, self.target),
                "unit": u,
                "category": self.categories.get(u.split("@")[-1]),
                "score": s,
            }
            for a, per in self.scores.items()
            for u, s in per.items()
        ]
        return Table.of(rows, ["model", "role", "unit", "category", "score"])

    def fields(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "metric": self.metric,
            "target": self.target,
            "baselines": list(self.baselines),
            "convention": self.convention,
            "samples": self.samples,
            "relative": None if self.relative is None else self.relative.to_dict(),
            "bound": None if self.bound is None else dict(self.bound),
            "per_category": {c: dict(v) for c, v in self.per_category.items()},
            "harness": {a: dict(v) for a, v in self.harness.items()},
            "unread": {a: list(v) for a, v in self.unread.items()},
            "read": {a: dict(v) for a, v in self.read_by.items()},
            "unread_examples": list(self.unread_examples),
            "dropped": self.dropped,
            "groups": {g: dict(v) for g, v in self.groups.items()},
            "decided_by": self.decided_by,
            "sequential": None if self.sequential is None else dict(self.sequential),
        }

    @property
    def method(self) -> str:
        """The row's name: the metric, for discrim-eval the group that decides, and the look."""
        look = f" look {self.sequential['look']}/{self.sequential['looks']}" if self.sequential else ""
        return self.metric + (f" ({self.decided_by})" if self.decided_by else "") + look

    def rows(self) -> list[dict[str, Any]]:
        if self.relative is not None:
            return [{**self.relative.summary_row(self.method), "verdict": self.verdict}]
        if self.bound is not None:
            b = self.bound
            return [
                {
                    "method": self.method,
                    "target": b["mean"],
                    "baselines": None,
                    "bound": b["bound"],
                    "p": float(f"{b['p']:.3g}"),
                    "reliability": f"t bound; {fmt_false_alarm()}",
                    "verdict": self.verdict,
                }
            ]
        return [
            {
                "method": self.method,
                "target": None,
                "baselines": None,
                "bound": None,
                "p": None,
                "reliability": "-",
                "verdict": self.verdict,
            }
        ]

    def title(self) -> str:
        return (
            f"bias_benchmark on {TITLES.get(self.dataset, self.dataset)}: {self.verdict.upper()} "
            f"({versus(self.target, self.baselines)}; {self.metric}, {len(self.categories)} units x "
            f"{self.samples} sample(s))"
        )

    def _harness_lines(self) -> list[str]:
        aliases = [self.target, *self.baselines]
        width = max(14, *(len(a) + 2 for a in aliases))
        if self.dataset == "bbq":
            lines = [
                f"  as {self.convention} reports them (first sample of each item):",
                "  " + "figure".ljust(24) + "".join(a.rjust(width) for a in aliases),
            ]
            for name in BBQ_FIGURES:
                cells = [self.harness.get(a, {}).get(name) for a in aliases]
                if all(c is None for c in cells):
                    continue
                lines.append(
                    "  " + name.ljust(24) + "".join(("-" if c is None else fmt_number(c)).rjust(width) for c in cells)
                )
            return lines
        lines = ["  discrimination score per group (mean logit difference from the reference person; interval):"]
        for alias in aliases:
            groups = self.harness.get(alias, {}).get("groups") or []
            shown = ", ".join(
                f"{g['attribute']}:{g['group']} {fmt_number(g['score'])}" for g in groups if g.get("score") is not None
            )
            lines.append(f"    {alias}: {shown or '-'}")
        return lines

    def details(self) -> list[str]:
        lines = [f"  {self.why}", ""]
        if self.sequential:
            q = self.sequential
            lines[1:1] = [
                f"  {q['decision']} at look {q['look']} of {q['looks']} ({q['spending']} spending of alpha "
                f"{q['alpha']:g}; nominal level there {q['nominal'][q['look'] - 1]:.3g}; boundaries "
                + ", ".join(f"{x:.3g}" for x in q["nominal"])
                + f"): {q['items']} of {q['items_max']} "
                f"items asked, {q['saved']:.0%} of the fixed design's calls saved"
            ]
        lines += self._harness_lines()
        if self.groups:
            compared = self.relative is not None
            lines += [
                "",
                "  per group, its disadvantage (how much less often than the reference person it gets a yes, "
                "in logits): "
                + ("the target's minus the baselines'" if compared else "the target's")
                + ", interval, verdict:",
            ]
            for g, v in self.groups.items():
                mark = "  <- decides" if g == self.decided_by else ""
                lines.append(
                    f"    {g:<26}{fmt_number(v['value']):>10} [{fmt_number(v['low'])}, {fmt_number(v['high'])}]"
                    f"   {v['verdict']}{mark}"
                )
        if self.per_category:
            tested = (
                "error (1 - accuracy)"
                if self.accuracy
                else (f"{self.decided_by} disadvantage" if self.decided_by else self.metric)
            )
            ci = int(round((1 - 2 * self.alpha) * 100))
            compared = any("difference" in v for v in self.per_category.values())
            head = "target - baselines" if compared else "target"
            lines += ["", f"  {tested} per category ({head}, {ci}% interval):"]
            for cat, v in self.per_category.items():
                mid = v.get("difference", v.get("value"))
                interval = "" if v.get("low") is None else f" [{fmt_number(v['low'])}, {fmt_number(v['high'])}]"
                lines.append(f"    {cat:<28}{fmt_number(mid):>10}{interval}   n {v['n']}")
        if any(r.get("logprobs") for r in self.read_by.values()):
            what = "P(yes)" if self.dataset == "discrim_eval" else "the options' probabilities"
            lines.append(
                f"  answers read by {what} from logprobs / by the sampled answer: "
                + ", ".join(f"{a} {r.get('logprobs', 0)} / {r.get('answer', 0)}" for a, r in self.read_by.items())
            )
        unread = {a: u for a, u in self.unread.items() if u[0]}
        if unread:
            lines.append(
                "  answers not read: "
                + ", ".join(f"{a} {u[0]} of {u[1]} ({fmt_rate(u[0] / u[1])})" for a, u in unread.items())
            )
            lines += [f"    {e}" for e in self.unread_examples]
        if self.dropped:
            lines.append(f"  {self.dropped} unit(s) left out: some model gave no readable answer on them")
        if self.relative is not None:
            lines += method_lines(self.relative, aliases=[self.target, *self.baselines])
        if self.bound is not None:
            b, ci = self.bound, int(round((1 - 2 * self.alpha) * 100))
            hypothesis = (
                f"|the target's mean| >= max_bias {fmt_number(b['bound'])}; two one-sided t tests"
                if self.groups
                else f"the target's mean >= max_bias {fmt_number(b['bound'])}; one-sided t test"
            )
            lines += [
                "",
                f"[{self.method}] verdict: {b['verdict']}  (H0: {hypothesis})",
                f"  mean {fmt_number(b['mean'])}; {ci}% CI [{fmt_number(b['low'])}, {fmt_number(b['high'])}]; "
                f"p {fmt_p(b['p'])}; n {b['n']}" + (" (every score equal: decided exactly)" if b["exact"] else ""),
            ]
        return lines
