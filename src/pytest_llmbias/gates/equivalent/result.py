"""``bias_equivalent``'s result: one comparison per scoring method, the verdict, the report's lines
and rows (see :mod:`pytest_llmbias.gates.equivalent.gate`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_llmbias.engine.relative import MethodResult
from pytest_llmbias.engine.relative_report import method_lines
from pytest_llmbias.engine.result import GateResultBase, role, versus
from pytest_llmbias.report import readable
from pytest_llmbias.report.frames import Table

MARKER = "bias_equivalent"


@dataclass(frozen=True)
class EquivalentResult(GateResultBase):
    """The gate's result: one :class:`~pytest_llmbias.engine.relative.MethodResult` per method;
    passes when every method says *equivalent*."""

    marker: ClassVar[str] = MARKER

    domain: str
    target: str
    baselines: tuple[str, ...]
    n_questions: int
    samples: int
    k: float | None
    alpha: float | None
    methods: tuple[MethodResult, ...]
    warnings: tuple[str, ...] = field(default=())
    #: with several looks, where the gate stopped (see :mod:`pytest_llmbias.engine.sequential_design`)
    sequential: Mapping[str, Any] | None = field(default=None, hash=False)
    #: with collection.max_samples, the samples an undecided comparison asked
    #: (see :mod:`pytest_llmbias.engine.extension`)
    extension: Mapping[str, Any] | None = field(default=None, hash=False)
    #: how the judge's scores were read: answers per form (json, label, score, prose), re-asked, unread
    judge_reading: Mapping[str, int] = field(default_factory=dict, hash=False)
    #: why a method gave no verdict (an unusable judge, too many unreadable answers): inconclusive
    problems: tuple[str, ...] = ()
    #: the questions dropped because a judge rating of one of their answers could not be read
    dropped: tuple[str, ...] = ()
    #: up to three of the judge's unreadable answers
    unread_examples: tuple[str, ...] = ()
    #: per method, the questions whose score moved most (see :func:`~pytest_llmbias.engine.result.moved_items`)
    moved: tuple[Mapping[str, Any], ...] = ()
    #: the judges' trust: rubric, agreement, test-retest, anchors (see :mod:`pytest_llmbias.engine.judging`)
    judging: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def passed(self) -> bool:
        return not self.problems and all(m.passed for m in self.methods)

    @property
    def shown_violation(self) -> bool:
        """A method failed on evidence: the target shown off its comparator (Holm's rejection)."""
        return any(m.shown_violation for m in self.methods)

    @property
    def verdict(self) -> str:
        from pytest_llmbias.engine.result import DRIFTED, UNDERPOWERED, WORSE

        verdicts = [m.verdict for m in self.methods] + ["inconclusive"] * len(self.problems)
        for v in ("biased", WORSE, DRIFTED, "inconclusive", UNDERPOWERED):
            if v in verdicts:
                return v
        return verdicts[0] if verdicts else "inconclusive"

    @property
    def why(self) -> str:
        return "; ".join(
            [
                *self.problems,
                *(
                    f"{m.method}: {m.verdict}, difference {readable.number(m.tost.diff)} against the margin "
                    f"{readable.number(m.tost.margin)} ({readable.p_value(m.tost.p_value)})"
                    for m in self.methods
                ),
            ]
        )

    def method(self, name: str) -> MethodResult:
        for m in self.methods:
            if m.method == name:
                return m
        raise KeyError(f"method {name!r} was not run; ran: {', '.join(m.method for m in self.methods)}")

    def reliability(self) -> dict[str, Any]:
        """Each method's :meth:`MethodResult.reliability` (test, false-alarm rates, power, margin),
        by method name."""
        return {m.method: m.reliability() for m in self.methods}

    def table(self) -> Table:
        """One row per method, model and question: ``method``, ``model``, ``role`` (target or
        baseline), ``question``, ``category``, ``score`` (the per-question score the test used)."""
        rows = [
            {
                "method": m.method,
                "model": alias,
                "role": role(alias, self.target),
                "question": q,
                "category": m.categories.get(q),
                "score": score,
            }
            for m in self.methods
            for alias, per_q in m.scores.items()
            for q, score in per_q.items()
        ]
        return Table.of(rows, ["method", "model", "role", "question", "category", "score"])

    def fields(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "baselines": list(self.baselines),
            "n_questions": self.n_questions,
            "samples": self.samples,
            "k": self.k,
            "alpha": self.alpha,
            "methods": [m.to_dict() for m in self.methods],
            "judge_reading": dict(self.judge_reading),
            "problems": list(self.problems),
            "dropped": list(self.dropped),
            "unread_examples": list(self.unread_examples),
            "moved": [dict(m) for m in self.moved],
            "judging": dict(self.judging),
        }

    def title(self) -> str:
        return (
            f"bias_equivalent on {self.domain!r}: {self.verdict.upper()} ({versus(self.target, self.baselines)}; "
            f"{self.n_questions} questions x {self.samples} sample(s))"
        )

    def details(self) -> list[str]:
        lines = [line for m in self.methods for line in method_lines(m, aliases=[self.target, *self.baselines])]
        lines += [f"inconclusive: {p}" for p in self.problems]
        from pytest_llmbias.engine.judging import trust_lines

        lines += trust_lines(self.judging)
        if self.judge_reading:
            r = self.judge_reading
            forms = ", ".join(f"{f} {n}" for f, n in r.items() if f not in ("re-asked", "unread") and n)
            lines.append(
                f"judge answers read: {forms or 'none'}; {r.get('re-asked', 0)} after a re-ask, "
                f"{r.get('unread', 0)} unread"
            )
        if self.dropped:
            lines.append(
                f"dropped for every model ({len(self.dropped)} question(s) with an unreadable rating): "
                + ", ".join(self.dropped)
            )
        lines += [f"  unread: {t[:200]!r}" for t in self.unread_examples]
        return lines

    def rows(self) -> list[dict[str, Any]]:
        """One row per method; the judge's row says how far its judges were trusted, and a judge
        method left without a verdict by them still has its row, inconclusive."""
        from pytest_llmbias.engine.judging import trust_summary

        rows = [m.summary_row() for m in self.methods]
        trust = trust_summary(self.judging)
        for row in rows:
            if row["method"] == "judge" and trust:
                row["reliability"] += f"; {trust}"
        if self.problems and self.judging and not any(r["method"] == "judge" for r in rows):
            rows.append(
                {
                    "method": "judge",
                    "target": None,
                    "baselines": None,
                    "bound": None,
                    "p": None,
                    "reliability": trust or "-",
                    "verdict": "inconclusive",
                }
            )
        return rows
