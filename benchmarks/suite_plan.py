"""The cells of ``suite_validity.py``, and where the plan says a cell's budget suffices for the kinds
whose comparison the plan sizes (judge, embedding, index), decided as ``--llmbias-plan`` decides,
with the summary of the power and false alarm in those cells."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from pytest_llmbias.stats.design import units_to_size


class Cell(NamedTuple):
    against: str
    shape: str
    tau: float
    samples: int
    questions: int

    @property
    def comparators(self) -> list[str]:
        return ["rel"] if self.against == "release" else ["b0", "b1", "b2"]

    @property
    def release(self) -> bool:
        return self.against == "release"


#: items of the draw whose answers stand for the plan's known SD
PLAN_ITEMS = 4000


def plan_sized(
    draw: Callable[..., Any], comparison: Callable[[Any], Any], unit: float, c: Cell, level: float, seed: int
) -> bool:
    """Whether the plan says cell ``c``'s budget (questions × samples) suffices for a comparison, by
    :func:`pytest_llmbias.stats.design.units_to_size`, the function ``--llmbias-plan`` sizes with.
    The plan's per-unit SD is taken as known: measured on ``draw`` (the kind's data, a good release)
    at :data:`PLAN_ITEMS` items and the cell's samples, as a recorded release's stored answers would
    give it. So is the variance between models' offsets, (``unit`` × τ)² in the comparison's score.
    Margin, level and sidedness are the comparison's own (``comparison`` picks it from the result)."""
    d = comparison(draw(np.random.default_rng([seed, 7]), c._replace(questions=PLAN_ITEMS), level, False))
    design = d.design
    sd = d.tost.se * math.sqrt(d.tost.n_target * c.samples)  # of one unit: one sample of one item
    needed = units_to_size(
        sd,
        design.margin,
        level=design.level,
        power=design.power,
        two_sided=design.two_sided,
        samples=c.samples,
        baselines=len(c.comparators),
        between=(unit * c.tau) ** 2,
    )
    return needed is not None and needed <= c.questions * c.samples


def plan_summary(rows: list[dict[str, Any]], kinds: list[str]) -> list[str]:
    """Per kind of ``kinds``: the cells of ``rows`` where the plan says the budget suffices, the
    range of its power at the margin there, and the highest false alarm of its gate and of the suite
    there."""
    runs = rows[0]["runs"]
    se = 100 * math.sqrt(0.8 * 0.2 / runs)
    out = [f"**Where the plan says the budget suffices** (± one SE at {runs} runs: ±{se:.1f} points at 80 %):", ""]
    for k in kinds:
        sized = [r for r in rows if r["plan"][k]]
        if not sized:
            out.append(f"- {k}: no cell")
            continue
        powers = [100 * r["power"][k] for r in sized]
        out.append(
            f"- {k}: {len(sized)} of {len(rows)} cells; power at the margin {min(powers):.0f}-{max(powers):.0f} % "
            f"(mean {sum(powers) / len(powers):.1f}); its false alarm at most "
            f"{100 * max(r['false_alarm'][k] for r in sized):.0f} %, the suite's at most "
            f"{100 * max(r['suite_false_alarm'] for r in sized):.1f} %"
        )
    return out
