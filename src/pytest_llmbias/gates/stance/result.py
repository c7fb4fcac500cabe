"""The ``bias_stance`` gate's result: every model's stance per language and question, the check's
figures and the questions that drive the verdict, and its report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pytest_llmbias.engine.relative import MethodResult
from pytest_llmbias.engine.relative_report import method_lines
from pytest_llmbias.engine.result import MOVED, GateResultBase, fmt_signed, moved_entry, role, versus
from pytest_llmbias.report.frames import Table
from pytest_llmbias.stats.binary_choice import EXPLAINER, NEUTRAL, QuestionStance

MARKER = "bias_stance"


@dataclass(frozen=True)
class StanceResult(GateResultBase):
    """The gate's result: every model's stance per language and question (``stances``), the
    check's figures, the questions that drive the verdict, and the answer counts."""

    marker: ClassVar[str] = MARKER

    domain: str
    check: str
    target: str
    baselines: tuple[str, ...]
    languages: tuple[str, ...]
    rounds: int
    stances: Mapping[str, Mapping[str, Mapping[str, QuestionStance]]]
    passed: bool
    verdict: str
    summary: str
    figures: Mapping[str, Any]
    drivers: tuple[str, ...] = ()
    relative: MethodResult | None = None
    k: float | None = None
    warnings: tuple[str, ...] = ()
    #: with several looks, where the gate stopped (see :mod:`pytest_llmbias.engine.sequential_design`)
    sequential: Mapping[str, Any] | None = field(default=None, hash=False)
    explainers: str = "zero"
    unread: Mapping[str, int] = field(default_factory=dict)
    answers: Mapping[str, int] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    unread_examples: tuple[str, ...] = ()
    #: with one comparator (a recorded release), the questions that moved most (see :func:`moved_stances`)
    moved: tuple[Mapping[str, Any], ...] = ()
    #: --llmbias-strict: an underpowered pass fails
    strict: bool = False

    @property
    def underpowered(self) -> bool:
        """A pass (or, strict, a failure) only because disagreement was not shown, by a check with
        less than 80 % power to show it."""
        return bool(self.figures.get("underpowered"))

    @property
    def shown_violation(self) -> bool:
        """The one-sided bound shows the target disagreeing (``agreement``) or giving way beyond
        ``max_shift`` (``sycophancy``), or the comparison with the baselines shows it off them."""
        return self.verdict in ("disagrees", "gives way") or (
            self.relative is not None and self.relative.shown_violation
        )

    def counts(self) -> dict[str, dict[str, dict[str, int]]]:
        """alias -> language -> explainers and neutral answers (initial phase)."""
        return {
            a: {
                lang: {kind: sum(s.counts.get(kind, 0) for s in per_q.values()) for kind in (EXPLAINER, NEUTRAL)}
                for lang, per_q in by_lang.items()
            }
            for a, by_lang in self.stances.items()
        }

    def read_by(self) -> dict[str, dict[str, int]]:
        """alias -> how many of the answers the verdict uses were read by their options'
        probabilities (``logprobs``) and by their sampled ``answer`` (both phases; see
        :mod:`pytest_llmbias.scoring.option_logprobs`)."""
        out: dict[str, dict[str, int]] = {}
        for a, by_lang in self.stances.items():
            tally = out.setdefault(a, {"logprobs": 0, "answer": 0})
            for per_q in by_lang.values():
                for s in per_q.values():
                    for way, n in (s.read or {}).items():
                        tally[way] = tally.get(way, 0) + n
        return out

    def reliability(self) -> dict[str, Any]:
        out = {k: v for k, v in self.figures.items() if k in ("test", "designed_false_alarm", "false_alarm", "power")}
        if self.relative is not None:
            out.update(self.relative.reliability())
        return out

    def table(self) -> Table:
        """One row per model, language and question: ``model``, ``role``, ``language``,
        ``question``, ``bias``, ``variance``, ``willingness``, ``opposing_bias``, ``shift``,
        ``strong_neutral``, and the counts of ``yes``, ``no``, ``explainer`` and ``neutral`` answers."""
        rows = []
        for alias, by_lang in self.stances.items():
            for lang, per_q in by_lang.items():
                for q, st in per_q.items():
                    rows.append(
                        {
                            "model": alias,
                            "role": role(alias, self.target),
                            "language": lang,
                            "question": q,
                            "bias": st.bias,
                            "variance": st.variance,
                            "willingness": st.willingness,
                            "opposing_bias": st.opposing_bias,
                            "shift": st.shift,
                            "strong_neutral": st.strong_neutral,
                            **{k: st.counts.get(k, 0) for k in ("yes", "no", "explainer", "neutral")},
                        }
                    )
        return Table.of(
            rows,
            [
                "model",
                "role",
                "language",
                "question",
                "bias",
                "variance",
                "willingness",
                "opposing_bias",
                "shift",
                "strong_neutral",
                "yes",
                "no",
                "explainer",
                "neutral",
            ],
        )

    @property
    def why(self) -> str:
        return self.summary

    def fields(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "target": self.target,
            "baselines": list(self.baselines),
            "languages": list(self.languages),
            "rounds": self.rounds,
            "figures": dict(self.figures),
            "drivers": list(self.drivers),
            "relative": self.relative.to_dict() if self.relative is not None else None,
            "counts": self.counts(),
            "read": self.read_by(),
            "explainers": str(self.explainers),
            "unread": dict(self.unread),
            "answers": dict(self.answers),
            "dropped": list(self.dropped),
            "strict": self.strict,
            "unread_examples": list(self.unread_examples),
            "moved": [dict(m) for m in self.moved],
            "stances": {
                a: {lang: {q: s.to_dict() for q, s in per_q.items()} for lang, per_q in by_lang.items()}
                for a, by_lang in self.stances.items()
            },
        }

    def rows(self) -> list[dict[str, Any]]:
        f = self.figures
        return [
            {
                "method": f"stance ({self.check})",
                "target": f.get("target"),
                "baselines": f.get("baselines"),
                "bound": f.get("bound"),
                "p": f.get("p"),
                "reliability": f.get("reliability"),
                "verdict": self.verdict,
            }
        ]

    def title(self) -> str:
        return (
            f"bias_stance ({self.check}) on {self.domain!r}: {self.verdict.upper()} "
            f"({versus(self.target, self.baselines)}; {', '.join(self.languages)}; {self.rounds} rounds)"
        )

    def reading_lines(self) -> list[str]:
        """How the answers were read: by probability or by the sampled answer (where any was read by
        probability), unread answers per model, dropped questions, examples."""
        lines = []
        read = self.read_by()
        if any(r.get("logprobs") for r in read.values()):
            lines.append(
                "  answers read by P(yes) from logprobs / by the sampled answer: "
                + ", ".join(f"{a} {r.get('logprobs', 0)} / {r.get('answer', 0)}" for a, r in read.items())
            )
        if any(self.unread.values()) or self.dropped:
            lines.append(
                "  answers that state no side (dropped): "
                + ", ".join(f"{a} {self.unread.get(a, 0)} of {self.answers.get(a, 0)}" for a in self.answers)
                + (f"; questions dropped for every model: {', '.join(self.dropped)}" if self.dropped else "")
            )
        if self.unread_examples:
            lines += ["  e.g. " + e for e in self.unread_examples]
        return lines

    def details(self) -> list[str]:
        lines = [f"  {self.summary}", *self.reading_lines()]
        if not self.stances:
            return lines
        if self.relative is not None:
            lines += method_lines(self.relative, aliases=[self.target, *self.baselines])
        aliases = [self.target, *self.baselines]
        if self.drivers:
            lines += ["", "questions that drive the verdict (b_q, w_q, s_q per model):"]
            width = max(10, *(len(a) + 2 for a in aliases))
            lines.append("  " + "question".ljust(24) + "".join(a.rjust(width * 2) for a in aliases))
            for unit in self.drivers:
                q, _, lang = unit.partition("@")
                langs = [lang] if lang else list(self.languages)
                for lg in langs:
                    cells = []
                    for a in aliases:
                        s = self.stances[a][lg][q]
                        cells.append(
                            (
                                f"{fmt_signed(s.bias)} {s.willingness:.2f} "
                                f"{fmt_signed(s.shift) if s.shift is not None else '-'}"
                            ).rjust(width * 2)
                        )
                    lines.append("  " + f"{q}@{lg}".ljust(24) + "".join(cells))
        pairs = sorted({q[:-2] for q in self.stances[self.target][self.languages[0]] if q.endswith((":a", ":b"))})
        if pairs:
            lines += [
                "",
                '"A or B?" pairs (b_q of the halves A-over-B / B-over-A; a consistent stance has opposite signs):',
            ]
            for pair in pairs:
                for lg in self.languages:
                    cells = []
                    for a in aliases:
                        st = self.stances[a][lg]
                        if f"{pair}:a" in st and f"{pair}:b" in st:
                            cells.append(f"{a} {fmt_signed(st[f'{pair}:a'].bias)}/{fmt_signed(st[f'{pair}:b'].bias)}")
                    lines.append(f"  {pair}@{lg}: " + "  ".join(cells))
        counts = self.counts()
        lines += ["", "explainers / neutral answers (initial phase):"]
        for a in aliases:
            lines.append(f"  {a}: " + "; ".join(f"{lg} {c[EXPLAINER]} / {c[NEUTRAL]}" for lg, c in counts[a].items()))
        return lines


def moved_stances(
    check: str,
    stances: Mapping[str, Mapping[str, Mapping[str, QuestionStance]]],
    *,
    target: str,
    comparator: str,
    text: Callable[[str, str, str], str | None],
) -> list[dict[str, Any]]:
    """The questions whose stance moved most against one comparator, with each model's first
    answer (``text(alias, question, language)``): for ``sycophancy`` the shift s_q (the larger
    the target's beyond the comparator's, the worse), else the lean b_q (the further from the
    comparator's, the worse)."""
    rows = []
    for lang, per_q in stances[target].items():
        for q, st in per_q.items():
            other = stances[comparator][lang].get(q)
            if other is None:
                continue
            if check == "sycophancy":
                if st.shift is None or other.shift is None:
                    continue
                t, c, worse = st.shift, other.shift, st.shift - other.shift
            else:
                t, c, worse = st.bias, other.bias, abs(st.bias - other.bias)
            rows.append((worse, f"{q}@{lang}", t, c, q, lang))
    rows.sort(key=lambda r: (-r[0], r[1]))
    what = "shift s_q" if check == "sycophancy" else "lean b_q"
    return [
        moved_entry(f"{what}", unit, t, c, text(target, q, lang) or "", text(comparator, q, lang) or "", comparator)
        for _, unit, t, c, q, lang in rows[:MOVED]
    ]
