"""Gates decided against a pinned anchor release as well as the last one (``--llmbias-anchor``).

Comparing each release only with the one before it lets a chain of small regressions through: a
release half a margin worse than the last passes, and so does the next, until the chain has
drifted by several margins from what was once shipped. With ``release.anchor`` set, every gate
that compares with a recorded release (the run's ``--llmbias-against``, or its marker's
``against=``) is decided twice: against that release (the *last*) and against the anchor, on the
same answers of the target. It fails when it fails against either.

The two comparisons share the gate's part of ``suite.alpha``: a gate given level ``a`` (by Holm's
step-down or Bonferroni, see :mod:`~pytest_llmbias.engine.suite_levels`) decides each comparison at
``a / 2`` (Bonferroni within the gate), so a release as good as both comparators fails the pair at
most ``a`` of the time, and the run at most ``suite.alpha``. Holm's rounds see one hypothesis per
gate, "no worse than either", whose check at level ``a`` shows a violation when either comparison
shows one at ``a / 2`` (monotone in ``a``, as the step-down needs). A gate that keeps its own
false-alarm rate (``suite.alpha`` off, or a marker's own ``false_alarm=``) runs each comparison at
that rate, so the pair at up to twice it; the report says so.

When the anchor is the last release (the same folder), the gate is decided once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmbias.errors import LLMBiasError
from pytest_llmbias.report.frames import Table

#: the comparisons an anchored gate decides, and so the parts its false-alarm share is split into
COMPARISONS = 2


def split_level(alpha: float, comparisons: int = COMPARISONS) -> float:
    """Each comparison's level when ``comparisons`` share a gate's false-alarm level ``alpha``
    (Bonferroni: the union of their false alarms stays under ``alpha`` whatever their dependence)."""
    return alpha / comparisons


def same_release(a: Any, b: Any) -> bool:
    """Whether two views compare with the same recorded release (their comparators' record files)."""
    first, second = a.settings.comparators[:1], b.settings.comparators[:1]
    if not first or not second or not first[0].recorded or not second[0].recorded:
        return False
    return Path(str(first[0].recorded)).resolve() == Path(str(second[0].recorded)).resolve()


def anchored(gate: Any, session: Any, view: Any) -> Any:
    """``gate`` decided against the run's anchor release as well (an :class:`AnchoredGate`), when
    ``view`` (the session as the marker sees it) compares with a recorded release, the run names
    an anchor and it is another release; else ``gate`` itself. ``session``: the BiasSession, whose
    ``against`` gives the anchor's view (ConfigError when the anchor cannot be read)."""
    anchor = view.settings.release.anchor
    if gate is None or not anchor or not view.settings.release.against:
        return gate
    if not getattr(gate, "compares_releases", False):
        return gate  # plan_marker says that this gate compares with no release
    anchor_view = session.against(anchor)
    if same_release(view, anchor_view):
        return gate
    return AnchoredGate(gate, view, anchor_view)


class AnchoredGate:
    """A gate decided against the last release (``last``: the session as the marker sees it) and
    the anchor (``anchor``: the session compared with the anchor release); every other attribute
    is the wrapped gate's. Planned or evaluated on any other view (the plan's stand-ins), it is
    the wrapped gate."""

    #: it wraps a gate that takes its own looks: :func:`pytest_llmbias.gates.looking` leaves it as it is
    wraps_looks = True

    def __init__(self, gate: Any, last: Any, anchor: Any) -> None:
        self.gate, self.last, self.anchor = gate, last, anchor
        self._levels: dict[Any, float] = {}  # a spec set by at_level -> each comparison's level

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gate, name)

    def at_level(self, spec: Any, alpha: float) -> Any | None:
        """The wrapped gate's spec at ``alpha`` / 2: each comparison's share of the gate's level."""
        at_level = getattr(self.gate, "at_level", None)
        leveled = at_level(spec, split_level(alpha)) if at_level is not None else None
        if leveled is not None:
            try:
                self._levels[leveled] = split_level(alpha)
            except TypeError:  # a project's gate with an unhashable spec: its report names no level
                pass
        return leveled

    def plan(self, spec: Any, session: Any) -> None:
        self.gate.plan(spec, session)
        if session is self.last:
            self.gate.plan(spec, self.anchor)

    def evaluate(self, spec: Any, session: Any) -> Any:
        """Both comparisons' :class:`AnchoredResult`; the error that stopped either is raised (the
        anchor's naming the anchor)."""
        if session is not self.last:
            return self.gate.evaluate(spec, session)
        last = self.gate.evaluate(spec, self.last)
        try:
            anchor = self.gate.evaluate(spec, self.anchor)
        except (LLMBiasError, ValueError) as exc:
            raise _against_anchor(
                self.anchor.inconclusive(exc, spec.domain), self.anchor.settings.release.against
            ) from None
        return AnchoredResult(
            last=last,
            anchor=anchor,
            last_release=str(self.last.settings.release.against),
            anchor_release=str(self.anchor.settings.release.against),
            level=self._level(spec),
        )

    def _level(self, spec: Any) -> float | None:
        """Each comparison's false-alarm level, when :meth:`at_level` set ``spec`` (None: the gate's own rate)."""
        try:
            return self._levels.get(spec)
        except TypeError:
            return None


def _against_anchor(exc: Exception, name: str | None) -> Exception:
    """``exc``, the error that stopped the anchor's comparison, as one that names the anchor."""
    message = f"against the anchor release {name!r}: {exc}"
    try:
        return type(exc)(message)
    except TypeError:  # an error whose constructor takes more than a message
        return LLMBiasError(message)


@dataclass(frozen=True)
class AnchoredResult:
    """One gate decided against the last release and against the anchor: it passes when both
    comparisons pass. ``last`` and ``anchor`` are the wrapped gate's results (the same answers of
    the target, each comparator read from its record); ``level``, each comparison's false-alarm
    level (None: the gate's own rate). Any other attribute is the last comparison's, so a test's
    own assertions on ``bias_result`` read as without an anchor."""

    last: Any
    anchor: Any
    last_release: str
    anchor_release: str
    level: float | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.last, name)

    @property
    def domain(self) -> str:
        return str(self.last.domain)

    @property
    def warnings(self) -> tuple[str, ...]:
        extra = tuple(f"against the anchor {self.anchor_release}: {w}" for w in self.anchor.warnings)
        return (*self.last.warnings, *(w for w in extra if w not in self.last.warnings))

    @property
    def passed(self) -> bool:
        return bool(self.last.passed and self.anchor.passed)

    @property
    def failed_against(self) -> tuple[str, ...]:
        """The comparators the gate failed against: ``"last"``, ``"anchor"``, both or neither."""
        return tuple(n for n, r in (("last", self.last), ("anchor", self.anchor)) if not r.passed)

    @property
    def verdict(self) -> str:
        """The last comparison's verdict, unless only the anchor's failed: then the anchor's."""
        return str(self.anchor.verdict if self.failed_against == ("anchor",) else self.last.verdict)

    @property
    def shown_violation(self) -> bool | None:
        """Whether either comparison showed a violation at its level (the rejection Holm counts)."""
        shown = [getattr(r, "shown_violation", None) for r in (self.last, self.anchor)]
        return None if all(s is None for s in shown) else any(s is True for s in shown)

    @property
    def why(self) -> str:
        failed = self.failed_against
        if not failed:
            return (
                f"passes against the last release {self.last_release} and the anchor {self.anchor_release}: "
                f"{self.last.why}; {self.anchor.why}"
            )
        which = {"last": f"the last release {self.last_release}", "anchor": f"the anchor {self.anchor_release}"}
        return "; ".join(f"fails against {which[n]}: {(self.last if n == 'last' else self.anchor).why}" for n in failed)

    def headline(self) -> str:
        """The report's first line: the gate, both comparators, which it failed against (with that
        comparison's verdict), and each comparison's level."""
        if self.level is not None:
            level = (
                f"each comparison at false alarm <={self.level:.3g} (the gate's share "
                f"{COMPARISONS * self.level:.3g} split in two: Bonferroni)"
            )
        else:
            level = "each comparison at the gate's own false-alarm rate (the pair at up to twice it)"
        results = {"last": self.last, "anchor": self.anchor}
        outcome = (
            "passes against both"
            if not self.failed_against
            else "FAILS against " + " and ".join(f"the {n} ({results[n].verdict})" for n in self.failed_against)
        )
        gate = f"{getattr(self.last, 'marker', 'gate')} on {self.domain!r}"
        return (
            f"{gate} against the last release {self.last_release} and the anchor {self.anchor_release}: "
            f"{outcome}; {level}"
        )

    def report(self) -> str:
        """Both comparisons' reports, each under a line naming its comparator and its verdict."""
        return "\n".join(
            [
                self.headline(),
                f"-- against the last release {self.last_release}: {str(self.last.verdict).upper()} --",
                self.last.report(),
                f"-- against the anchor {self.anchor_release}: {str(self.anchor.verdict).upper()} --",
                self.anchor.report(),
            ]
        )

    def summary_row(self, nodeid: str) -> dict[str, Any]:
        """The last comparison's rows, then the anchor's, each method naming its comparator."""
        rows = [
            {**r, "method": f"{r['method']} vs {release}"}
            for result, release in ((self.last, self.last_release), (self.anchor, self.anchor_release))
            for r in result.summary_row(nodeid)["methods"]
        ]
        return {"test": nodeid, "domain": self.domain, "methods": rows}

    def reliability(self) -> dict[str, Any]:
        """The last comparison's, with the anchor's under ``anchor``."""
        return {**self.last.reliability(), "anchor": self.anchor.reliability()}

    def to_dict(self) -> dict[str, Any]:
        """The last comparison's entries (so readers of a gate's JSON find its figures where they
        were), with the pair's ``verdict``, ``passed`` and ``why``, and the anchor's comparison
        under ``anchor`` (its release and its result's ``to_dict()``)."""
        return {
            **self.last.to_dict(),
            "verdict": self.verdict,
            "passed": self.passed,
            "why": self.why,
            "warnings": list(self.warnings),
            "comparators": {
                "last": self.last_release,
                "anchor": self.anchor_release,
                "failed_against": list(self.failed_against),
                "level_each": self.level,
            },
            "anchor": {"release": self.anchor_release, **self.anchor.to_dict()},
        }

    def table(self) -> Table:
        """Both comparisons' rows, each with the release it was compared with (``comparator``)."""
        first, second = self.last.table(), self.anchor.table()
        columns = ("comparator", *first.columns, *(c for c in second.columns if c not in first.columns))
        records = [
            {"comparator": release, **r}
            for table, release in ((first, self.last_release), (second, self.anchor_release))
            for r in table.records()
        ]
        return Table.of(records, columns)

    def to_frame(self) -> Any:
        return self.table().to_frame()


def anchored_result(
    last: Any, anchor: Any, *, last_release: str, anchor_release: str, level: float | None = None
) -> AnchoredResult:
    """The verdict of one gate decided against the last release and the anchor, from the two
    comparisons' results (as :func:`~pytest_llmbias.evaluate_equivalence` and the other
    ``evaluate_*`` functions give them, each at :func:`split_level` of the gate's level). H0: the
    target is no worse than either comparator by its margin; the gate fails when either
    comparison fails (a union of the two tests, each at half the level: Bonferroni)."""
    return AnchoredResult(last, anchor, last_release, anchor_release, level)


__all__ = ["COMPARISONS", "AnchoredGate", "AnchoredResult", "anchored", "anchored_result", "split_level"]
