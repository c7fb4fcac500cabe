"""How often a suite of one gate of every kind fails a good release, and how often each gate catches
a release worse by its margin, on data shaped unlike the simulations that chose the defaults.

**The suite.** One gate of each kind (``--kinds``; ``--gates N`` takes N of each, each on its own
domain): ``bias_equivalent`` judge and embedding, ``bias_index``, ``bias_impact_ratio``,
``bias_stance`` (agreement), ``bias_preference`` and ``bias_benchmark`` on BBQ (``--kinds all`` adds
``bias_benchmark`` on discrim-eval: slow, 45 prompts a scenario). Each is decided by the public
function its marker calls (``evaluate_equivalence``, ``evaluate_bias_index``,
``evaluate_impact_ratio``, ``evaluate_stance``, ``evaluate_preference``, ``evaluate_benchmark``)
with its defaults (default margins of ``pytest_llmbias.config.margins``, ``suite.power`` 0.8) except its
false-alarm share. ``suite.alpha`` (0.05) is shared equally, **Bonferroni**: each of the m gates
gets alpha / m, written as the gate's ``at_level`` writes it (``false_alarm=`` for the comparisons;
``alpha=`` for the impact ratio's permutation test; ``confidence=1 - share`` for agreement). A run
shares by Holm's step-down, whose first round is this Bonferroni split; a good suite fails in
that round or not at all, and one worse gate among good ones meets the same level unless a good
one fails too, so the figures below are Holm's as well.

Every comparison holds its share: ``bias_benchmark`` (BBQ) fails only a target shown off its
comparator at its share and is otherwise *underpowered* (a pass), and discrim-eval splits the share
among its groups. Two rules are not designed and are left out: the impact ratio's
``fail_on="estimate"`` (the four-fifths rule on the point estimate, no test: it has no false-alarm
rate to share); stance's ``consistency`` check takes its share (the alpha of its Holm over the
questions) but needs answers in two languages, which these shapes do not model.
``bias_preference``'s split tests are widened by the topics' design effect (a topic that pulls its
picks one way makes them alike).

**The data shapes** are the judge scale's, in judge points: question-dominated (question SD 1.5,
answer noise 1.0), noise-dominated (no question effect; noise 1.0, ``--shapes all`` adds 0.5 and
1.5), and question-dominated with a question × model interaction (each model's own offset per
question, SD 0.4) or with category shifts (questions in 5 categories, each model its own shift per
category, SD 0.3). A domain's categories are its fixed strata, so in ``category shifts 0.3`` a
good release is as good as its reference on them (its shifts centred on the reference's over the
domain: worse in one category, better in another); in ``category shifts 0.3, sampled`` the
categories are a sample of a wider pool (its shifts as drawn: as good on the pool, not on these),
and the equivalence and index gates run with ``clustered=True`` (the cluster-robust standard error
over the 5 categories, on 4 degrees of freedom). ``judge read 0.6`` is the question-dominated shape
with the score read from the judge's log-probabilities: of the answer noise 1.0, the rating's own
draw (SD 0.8) is gone and the answer's (0.6) is left. τ,
the SD of a baseline's offset m_j: 0, 0.1, 0.2, 0.3, 0.5, 1.0 against three baselines (0 against a
release). A *good* target sits at the baselines' mean offset, the reference the default
(``reference="mean"``) compares with (stance and preference, whose gates also decide an absolute
check, at no offset: the release that check calls good, ``_effects(own_offset=False)``); each cell
also runs ``reference="population"``. Its interaction and category terms are its own. Each kind maps
one judge point to its own units as ``validity.py`` does; a *worse* target adds the kind's margin:

- **judge**: 5 + q_i + m_j + e, per sample. Worse: +1 (the margin).
- **embedding**: 0.30 + q_i + m_j + e with a judge point 0.04 of question effect and of τ (EMBEDDING's
  question SD / 1.5) and 0.05 of noise (its noise SD), so the question-dominated shape is EMBEDDING.
  Worse: +0.02 (the margin, 0.4-0.5 of such a judge point).
- **index**: annotation |0.10 + p_i + m_j + e| (= sentiment extremity, as ``validity.py``), a judge
  point 0.067 of prompt effect and τ, 0.08 of noise (question-dominated = INDEX); questions / 10
  dimensions of 10 prompts. Worse: +0.04 on every annotation, +0.1 (the margin) on each prompt's index.
  Against baselines a good target's offset is raised to where its expected index is their mean index.
- **impact**: questions = templates, each asked about 4 groups (concepts); feature value t_i + e,
  template effect t_i (question SD) shared by the groups and the release, noise e, in judge points.
  margins.py has no impact margin (the rule is the four-fifths threshold; 0.05 of the ratio against
  a release): worse is one judge point, the last group 1 lower. Baselines are left out: the default
  (uncalibrated) rule only reports them, and they change no verdict, so τ does not apply.
- **stance** (agreement, 10 rounds): a round answers yes with probability Φ((λ_i + m_j) / noise); the
  lean λ_i ~ N(0, 1.5²) when question-dominated, else every question leans 1.5 the same way (with no
  lean at all every question is a coin: a target like its baselines agrees on 37 % of the questions
  they agree on, and the absolute rule fails it in 81 % of runs at 100 questions). Worse: the target
  turns its lean round on 40 % of the questions (35 % against a release): where the leans are clear
  its agreement falls to min_agreement − 0.2, the alternative the gate's power is computed for.
- **preference** (two ways, 5 articles a topic; questions = topics): a trial picks the first side
  with probability Φ((q_t + m_j) / noise), q_t a topic effect shared by every model (question SD);
  noise-dominated shapes are choosers without preference whatever the noise. A judge point of τ is
  the tolerance's lean (an offset of one gives a split of 0.65 without topic effects), as a judge point is
  the judge's margin: the absolute check asks whether the target's own split is even, so τ in
  judge points would have most targets lean past the tolerance. Worse: the target's
  latent moved so that, without topic effects, its per-topic distance from an even split (the
  comparison's score) is larger by the margin 0.1 (it picks the first side 0.76 of the time).
- **bbq**: questions = ambiguous items (``benchmark_validity.py``): each item's (unknown, biased,
  other) probabilities Dirichlet(2 · (0.7, 0.2, 0.1)) when question-dominated, else (0.7, 0.2, 0.1)
  for every item; τ moves N(0, (0.1 τ)²) of each item's mass per model. Worse: +0.10 (the margin).
- **discrim**: questions = scenarios × 45 people; logit of yes = scenario effect (SD 1 when
  question-dominated, else 0) + 0.5 + a person effect (SD 0.3) + per model N(0, τ²) per attribute
  value. Worse: 1 logit (the margin) against Black applicants.

The interaction and category terms scale as τ does in each kind (``suite_plan._effects``); impact and
discrim-eval have none.

The categorical kinds carry their noise in their draws: without a question effect preference, BBQ
and discrim-eval make no use of the noise SD, so their three noise-dominated rows differ only by chance.

**Samples**: 1 or 3 samples of every item, one look; or the default sampling budget, ``1-5``: a
comparison of ``bias_equivalent`` or ``bias_index`` left undecided asks one more sample of every
item and decides again, up to ``collection.max_samples`` 5, each of its 5 looks at a fifth of its
share (``engine.extension``; the other kinds take no looks and answer once).

**Per cell**: the suite's false alarm (a good release fails ANY gate) and each kind's; each kind's
power: its gate's data worse by its margin, **each kind shifted in its own draw** (one gate at a
time; its fail rate alone); the share of good gates whose design was sized (the comparison's
``design.sized``; agreement and the impact ratio, which have no design: their reported power ≥ 80 %);
where **the plan says the budget suffices** (†; judge, embedding, index, sized by ``suite_plan.py``
as ``--llmbias-plan`` sizes, the data's per-unit SD and τ taken as known), with a summary of power
and false alarm there; the calls per model: units × samples (stance: × 10 rounds; impact: × 4
groups; preference: × 5 articles × (2 written + 1 pick); discrim: × 45 people; judge ratings not
counted). A gate that raises (StatisticsError: too few agreed questions, no variance) counts as
failed. The last table lists the cells above 5 % suite false alarm or below 80 % power where the
plan says sized. Seeded per cell: the same command prints the same tables whatever ``--jobs``. The
default (20 runs a cell, 234 cells at 50 questions) takes about 25 minutes on two shared cores; the
documentation's 60 runs about an hour (``--taus``, ``--shapes``, ``--references``, ``--samples`` narrow it).

    python benchmarks/suite_validity.py --runs 60 --jobs 2  # docs/statistics.md's every-kind tables
    python benchmarks/suite_validity.py --kinds judge --gates 4 --questions 20 50 100   # the former judge-only suite
"""

from __future__ import annotations

import argparse
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite_draws import ARTICLES, DEFAULT_KINDS, GATES, GROUPS, KINDS, OWN_RATE, PEOPLE, PLANNED, ROUNDS, SHAPES  # noqa: E402
from suite_plan import DEFAULT_SHAPES, REFERENCES, TAUS, Cell, grid, plan_sized  # noqa: E402
from suite_tables import _ref, tables  # noqa: E402

from pytest_llmbias.errors import StatisticsError  # noqa: E402


def calls(kind: str, c: Cell) -> int:
    """Answers a model gives for one gate of ``kind`` (judge ratings not counted)."""
    per = {"impact": GROUPS * c.samples, "stance": ROUNDS, "preference": ARTICLES * 3, "discrim": PEOPLE * c.samples}
    return c.questions * per.get(kind, c.most if kind in PLANNED else c.samples)


def _evaluate(
    kind: str, rng: np.random.Generator, c: Cell, level: float, worse: bool
) -> tuple[bool, bool | None, bool]:
    """(failed, sized, raised): a gate that raises (a StatisticsError: its comparators cannot decide,
    e.g. baselines that agree on no question) has neither failed nor passed; it stops the release
    with that message, counted on its own."""
    try:
        passed, sized = GATES[kind](rng, c, level, worse)
    except StatisticsError:
        return False, None, True
    return not passed, sized, False


def run_cell(job: tuple[int, Cell, tuple[str, ...], int, int, float, int]) -> dict[str, Any]:
    index, c, kinds, gates, runs, alpha, seed = job
    rng = np.random.default_rng([seed, index])
    suite = [k for k in kinds for _ in range(gates)]
    level = alpha / len(suite)
    t0 = time.perf_counter()
    fa = {k: 0 for k in kinds}
    power = {k: 0 for k in kinds}
    sized = {k: [0, 0] for k in kinds}
    raised = {k: 0 for k in kinds}
    suite_fails = others_fail = stopped = 0
    plan = {k: k in PLANNED and plan_sized(*PLANNED[k], c, level, seed) for k in kinds}
    for _ in range(runs):
        failed_any = failed_others = raised_any = False
        for kind in suite:
            failed, ok, err = _evaluate(kind, rng, c, level, worse=False)
            failed_any |= failed
            raised_any |= err
            failed_others |= failed and kind not in OWN_RATE
            fa[kind] += failed
            raised[kind] += err
            if ok is not None:
                sized[kind][0] += ok
                sized[kind][1] += 1
        suite_fails += failed_any
        others_fail += failed_others
        stopped += raised_any and not failed_any
        for kind in kinds:
            failed, _, err = _evaluate(kind, rng, c, level, worse=True)
            power[kind] += failed
            raised[kind] += err
    return {
        "cell": c,
        "runs": runs,
        "gates": gates,
        "level": level,
        "suite_false_alarm": suite_fails / runs,
        "others_false_alarm": others_fail / runs,
        "stopped": stopped / runs,
        "false_alarm": {k: v / (runs * gates) for k, v in fa.items()},
        "power": {k: v / runs for k, v in power.items()},
        "sized": {k: (s / n if n else None) for k, (s, n) in sized.items()},
        "sized_all": sum(s for s, _ in sized.values()) / max(1, sum(n for _, n in sized.values())),
        "plan": plan,
        "calls": gates * sum(calls(k, c) for k in kinds),
        "raised": raised,
        "seconds": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--kinds", default=",".join(DEFAULT_KINDS), help=f"comma-separated, of {', '.join(KINDS)}; 'all' for every one"
    )
    parser.add_argument("--gates", type=int, default=1, help="gates of each kind in the suite")
    parser.add_argument("--questions", type=int, nargs="+", default=[50])
    parser.add_argument(
        "--shapes", nargs="+", default=list(DEFAULT_SHAPES), help=f"of {', '.join(SHAPES)}; 'all' for every one"
    )
    parser.add_argument("--taus", type=float, nargs="+", default=list(TAUS), help="between-baseline SDs, judge points")
    parser.add_argument("--references", nargs="+", default=list(REFERENCES), choices=REFERENCES)
    parser.add_argument(
        "--samples", nargs="+", default=["1", "3", "1-5"], help="k samples, or k-K: from k up to K while undecided"
    )
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    kinds = KINDS if args.kinds == "all" else tuple(k.strip() for k in args.kinds.split(","))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    shapes = tuple(SHAPES) if args.shapes == ["all"] else tuple(args.shapes)
    if any(sh not in SHAPES for sh in shapes):
        parser.error(f"unknown shape(s); known: {', '.join(SHAPES)}")
    m = len(kinds) * args.gates
    print(
        f"suite of {m} gate(s) ({args.gates} × {', '.join(kinds)}), suite.alpha {args.alpha:g} shared by Bonferroni "
        f"({args.alpha / m:.4g} each), suite.power 0.8, default margins, {args.runs} runs a cell, seed {args.seed}",
        flush=True,
    )
    t0 = time.perf_counter()
    jobs = [
        (i, c, kinds, args.gates, args.runs, args.alpha, args.seed)
        for i, c in enumerate(
            grid(args.questions, shapes, tuple(args.taus), tuple(args.references), tuple(args.samples))
        )
    ]
    rows = []
    with Pool(args.jobs) as pool:
        for r in pool.imap(run_cell, jobs):
            rows.append(r)
            c = r["cell"]
            print(
                f"  {c.against:<9} {_ref(c):<10} {c.shape:<20} tau={c.tau:g} samples={c.budget} n={c.questions:<4} "
                f"suite false alarm {r['suite_false_alarm']:6.1%}  {r['seconds']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    print(tables(rows, kinds, own_rate=OWN_RATE, planned=tuple(PLANNED)))
    print(f"\n{len(rows)} cells in {time.perf_counter() - t0:.0f} s ({args.jobs} job(s))")


if __name__ == "__main__":
    main()
