"""What a comparison gate's verdict needs, before any call: the questions x samples that meet the
run's error budget.

A comparison is designed for two rates (:mod:`pytest_llmbias.stats.design`): a good release fails
at most its share ``a`` of ``suite.alpha``, and one worse by the margin δ fails with ``suite.power``.
The units n (questions x samples) are the fewest at which the *expected* power at the margin —
averaged over the sampling distribution of the estimated standard error, ŝe² ~ σ²/n·χ²_df/df on the
questions' df = questions − 1, with t rather than z quantiles — is at least ``suite.power``, the
pass rule's TOST at β − :data:`~pytest_llmbias.stats.design.SIZING_SLACK`
(:func:`~pytest_llmbias.stats.design.units_to_size`),
σ the SD of a unit's difference from its comparator (one question's answer, one sample). The normal
formula n = ((z₁₋β + c)·σ/δ)², c = z₁₋ₐ (z₁₋ₐ/₂ for an equivalence test; Chow, Shao & Wang, *Sample
Size Calculations in Clinical Research*, §3.2), sizes for the expected SE only: at its n about half
the draws come out larger, leave the verdict underpowered and cost power at the margin (about 70 %
instead of 80 %). Counting the SE's uncertainty asks about 40 % more units at a comparison of 20-30
questions (31 instead of 22 at a per-unit SD of √2 judge points, margin 1, level 0.71 %, no-worse).

σ is taken, in this order, from the baselines' stored answers (each baseline in turn as the target:
what ``--llmbias-plan`` already evaluates, see :mod:`pytest_llmbias.engine.expected_power`), else
from the stated prior of :data:`pytest_llmbias.config.margins.PRIOR_SD` (conservative: above what the
example suite and the validity simulations measure). The plan prints it per gate beside the units
the gate will ask; a gate short of them is *underpowered* before it spends a call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.stats.design import DEFAULT_LEVEL

#: the gates whose verdict is a comparison, and the comparisons each makes by default
COMPARISONS: dict[str, tuple[str, ...]] = {
    "bias_equivalent": ("judge",),
    "bias_index": ("index",),
    "bias_stance": ("shift",),
    "bias_preference": ("preference",),
    "bias_evenhanded": ("evenhandedness", "refusal_gap", "opposing"),
}


@dataclass(frozen=True)
class Sizing:
    """One comparison of one gate test: its ``margin``, the per-unit ``sd`` and where it came from
    (``source``), the false-alarm ``level`` and ``power`` it is designed for, the ``units`` it asks
    (questions x samples) and the ``needed`` units; ``sized`` when ``units`` suffice."""

    gate: str
    check: str
    margin: float
    sd: float
    source: str
    level: float
    power: float
    two_sided: bool
    units: int
    needed: int

    @property
    def sized(self) -> bool:
        return self.units >= self.needed

    def to_dict(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "check": self.check,
            "margin": self.margin,
            "sd": self.sd,
            "source": self.source,
            "level": self.level,
            "power": self.power,
            "two_sided": self.two_sided,
            "units": self.units,
            "needed": self.needed,
            "sized": self.sized,
        }


def units_for(sd: float, margin: float, *, level: float, power: float, two_sided: bool, samples: int = 1) -> int:
    """The fewest units n (items × ``samples`` each, at least 2 items) whose expected power at the
    margin reaches ``power`` against one comparator of per-unit SD ``sd``:
    :func:`pytest_llmbias.stats.design.units_to_size` (see the module docstring)."""
    from pytest_llmbias.stats.design import units_to_size

    n = units_to_size(sd, margin, level=level, power=power, two_sided=two_sided, samples=samples)
    assert n is not None  # against one comparator the SE shrinks to nothing: some n always suffices
    return n


def gate_units(gate: Any, spec: Any, session: Any, *, items_only: bool = False) -> int:
    """The units a gate's comparison has: its items (as its looks cut them) times the samples of
    each (the marker's ``samples``, else the run's; ``items_only``: the items alone)."""
    from pytest_llmbias.engine.sequential_gate import gate_units as items

    count = len(items(gate.marker, spec, session.domain(spec.domain)))
    samples = 1 if items_only else getattr(spec, "samples", None) or session.settings.generation.samples
    return count * (samples if gate.marker in ("bias_equivalent", "bias_index") else 1)


def sizing(
    gate: Any,
    spec: Any,
    session: Any,
    measured: Mapping[str, float] | None = None,
    designed: Mapping[str, float] | None = None,
) -> list[Sizing]:
    """Per default comparison of ``gate`` (:data:`COMPARISONS`): the units its verdict needs at
    its designed level (the spec's ``false_alarm``, else the default) and the run's power, from the
    SD ``measured`` on stored answers (of one item at the gate's samples, by comparison) or the
    stated prior (of one unit); ``designed``: the units the stand-ins' own designs needed (by
    comparison), which count the spread between the baselines' means too. Empty for a
    gate that makes no comparison, or one whose margin is drawn from the data (it has no fixed δ)."""
    from pytest_llmbias.choices import Alternative
    from pytest_llmbias.config.margins import PRIOR_SD

    checks = COMPARISONS.get(getattr(gate, "marker", ""), ())
    options = getattr(spec, "comparison", None)
    if not checks or options is None:
        return []
    if gate.marker == "bias_stance" and (str(spec.gate) != "sycophancy" or spec.max_shift is not None):
        return []  # the stance checks other than the comparison of shifts fail on a bound, not a margin
    settings = session.settings
    options = options.designed(gate.marker, settings)
    if options.data_driven:
        return []
    methods = getattr(spec, "methods", None) or ((spec.metric,) if getattr(spec, "metric", None) in checks else checks)
    against = bool(getattr(settings.release, "against", None))
    alternative = options.alternative or (Alternative.NO_WORSE if against else Alternative.EQUIVALENT)
    two_sided = str(getattr(alternative, "value", alternative)) == "equivalent"
    level = options.false_alarm if options.false_alarm is not None else DEFAULT_LEVEL
    units = gate_units(gate, spec, session)
    out = []
    for check in methods:
        margin = options.margin_for(check) or _default(options.default_margin, check)
        if margin is None:
            continue
        measured, designed = measured or {}, designed or {}
        sd, source = next((measured[k] for k in (check, "relative", "") if k in measured), None), "stored answers"
        samples = max(1, units // max(1, gate_units(gate, spec, session, items_only=True)))
        if sd is None:  # a unit is one sample of one item: items at the gate's samples each
            sd, source = PRIOR_SD[gate.marker][check], "prior"
            needed = units_for(sd, margin, level=level, power=options.power, two_sided=two_sided, samples=samples)
        else:  # measured on items at the gate's samples: as many items more, at as many samples each
            needed = samples * units_for(sd, margin, level=level, power=options.power, two_sided=two_sided)
        if source != "prior":
            needed = max(
                needed, math.ceil(next((designed[k] for k in (check, "relative", "") if k in (designed or {})), 0))
            )
        out.append(Sizing(gate.marker, check, margin, sd, source, level, options.power, two_sided, units, needed))
    return out


def _default(value: Any, check: str) -> float | None:
    if value is None or isinstance(value, (int, float)):
        return value
    return value.get(check)
