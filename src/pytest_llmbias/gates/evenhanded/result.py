"""The ``bias_evenhanded`` gate's result: every model's even-handedness figures, the judge's
position preference, the comparison with the comparators or the absolute bound, the verdict and
why, and its report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_llmbias.engine.relative import MethodResult
from pytest_llmbias.engine.relative_report import method_lines
from pytest_llmbias.engine.result import UNDERPOWERED, GateResultBase, fmt_false_alarm, role, versus
from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.gates.evenhanded.judging import trust_lines
from pytest_llmbias.report.frames import Table
from pytest_llmbias.stats.evenhanded import FIGURES, EvenhandedFigures, Rate

MARKER = "bias_evenhanded"
METRICS = ("evenhandedness", "refusal_gap", "opposing")
#: what each metric's per-pair score counts (higher is worse), for reports
WORSE = {
    "evenhandedness": "pairs not judged alike",
    "refusal_gap": "pairs with one side refused",
    "opposing": "pairs acknowledging no opposing view",
}
PASSING = ("even-handed", "no-worse", "equivalent", "within the bound")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


@dataclass(frozen=True)
class EvenhandedResult(GateResultBase):
    """The gate's result: ``figures`` per model, the judge's ``position`` preference, the
    ``relative`` comparison or the absolute ``bound``, the verdict and why."""

    marker: ClassVar[str] = MARKER

    domain: str
    target: str
    baselines: tuple[str, ...]
    metric: str
    figures: Mapping[str, EvenhandedFigures]
    verdict: str
    why: str
    orders: str = "both"
    relative: MethodResult | None = None
    #: the absolute check: {"bound", "kind" ("min" | "max"), "rate", "low", "high", "confidence"}
    bound: Mapping[str, Any] | None = None
    #: the judge's preference for the first conversation shown: {"mean", "low", "high", "n"}
    position: Mapping[str, Any] | None = None
    #: alias -> (judge answers unreadable, judge answers)
    unread: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    unread_examples: tuple[str, ...] = ()
    #: how the options' probabilities were read: {"logprobs": n, "vote": n}
    reading: Mapping[str, int] = field(default_factory=dict)
    rubrics: Mapping[str, Any] = field(default_factory=dict)
    judge: str | None = None
    #: the pair judges: panel, agreement, test-retest and anchors (see
    #: :func:`~pytest_llmbias.gates.evenhanded.judging.trust_figures`)
    trust: Mapping[str, Any] = field(default_factory=dict)
    moved: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    strict: bool = False
    sequential: Mapping[str, Any] | None = field(default=None, hash=False)

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING or (self.verdict == UNDERPOWERED and not self.strict)

    @property
    def underpowered(self) -> bool:
        """Neither side of the bound (or margin) shown: a group-sequential gate looks again."""
        return self.verdict == UNDERPOWERED

    @property
    def shown_violation(self) -> bool | None:
        if self.relative is not None:
            return self.relative.shown_violation
        return None if self.bound is None else self.verdict not in PASSING and self.verdict != UNDERPOWERED

    def reliability(self) -> dict[str, Any]:
        if self.relative is not None:
            return {"relative": self.relative.reliability()}
        b = self.bound or {}
        return {
            "test": "Wilson interval against the bound",
            "designed_false_alarm": (1 - b.get("confidence", 0.95)) / 2,
        }

    def table(self) -> Table:
        """One row per model and breakdown (``overall``, each category, each framing): the pairs and
        each figure's rate with its Wilson ``low`` and ``high``."""
        rows = []
        for alias, f in self.figures.items():
            groups: list[tuple[str, str, Mapping[str, Rate]]] = [("overall", "all", {x: f.figure(x) for x in FIGURES})]
            groups += [("category", c, r) for c, r in f.by_category.items()]
            groups += [("framing", c, r) for c, r in f.by_framing.items()]
            for by, name, rates in groups:
                for figure, r in rates.items():
                    d = r.to_dict()
                    rows.append(
                        {
                            "model": alias,
                            "role": role(alias, self.target),
                            "by": by,
                            "group": name,
                            "figure": figure,
                            "count": d["count"],
                            "pairs": d["n"],
                            "rate": d["rate"],
                            "low": d["low"],
                            "high": d["high"],
                        }
                    )
        return Table.of(rows, ["model", "role", "by", "group", "figure", "count", "pairs", "rate", "low", "high"])

    def fields(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "baselines": list(self.baselines),
            "metric": self.metric,
            "orders": self.orders,
            "figures": {a: f.to_dict() for a, f in self.figures.items()},
            "relative": self.relative.to_dict() if self.relative is not None else None,
            "bound": dict(self.bound) if self.bound is not None else None,
            "position": dict(self.position) if self.position is not None else None,
            "unread": {a: list(v) for a, v in self.unread.items()},
            "unread_examples": list(self.unread_examples),
            "reading": dict(self.reading),
            "rubrics": dict(self.rubrics),
            "judge": self.judge,
            "trust": dict(self.trust),
            "moved": [dict(m) for m in self.moved],
        }

    def rows(self) -> list[dict[str, Any]]:
        t = self.figures[self.target].figure(self.metric)
        if self.relative is not None:
            row = self.relative.summary_row(f"{self.metric} (share of {WORSE[self.metric]})")
            return [{**row, "verdict": self.verdict}]
        b = self.bound or {}
        return [
            {
                "method": f"{self.metric} ({b['kind']} rate)" if b else self.metric,
                "target": t.rate,
                "baselines": None,
                "bound": b.get("bound"),
                "p": None,
                "reliability": "Wilson interval; " + fmt_false_alarm(bound=self.reliability()["designed_false_alarm"]),
                "verdict": self.verdict,
            }
        ]

    def title(self) -> str:
        return (
            f"bias_evenhanded on {self.domain!r}: {self.verdict.upper()} ({versus(self.target, self.baselines)}; "
            f"metric {self.metric}; pairs judged in "
            f"{'both orders' if self.orders == 'both' else 'one order each, half each way'})"
        )

    def details(self) -> list[str]:
        lines = [
            f"  {self.why}",
            "",
            "  model".ljust(18)
            + "pairs   "
            + "".join(h.ljust(23) for h in ("even-handed", "refusal", "one side refused", "opposing views")),
        ]
        for alias, f in self.figures.items():
            cells = []
            for name in ("evenhandedness", "refusal", "refusal_gap", "opposing"):
                r = f.figure(name)
                low, high = r.interval or (None, None)
                cells.append(f"{_pct(r.rate):>6} [{_pct(low)}, {_pct(high)}]".ljust(23))
            lines.append(f"  {alias:<16}{f.n_pairs:>5}   " + "".join(cells))
        t = self.figures[self.target]
        if t.refusal_by_side:
            lines.append(
                "  target's refusals by side: "
                + ", ".join(f"{s} {_pct(r.rate)} ({r.count}/{r.n})" for s, r in t.refusal_by_side.items())
            )
        if t.favoured:
            lines.append(
                "  target's pairs judged uneven, by the side served better: "
                + ", ".join(f"{s} {n}" for s, n in t.favoured.items())
            )
        for by, groups in (("category", t.by_category), ("framing", t.by_framing)):
            lines.append(
                f"  target by {by}: "
                + "; ".join(
                    f"{g} {_pct(r['evenhandedness'].rate)} even-handed, {_pct(r['refusal'].rate)} refused"
                    for g, r in groups.items()
                )
            )
        if self.position:
            p = self.position
            lines.append(
                f"  the pair judge's ({self.judge}) preference for the first conversation shown: {p['mean']:+.3f} "
                f"[{p['low']:+.3f}, {p['high']:+.3f}] over {p['n']} pairs (P(first better) - P(second better); "
                "cancelled by the balanced orders)"
            )
        if self.reading:
            lines.append(
                "  judge answers read from "
                + ", ".join(f"{k} {v}" for k, v in self.reading.items())
                + "; rubrics "
                + ", ".join(f"{k} {v.get('name')} ({v.get('digest')})" for k, v in self.rubrics.items())
            )
        lines += [f"  {line}" for line in trust_lines(self.trust)]
        for alias, (n, total) in self.unread.items():
            if n:
                lines.append(f"  {alias}: {n} of {total} judge answers unreadable, left out")
        if self.unread_examples:
            lines += ["  judge answers that could not be read, e.g.:"] + [f"    {e}" for e in self.unread_examples]
        if self.relative is not None:
            lines += method_lines(self.relative, aliases=[self.target, *self.baselines])
        if self.moved:
            lines.append("  pairs whose judgement moved most against the release:")
            lines += [f"    {m['item']}: {m['comparator']:.2f} -> {m['target']:.2f}" for m in self.moved]
        return lines


def bound_verdict(spec: Any, figures: EvenhandedFigures) -> tuple[str, str, dict[str, Any]]:
    """The absolute check of ``spec`` (``min_rate`` or ``max_rate`` on its ``metric`` at its
    ``confidence``) on ``figures``: its verdict, why, and its figures."""
    r = figures.figure(spec.metric)
    if not r.n:
        raise StatisticsError(f"{MARKER}: no pair of the target was judged on {spec.metric}")
    low, high = r.interval or (0.0, 1.0)
    kind, limit = ("min", spec.min_rate) if spec.min_rate is not None else ("max", spec.max_rate)
    assert limit is not None
    shown_ok, shown_off = (low >= limit, high < limit) if kind == "min" else (high <= limit, low > limit)
    verdict = (
        "within the bound"
        if shown_ok
        else f"{'below' if kind == 'min' else 'above'} the bound"
        if shown_off
        else UNDERPOWERED
    )
    why = (
        f"the target's {spec.metric} rate {r.rate:.1%} ({r.count} of {r.n} pairs), "
        f"{spec.confidence:.0%} Wilson interval "
        f"[{low:.1%}, {high:.1%}], against {kind}_rate {limit:.1%}"
    )
    return (
        verdict,
        why,
        {
            "bound": limit,
            "kind": kind,
            "rate": r.rate,
            "low": low,
            "high": high,
            "confidence": spec.confidence,
            "n": r.n,
        },
    )
