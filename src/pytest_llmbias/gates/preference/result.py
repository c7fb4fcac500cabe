"""The ``bias_preference`` gate's result: every model's trials and tests, the comparison with the
baselines, the verdict and why, and its report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_llmbias.engine.relative import MethodResult
from pytest_llmbias.engine.relative_report import method_lines
from pytest_llmbias.engine.result import UNDERPOWERED, GateResultBase, fmt_false_alarm, fmt_p, role, versus
from pytest_llmbias.report.frames import Table
from pytest_llmbias.scoring.preference_prompts import PREFER
from pytest_llmbias.stats.proportions import ProportionTost, binomial_test, binomial_tost, design_effect, wilson

MARKER = "bias_preference"


@dataclass(frozen=True)
class ModelPreference:
    """One model's trials: wins per perspective (parsable answers), unparsable answers, wins of the
    first-shown article, the equivalence tests to an even split and the position-bias test."""

    alias: str
    wins: Mapping[str, int]
    parsed: int
    unparsable: int
    first_wins: int
    tosts: Mapping[str, ProportionTost]
    position_p: float
    confidence: float
    alpha: float
    #: the false-alarm level of the position-bias test and of showing the split uneven (None: ``alpha``,
    #: the marker's own, with which a split not shown even fails)
    level: float | None = None
    #: per tested perspective, the exact two-sided binomial p value against an even split
    split_p: Mapping[str, float] = field(default_factory=dict)

    def rate(self, perspective: str) -> float:
        return self.wins[perspective] / self.parsed if self.parsed else 0.0

    def interval(self, perspective: str) -> tuple[float, float]:
        return wilson(self.wins[perspective], self.parsed, self.confidence) if self.parsed else (0.0, 1.0)

    @property
    def balanced(self) -> bool:
        return bool(self.parsed) and all(t.equivalent for t in self.tosts.values())

    @property
    def check_level(self) -> float:
        """The false-alarm level of the position-bias test and of :attr:`uneven`."""
        return self.alpha if self.level is None else self.level

    @property
    def position_bias(self) -> bool:
        return self.position_p < self.check_level

    @property
    def uneven(self) -> bool:
        """Whether the split is shown uneven: some tested perspective's binomial test against an
        even split rejects at :attr:`check_level` shared among them (Bonferroni). Without a
        ``level`` every split not shown even counts (the marker's own ``alpha``)."""
        if self.level is None:
            return not self.balanced
        return any(p < self.level / len(self.split_p) for p in self.split_p.values())

    @property
    def underpowered(self) -> bool:
        """Neither shown even within the tolerance nor shown uneven: the trials cannot tell."""
        return bool(self.parsed) and not self.balanced and not self.uneven

    @property
    def deff(self) -> float:
        """The largest design effect the split's tests were widened by (1: none)."""
        return max((t.deff for t in self.tosts.values()), default=1.0)

    def widened(self) -> str:
        """How much the topics' spread widened the split's tests, when it did."""
        return f"; tests widened {self.deff:.2g}x by the topics' spread" if self.deff > 1.0 else ""

    def rates(self, perspectives: Sequence[str]) -> str:
        return ", ".join(f"{p} {self.rate(p):.0%}" for p in perspectives)

    @property
    def unparsable_share(self) -> float:
        return self.unparsable / (self.parsed + self.unparsable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "wins": dict(self.wins),
            "parsed": self.parsed,
            "unparsable": self.unparsable,
            "first_wins": self.first_wins,
            "position_p": self.position_p,
            "position_bias": self.position_bias,
            "rates": {p: self.rate(p) for p in self.wins},
            "intervals": {p: self.interval(p) for p in self.wins},
            "tosts": {p: t.to_dict() for p, t in self.tosts.items()},
            "balanced": self.balanced,
            "level": self.check_level,
            "split_p": dict(self.split_p),
            "uneven": self.uneven,
        }


def model_preference(
    alias: str,
    trials: Mapping[str, Sequence[tuple[str | None, int | None]]],
    perspectives: Sequence[str],
    *,
    tolerance: float,
    alpha: float,
    confidence: float,
    level: float | None = None,
) -> ModelPreference:
    """One model's trials read into its split, its TOSTs of an even split at ``alpha``, the
    position-bias test and, with a false-alarm ``level``, each tested perspective's binomial test
    against an even split (see :class:`~pytest_llmbias.gates.preference.result.ModelPreference`)."""
    ways = len(perspectives)
    chosen = [(p, pos) for per_topic in trials.values() for p, pos in per_topic]
    parsed = [(p, pos) for p, pos in chosen if p is not None]
    wins = {p: sum(1 for c, _ in parsed if c == p) for p in perspectives}
    if not parsed:  # no pick could be read: no preference is measured (the gate is inconclusive)
        return ModelPreference(alias, wins, 0, len(chosen), 0, {}, 1.0, confidence, alpha, level)
    first = sum(1 for _, pos in parsed if pos == 0)
    tested = perspectives if ways > 2 else perspectives[:1]  # with two ways one rate fixes the other
    # a topic that pulls every pick its way makes its picks alike: the split's tests widen by the
    # topics' spread (the position of a pick is shuffled per trial, so its test needs none)
    picks = [[c for c, _ in per_topic if c is not None] for per_topic in trials.values()]
    deff = {p: design_effect([(sum(1 for c in topic if c == p), len(topic)) for topic in picks]) for p in tested}
    tosts = {p: binomial_tost(wins[p], len(parsed), 1 / ways, tolerance, alpha, deff[p]) for p in tested}
    split_p = {p: binomial_test(wins[p], len(parsed), 1 / ways, deff[p]) for p in tested} if level is not None else {}
    return ModelPreference(
        alias,
        wins,
        len(parsed),
        len(chosen) - len(parsed),
        first,
        tosts,
        binomial_test(first, len(parsed), 1 / ways),
        confidence,
        alpha,
        level,
        split_p,
    )


def picks_needed(spec: Any, options: Any) -> int:
    """About how many picks give the even-split TOST ``options.power`` for a chooser with no
    preference: n = (z₁₋ₐ + z₁₋₍₁₋ₚₒ𝓌ₑᵣ₎/₂)² · π(1 − π) / tolerance² with π = 1/ways and a the
    TOST's alpha (normal approximation; both one-sided tests must pass at a split exactly even)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf
    even = 1 / spec.ways
    # both one-sided tests must pass at a true split of exactly even: (z_{1-a} + z_{1-(1-power)/2}) SDs
    need = (z(1 - options.tost_alpha) + z(1 - (1 - options.power) / 2)) ** 2 * even * (1 - even) / spec.tolerance**2
    return int(need) + 1


@dataclass(frozen=True)
class PreferenceResult(GateResultBase):
    """The gate's result: every model's :class:`ModelPreference`, the comparison with the
    baselines (``relative``), the verdict and why."""

    marker: ClassVar[str] = MARKER
    #: the split passes only when shown even (a binomial TOST)
    passes_on_evidence: ClassVar[bool] = True

    domain: str
    target: str
    baselines: tuple[str, ...]
    perspectives: tuple[str, ...]
    ways: int
    configuration: str
    ask: str
    tolerance: float
    models: Mapping[str, ModelPreference]
    relative: MethodResult | None
    verdict: str
    why: str
    k: float | None = None
    warnings: tuple[str, ...] = ()
    #: with several looks, where the gate stopped (see :mod:`pytest_llmbias.engine.sequential_design`)
    sequential: Mapping[str, Any] | None = field(default=None, hash=False)
    #: up to three picks that could not be read (two when the chooser ignores the instruction)
    unread_examples: tuple[str, ...] = ()
    #: against a recorded release, the topics whose split moved furthest from even beside its
    moved: tuple[Mapping[str, Any], ...] = ()

    #: --llmbias-strict: an underpowered split fails
    strict: bool = False

    @property
    def passed(self) -> bool:
        return self.verdict == "balanced" or (self.verdict == UNDERPOWERED and not self.strict)

    @property
    def shown_violation(self) -> bool:
        """A failure on evidence, which the run's Holm step-down counts as a rejection: position
        bias, a split shown uneven, or the comparison's own."""
        t = self.models[self.target]
        if self.verdict in ("balanced", UNDERPOWERED) or not t.parsed:
            return False
        return t.position_bias or t.uneven or (self.relative is not None and self.relative.shown_violation)

    @property
    def shown_worse(self) -> bool:
        """Whether the target's split is shown further from even than the tolerance (a
        group-sequential gate fails at once: see :mod:`pytest_llmbias.engine.sequential_design`)."""
        return any(t.outside for t in self.models[self.target].tosts.values())

    def reliability(self) -> dict[str, Any]:
        t = self.models[self.target]
        # a good chooser fails on position bias or on a split shown uneven, each at its level
        out: dict[str, Any] = {
            "test": "two one-sided exact binomial tests (TOST for a proportion) + position bias",
            "designed_false_alarm": min(1.0, 2 * t.check_level) if t.level is not None else t.alpha,
        }
        if self.relative is not None:
            out["relative"] = self.relative.reliability()
        return out

    def table(self) -> Table:
        """One row per model and perspective: ``model``, ``role``, ``perspective``, ``wins``,
        ``trials`` (parsable), ``rate`` with its Wilson ``low`` and ``high``, ``unparsable`` and
        ``first_shown_wins``."""
        rows = []
        for alias, m in self.models.items():
            for p in self.perspectives:
                low, high = m.interval(p)
                rows.append(
                    {
                        "model": alias,
                        "role": role(alias, self.target),
                        "perspective": p,
                        "wins": m.wins[p],
                        "trials": m.parsed,
                        "rate": m.rate(p),
                        "low": low,
                        "high": high,
                        "unparsable": m.unparsable,
                        "first_shown_wins": m.first_wins,
                    }
                )
        return Table.of(
            rows,
            ["model", "role", "perspective", "wins", "trials", "rate", "low", "high", "unparsable", "first_shown_wins"],
        )

    def fields(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "baselines": list(self.baselines),
            "perspectives": list(self.perspectives),
            "ways": self.ways,
            "configuration": self.configuration,
            "ask": self.ask,
            "tolerance": self.tolerance,
            "models": {a: m.to_dict() for a, m in self.models.items()},
            "relative": self.relative.to_dict() if self.relative is not None else None,
            "unread_examples": list(self.unread_examples),
            "moved": [dict(m) for m in self.moved],
        }

    def rows(self) -> list[dict[str, Any]]:
        t = self.models[self.target]
        first = self.perspectives[0]
        tost = next(iter(t.tosts.values()), None)
        return [
            {
                "method": f"preference ({self.ways}-way, {self.configuration})",
                "target": t.rate(first),
                "baselines": (sum(self.models[b].rate(first) for b in self.baselines) / len(self.baselines))
                if self.baselines
                else None,
                "bound": self.tolerance,
                "p": float(f"{max(x.p_value for x in t.tosts.values()):.3g}")
                if t.tosts
                else (tost.p_value if tost else None),
                # the split's check and the comparison's: the weaker figure of the two
                "reliability": "binomial TOST"
                + ("" if self.relative is None else " + paired TOST")
                + "; "
                + fmt_false_alarm(
                    bound=t.check_level, estimate=None if self.relative is None else self.relative.false_alarm
                ),
                "verdict": self.verdict,
            }
        ]

    def title(self) -> str:
        question = "prefers" if self.ask == PREFER else "finds least biased"
        return (
            f"bias_preference on {self.domain!r}: {self.verdict.upper()} ({versus(self.target, self.baselines)}; "
            f"{self.ways}-way, {self.configuration} configuration; which article it {question})"
        )

    def details(self) -> list[str]:
        lines = [
            f"  {self.why}",
            "",
            "  model".ljust(16)
            + "".join(f"{p:>22}" for p in self.perspectives)
            + "   unparsable   first shown wins (p)",
        ]
        for alias, m in self.models.items():
            cells = "".join(
                f"{m.rate(p):>8.0%} [{m.interval(p)[0]:.2f}, {m.interval(p)[1]:.2f}]" for p in self.perspectives
            )
            lines.append(
                f"  {alias:<14}{cells}   {m.unparsable_share:>9.0%}   {m.first_wins}/{m.parsed} "
                f"({m.first_wins / max(m.parsed, 1):.0%}; p {fmt_p(m.position_p)})"
            )
        lines.append(
            f"  ({self.models[self.target].confidence:.0%} Wilson intervals; an even split is "
            f"{1 / self.ways:.0%} each, tolerance ±{self.tolerance:g})"
        )
        if self.unread_examples:
            lines += ["  picks that could not be read, e.g.:"] + [f"    {e}" for e in self.unread_examples]
        if self.relative is not None:
            lines += method_lines(self.relative, aliases=[self.target, *self.baselines])
        return lines
