"""The cells of ``suite_validity.py``, and where the plan says a cell's budget suffices for the kinds
whose comparison the plan sizes (judge, embedding, index), decided as ``--llmbias-plan`` decides,
with the summary of the power and false alarm in those cells."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from pytest_llmbias.stats.design import units_to_size

DEFAULT_SHAPES = (
    "question-dominated",
    "noise 1.0",
    "question × model 0.4",
    "category shifts 0.3",
    "category shifts 0.3, sampled",
    "judge read 0.6",
)
#: the SDs of the three baselines' offsets, judge points
TAUS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)
REFERENCES = ("mean", "population")
#: shape -> (question × model interaction SD, category shift SD), judge points; other shapes: none
TERMS = {
    "question × model 0.4": (0.4, 0.0),
    "category shifts 0.3": (0.0, 0.3),
    "category shifts 0.3, sampled": (0.0, 0.3),
}
#: shapes whose categories are a sample of a wider pool of topics: no release is as good as its
#: comparator on these categories by design, and the gates run with ``clustered=True``
SAMPLED = ("category shifts 0.3, sampled",)
CATEGORIES = 5


def clustering(c: Cell, ids: list[str]) -> dict[str, Any]:
    """The keyword arguments that make a comparison's standard error robust to the categories'
    clustering (``clustered=True`` and, for ``evaluate_equivalence``, the items' categories as
    :func:`_effects` draws them) in the shapes of :data:`SAMPLED`; none elsewhere."""
    if c.shape not in SAMPLED:
        return {}
    n = len(ids)
    return {"clustered": True, "categories": {q: f"c{i * CATEGORIES // n}" for i, q in enumerate(ids)}}


class Cell(NamedTuple):
    against: str
    shape: str
    tau: float
    samples: int
    questions: int
    #: against baselines: ``mean`` (the default, a fixed reference) or ``population``
    reference: str = "mean"
    #: the default sampling budget: an undecided comparison asks one more sample of every item, look
    #: after look, from ``samples`` up to this many (0: one look at ``samples``)
    max_samples: int = 0

    @property
    def budget(self) -> str:
        return f"{self.samples}-{self.max_samples}" if self.max_samples else str(self.samples)

    @property
    def most(self) -> int:
        """The most samples of an item the cell may ask."""
        return max(self.samples, self.max_samples)

    @property
    def comparators(self) -> list[str]:
        return ["rel"] if self.against == "release" else ["b0", "b1", "b2"]

    @property
    def release(self) -> bool:
        return self.against == "release"


def grid(
    questions: list[int],
    shapes: tuple[str, ...] = DEFAULT_SHAPES,
    taus: tuple[float, ...] = TAUS,
    references: tuple[str, ...] = REFERENCES,
    samples: tuple[str, ...] = ("1", "3", "1-5"),
) -> list[Cell]:
    """Against a release: every shape, samples and questions (τ 0, one comparator); against three
    baselines: each also at every τ and reference. ``samples``: "k" (k samples, one look) or
    "k-K" (from k up to K while undecided, the default budget being "1-5")."""
    cells = []
    for against, shape, tau, reference, k, n in itertools.product(
        ("release", "baselines"), shapes, taus, references, samples, questions
    ):
        first, _, top = str(k).partition("-")
        if not (against == "release" and (tau or reference != REFERENCES[0])):
            cells.append(Cell(against, shape, tau, int(first), n, reference, int(top) if top else 0))
    return cells


def _reference(c: Cell) -> dict[str, str]:
    """The ``reference=`` argument of a cell against several baselines (none against a release)."""
    return {} if c.release else {"reference": c.reference}


def _effects(
    rng: np.random.Generator,
    c: Cell,
    n: int,
    unit: float = 1.0,
    offsets_out: dict[str, float] | None = None,
    own_offset: bool = True,
) -> dict[str, np.ndarray]:
    """Each model's own effect on each of ``n`` questions, in ``unit`` per judge point: its offset
    m_j ~ N(0, τ²) (the target's: the comparators' mean offset, the reference the default compares
    with), plus, in the shapes of :data:`TERMS`, a question × model interaction of its own and its
    own shift in each of :data:`CATEGORIES` categories (question i in category ⌊5i/n⌋). The offsets
    alone are written into ``offsets_out`` when given.

    A domain's categories are its fixed strata (``engine/relative.py``): a good release is as good
    as its reference on *these* categories, so the target's shifts are centred on the comparators'
    mean shift over the domain (on zero where ``own_offset`` is False); more biased in one category,
    less in another. In the shapes of :data:`SAMPLED` the categories are a sample of a wider pool
    and the shifts are left as drawn: as good on the pool, not on these.

    ``own_offset=False`` is for a gate that also decides an absolute check (stance agreement with
    the baselines' consensus, preference's even split): against baselines the good target then has
    no offset (0, the population's centre), the release such a check calls good; at the baselines'
    mean offset it would lean as far as their mean does, past what the check allows once τ is large.
    Compared with their mean it is then at or under the reference (its distance from an even split,
    its disagreement, are smallest without a lean)."""
    inter, cat = TERMS.get(c.shape, (0.0, 0.0))
    category = np.arange(n) * CATEGORIES // n
    offsets = {a: float(rng.normal(0.0, c.tau * unit)) if c.tau else 0.0 for a in c.comparators}
    offsets["tgt"] = float(np.mean(list(offsets.values()))) if own_offset or c.release else 0.0
    if offsets_out is not None:
        offsets_out.update(offsets)
    shifts = {
        a: rng.normal(0.0, cat * unit, CATEGORIES)[category] if cat else np.zeros(n) for a in ("tgt", *c.comparators)
    }
    if cat and c.shape not in SAMPLED:
        goal = float(np.mean([shifts[a].mean() for a in c.comparators])) if own_offset or c.release else 0.0
        shifts["tgt"] = shifts["tgt"] - shifts["tgt"].mean() + goal
    out = {}
    for a in ("tgt", *c.comparators):
        own = np.full(n, offsets[a]) + shifts[a]
        if inter:
            own += rng.normal(0.0, inter * unit, n)
        out[a] = own
    return out


#: items of the draw whose answers stand for the plan's known SD
PLAN_ITEMS = 4000


def plan_sized(
    draw: Callable[..., Any], comparison: Callable[[Any], Any], unit: float, c: Cell, level: float, seed: int
) -> bool:
    """Whether the plan says cell ``c``'s budget (questions × samples) suffices for a comparison, by
    :func:`pytest_llmbias.stats.design.units_to_size`, the function ``--llmbias-plan`` sizes with.
    The plan's per-unit SD is taken as known: measured on ``draw`` (the kind's data, a good release)
    at :data:`PLAN_ITEMS` items and the cell's samples, as a recorded release's stored answers would
    give it. Against the baselines' mean (the default reference) the plan sizes the paired
    difference alone, as ``--llmbias-plan`` does; with ``reference="population"`` it adds the
    variance between models' offsets, (``unit`` × τ)² in the comparison's score, over m baselines.
    Margin, level and sidedness are the comparison's own (``comparison`` picks it from the result).
    In the shapes of :data:`SAMPLED` (``clustered=True``) the units are the categories. With a
    sampling budget (``max_samples``) the plan sizes at the most samples the looks may take, each
    look at its share of the level (Bonferroni over the looks, as the extension shares it)."""
    # SAMPLED: the within-category noise alone, measured without the category terms
    measured = c._replace(questions=PLAN_ITEMS, shape="question-dominated" if c.shape in SAMPLED else c.shape)
    looks = c.most - c.samples + 1
    measured = measured._replace(samples=c.most, max_samples=0)
    d = comparison(draw(np.random.default_rng([seed, 7]), measured, level / looks, False))
    design = d.design
    population = c.reference == "population" and not c.release
    sd = d.tost.se * math.sqrt(d.tost.n_target * c.most)  # of one unit: one sample of one item
    needed = units_to_size(
        sd,
        design.margin,
        level=design.level,
        power=design.power,
        two_sided=design.two_sided,
        samples=c.most,
        baselines=len(c.comparators) if population else 1,
        between=(unit * c.tau) ** 2 if population else 0.0,
    )
    if c.shape in SAMPLED:
        # clustered=True: the unit is a category (its mean difference: the within-category noise over
        # its items plus the categories' shifts, the target's and its comparators' mean's), on G − 1
        # degrees of freedom; the plan asks how many categories would size it
        cat = TERMS[c.shape][1] * unit
        per_category = c.questions // CATEGORIES * c.most
        sd_category = math.sqrt(sd**2 / per_category + cat**2 * (1 + 1 / len(c.comparators)))
        needed = units_to_size(
            sd_category, design.margin, level=design.level, power=design.power, two_sided=design.two_sided
        )
        return needed is not None and needed <= CATEGORIES
    return needed is not None and needed <= c.questions * c.most


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
