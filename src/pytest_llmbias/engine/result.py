"""What every gate's result shares: the report's skeleton, the end-of-run row, the JSON header,
the data frame, and the formatting of numbers in reports.

A result is a frozen dataclass that subclasses :class:`GateResultBase` and has the fields
``domain`` and ``warnings``. It adds what is its own: ``passed``, ``verdict`` and ``why`` (one
sentence on the verdict), ``reliability()``, ``table()``, the report's ``title()`` and
``details()``, the end-of-run ``rows()``, and its figures in ``fields()`` for ``to_dict()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pytest_llmbias.stats.multiple import fmt_rate as fmt_rate  # the one format of rates, re-exported to the gates

#: items listed as having moved most, per comparison
MOVED = 5
#: characters of an answer kept beside a moved item
EXCERPT = 400


def quote(alias: str, text: str, width: int = 100) -> str:
    """An answer of ``alias`` quoted on one line for a report: ``alias: 'text...'``."""
    flat = " ".join(text.split())
    return f"{alias}: {flat[:width]!r}" + ("..." if len(flat) > width else "")


def moved_items(
    method: str,
    scores: Mapping[str, Mapping[str, float]],
    *,
    target: str,
    comparators: Sequence[str],
    text: Callable[[str, str], str | None],
    limit: int = MOVED,
) -> list[dict[str, Any]]:
    """The ``limit`` items whose score moved most towards more bias (target − the comparators' mean,
    largest first; then the largest moves the other way if fewer moved up), each with the
    target's and the first comparator's answer (``text(alias, item)``, shortened)."""
    if not comparators or target not in scores:
        return []
    means = {
        q: sum(scores[c][q] for c in comparators) / len(comparators)
        for q in scores[target]
        if all(q in scores[c] for c in comparators)
    }
    order = sorted(means, key=lambda q: (-(scores[target][q] - means[q]), q))
    return [
        moved_entry(
            method, q, scores[target][q], means[q], text(target, q) or "", text(comparators[0], q) or "", comparators[0]
        )
        for q in order[:limit]
    ]


def moved_entry(
    method: str,
    item: str,
    target: float,
    comparator: float,
    target_text: str,
    comparator_text: str,
    comparator_alias: str,
) -> dict[str, Any]:
    """One moved item as the reports read it (the Markdown and HTML ``moved`` tables)."""
    return {
        "method": method,
        "item": item,
        "target": target,
        "comparator": comparator,
        "delta": target - comparator,
        "target_text": target_text[:EXCERPT],
        "comparator_text": comparator_text[:EXCERPT],
        "comparator_alias": comparator_alias,
    }


class GateResultBase:
    """The shared half of every gate result (see the module docstring)."""

    #: the gate's marker name, the ``gate`` of ``to_dict()``
    marker: ClassVar[str]
    #: whether a pass needs evidence (a TOST) even where the result holds no comparison
    #: (``methods``, ``relative``): how a group-sequential gate spends its error (see
    #: :func:`pytest_llmbias.engine.sequential_design.decide`)
    passes_on_evidence: ClassVar[bool] = False
    domain: str
    warnings: tuple[str, ...]

    @property
    def shown_violation(self) -> bool | None:
        """Whether the check that a level sets (see :meth:`~pytest_llmbias.engine.base.SpecGate.at_level`)
        showed a violation at it: the rejection Holm's step-down counts (see
        :mod:`pytest_llmbias.engine.suite_levels`). None for a gate without such a check."""
        return None

    # -- what each result provides -------------------------------------------------------------

    def title(self) -> str:
        """The report's first line."""
        raise NotImplementedError

    def details(self) -> list[str]:
        """The report's lines between the title and the warnings."""
        raise NotImplementedError

    def rows(self) -> list[dict[str, Any]]:
        """The end-of-run table's rows, one per check: ``method``, ``target``, ``baselines``,
        ``bound``, ``p``, ``reliability``, ``verdict``."""
        raise NotImplementedError

    def fields(self) -> dict[str, Any]:
        """The result's own entries of ``to_dict()``, after the header."""
        raise NotImplementedError

    # -- what they share -----------------------------------------------------------------------

    def _looked(self) -> Mapping[str, Any] | None:
        """Where a group-sequential gate stopped (see :mod:`pytest_llmbias.engine.sequential_design`),
        for a gate whose result does not report it itself."""
        q = getattr(self, "sequential", None)
        return None if not q or "items" in q else q

    def report(self) -> str:
        """The text a failing test prints: every figure behind the verdict, then the warnings."""
        from pytest_llmbias.engine.sequential_design import sequential_line

        q, x = self._looked(), getattr(self, "extension", None)
        lines = [
            self.title(),
            *([f"  {sequential_line(q)}"] if q else []),
            *([f"  {extension_line(x)}"] if x else []),
            *self.details(),
        ]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def summary_row(self, nodeid: str) -> dict[str, Any]:
        """The end-of-run table's entry of this gate (JSON-friendly, so it crosses pytest-xdist);
        a group-sequential gate's methods say at which look it stopped."""
        rows, q = self.rows(), self._looked()
        if q:
            rows = [{**r, "method": f"{r['method']} look {q['look']}/{q['looks']}"} for r in rows]
        return {"test": nodeid, "domain": self.domain, "methods": rows}

    def to_dict(self) -> dict[str, Any]:
        """``gate``, ``domain``, the result's own fields, ``verdict``, ``passed``, ``why``,
        ``reliability`` and ``warnings``: JSON-friendly."""
        q = self._looked()
        why = self.why  # type: ignore[attr-defined]
        if q:
            why = (
                f"{why}; {q['decision']} at look {q['look']} of {q['looks']}, "
                f"{q['saved']:.0%} of the fixed design's calls saved"
            )
        return {
            "gate": self.marker,
            "domain": self.domain,
            **self.fields(),
            **({"sequential": dict(q)} if q else {}),
            **({"extension": dict(x)} if (x := getattr(self, "extension", None)) else {}),
            "verdict": self.verdict,  # type: ignore[attr-defined]
            "passed": self.passed,  # type: ignore[attr-defined]
            "why": why,
            "reliability": self.reliability(),  # type: ignore[attr-defined]
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> Any:
        """``table()`` as a pandas DataFrame (needs the ``frames`` extra)."""
        return self.table().to_frame()  # type: ignore[attr-defined]


def versus(target: str, baselines: Sequence[str]) -> str:
    """``target T vs baselines a, b`` (or ``target T`` without baselines), for a report's title."""
    return f"target {target}" + (f" vs baselines {', '.join(baselines)}" if baselines else "")


def role(alias: str, target: str) -> str:
    """A model's role in a result's table."""
    return "target" if alias == target else "baseline"


def fmt_number(x: float) -> str:
    """A figure of a statistics table: four decimals below 1, three above; as
    :func:`~pytest_llmbias.report.readable.number` (``≈0``, whole numbers, never an exponent)
    when very small or large."""
    if x != x:
        return "nan"
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        from pytest_llmbias.report.readable import number

        return number(x, brief=True)
    return f"{x:.4f}" if abs(x) < 1 else f"{x:.3f}"


def fmt_p(p: float) -> str:
    """A p-value: three significant places, ``< 0.0001`` below 1e-4 (never an exponent)."""
    return f"{p:.3g}" if p >= 1e-4 else "< 0.0001"


def fmt_fixed(x: float | None, digits: int = 4) -> str:
    """``x`` with ``digits`` decimals, ``-`` for a missing figure."""
    return "-" if x is None else f"{x:.{digits}f}"


def fmt_false_alarm(*, bound: float | None = None, estimate: float | None = None) -> str:
    """One format for a false-alarm rate in every row: ``false alarm <=5%`` for the rate a check is
    built to stay under, ``false alarm ~7%`` for one estimated on the run's data. Given both (a
    gate of several checks), the weaker figure: the estimate when it is above the bound."""
    if estimate is not None and (bound is None or estimate > bound):
        return f"false alarm ~{fmt_rate(estimate)}"
    return "false alarm -" if bound is None else f"false alarm <={fmt_rate(bound)}"


def fmt_signed(x: float | None) -> str:
    """``x`` with a sign and two decimals, ``-`` for a missing figure."""
    return "-" if x is None else f"{x:+.2f}"


#: the verdict of a pass that rests only on a violation not shown, by a check with less than 80 %
#: power to show one
UNDERPOWERED = "not shown biased (underpowered)"

#: the verdicts of a comparison that shows the target off its comparator at its false-alarm level
#: while its interval still reaches inside the margin (the TOST alone says "inconclusive"): worse
#: than its comparator (no-worse), or drifted from it either way (equivalence). Both fail.
WORSE, DRIFTED = "worse", "drifted"


def underpowered_note(power: float, violation: str, needed: int | None, unit: str, *, strict: bool) -> str:
    """The sentence a report adds to an underpowered pass: the power against ``violation``, what
    would reach 80 % (``needed`` ``unit``), and whether ``--llmbias-strict`` made it fail."""
    need = f"{needed} {unit} would give 80%" if needed else f"no number of {unit} gives 80%"
    return f"{UNDERPOWERED}: power {fmt_rate(power)} to catch {violation}; {need}" + (
        "; --llmbias-strict fails an underpowered pass" if strict else "; --llmbias-strict would fail it"
    )


def extension_line(x: Mapping[str, Any]) -> str:
    """The report's line on the samples an underpowered comparison asked (see
    :mod:`pytest_llmbias.engine.extension`; ``x``: its ``extension`` figures)."""
    how = "decisive" if x["decided"] else "still underpowered"
    return (
        f"{how} at {x['samples']} sample(s) per item (asked from {x['first']} up to max_samples "
        f"{x['max_samples']}; each of {x['looks']} possible looks at its false-alarm level and TOST alpha / "
        f"{x['looks']}, Bonferroni)"
    )
