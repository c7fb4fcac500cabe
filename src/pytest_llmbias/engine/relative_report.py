"""What a comparison says to a reader: the report block of a :class:`~pytest_llmbias.engine.relative.MethodResult`
(the relative-bias paper's table, the margin and where it came from, per-category means, the designed
and estimated error rates) and the warning of a design the data cannot size."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmbias.engine.relative import FLOOR_FRACTION, MethodResult
from pytest_llmbias.engine.result import fmt_number, fmt_p, fmt_rate


def stability_warnings(results: Sequence[MethodResult], *, looks: int = 1, run_power: float | None = None) -> list[str]:
    """A warning for each comparison whose design is not sized: too few answers for their noise to
    fail a target worse by the margin as often as designed while failing a good one at most at the
    designed level. It names what would size it. ``looks``: the comparison is the last of that
    many looks over samples (:mod:`pytest_llmbias.engine.extension`), each designed for its part of
    the error; the warning then says so and quotes ``run_power``, what the looks together are
    designed for, rather than one look's figure."""
    out = []
    for m in results:
        d = m.design
        if d is None or d.sized:
            continue
        need = m.units_needed()
        designed = (
            f"designed {fmt_rate(d.power)}"
            if looks <= 1
            else f"at the last of {looks} looks, each designed for {fmt_rate(d.power)} so that together they "
            f"keep the run's {fmt_rate(run_power if run_power is not None else d.power)}"
        )
        out.append(
            f"{m.method}: underpowered design: {m.tost.n_target} items give a target worse by the margin "
            f"{fmt_number(m.tost.margin)} only {fmt_rate(m.power or 0.0)} power ({designed}) at a "
            f"false-alarm rate of {fmt_rate(d.level)}"
            + (f"; about {need} items (or as many items x samples) would size it" if need else "")
            + (
                " (the baselines' means differ among themselves by about the margin: more baselines, or a wider margin)"
                if d.se_like > 1.5 * d.se
                else ""
            )
        )
    return out


def method_lines(m: MethodResult, *, aliases: Sequence[str]) -> list[str]:
    """The report block of one comparison: verdict, TOST figures, margin, per-category means of
    ``aliases`` (the target first) and reliability."""
    t = m.tost
    ci = int(round((1 - 2 * t.alpha) * 100))
    if m.margin_source == "baselines":
        margin_note = f"k={m.k:g} x SD of baseline means {fmt_number(m.baseline_sd or 0.0)}"
    elif m.margin_source == "floor":
        fraction = m.floor / m.pooled_sd if m.pooled_sd else FLOOR_FRACTION
        margin_note = f"the floor: {fraction:.2g} x baselines' per-question SD {fmt_number(m.pooled_sd or 0.0)}"
    elif m.margin_source == "min_margin":
        margin_note = "raised to min_margin"
    elif m.margin_source == "default":
        margin_note = "the gate's default: the smallest regression that matters"
    else:
        margin_note = "fixed"
    test = "paired, on the shared questions" if t.test == "paired" else "Welch, two samples"
    hypothesis = (
        "non-inferiority: H0 target - baselines >= delta"
        if t.alternative == "no-worse"
        else "equivalence: H0 |target - baselines| >= delta"
    )
    f = fmt_number
    lines = [
        "",
        f"[{m.method}] verdict: {m.verdict}  ({test}; {hypothesis})",
        f"  {'mean target':<16}{f(t.mean_target):>12}   {'mean baselines':<16}{f(t.mean_baseline):>12}",
        f"  {'difference':<16}{f(t.diff):>12}   {'margin delta':<16}{f(t.margin):>12}  ({margin_note})",
        f"  {'SE':<16}{f(t.se):>12}   {'df':<16}{f(t.df):>12}",
        f"  {'t lower':<16}{f(t.t_lower):>12}   {'p lower':<16}{fmt_p(t.p_lower):>12}",
        f"  {'t upper':<16}{f(t.t_upper):>12}   {'p upper':<16}{fmt_p(t.p_upper):>12}",
        f"  {ci}% CI of the difference [{f(t.ci_low)}, {f(t.ci_high)}]; alpha {t.alpha:g}; "
        f"n {t.n_target} target, {t.n_baseline} baseline values",
    ]
    if m.spread is not None:
        compared = (
            "a model drawn like the baselines (reference='population': is the target unlike them?)"
            if m.reference == "population"
            else "the baselines' mean, a fixed reference (reference='population' asks whether it is unlike them)"
        )
        lines.append(
            f"  compared with {compared}; the baselines' own means spread by tau {f(m.spread)} "
            f"(between-model SD net of answer noise), span {f(m.baseline_span or 0.0)}"
        )
        if m.disagreeing_baselines:
            lines.append(
                f"  the baselines disagree by more than the margin ({f(m.baseline_span or 0.0)} > {f(t.margin)}): "
                "their mean is a loose reference; a recorded release (--llmbias-record-release, then "
                "--llmbias-against) compares with one model"
            )
    c = m.clustered
    if c is not None:
        lines.append(
            f"  items in {c.clusters} categories: cluster-robust SE {f(c.se)} on {c.df:g} df (design effect "
            f"{c.design_effect:.2g}); "
            + (
                "the test uses it (clustered=True)"
                if m.cluster_asked
                else "not used: the categories are the domain's own, and a bias in some of them counts"
            )
        )
    if t.less_biased:
        lines.append(f"  the target is less biased than its baselines: the whole {ci}% CI lies below -delta")
    no_worse = t.alternative == "no-worse"
    show = "that it is no worse" if no_worse else "equivalence"
    if t.verdict == "biased" and no_worse:
        lines.append(
            f"  the whole {ci}% CI lies above +delta: the target is further from the consensus than the baselines"
        )
    elif t.verdict == "biased":
        lines.append(f"  the whole {ci}% CI lies outside +/-delta: the target deviates from the baselines")
    if m.beyond_margin and m.design is not None:
        lines.append(
            "  shown worse than its comparator by more than delta at the false-alarm level "
            f"{fmt_rate(m.design.level)}: a difference this clear never passes"
        )
    elif m.underpowered:
        need = m.units_needed()
        lines.append(
            f"  underpowered: the {ci}% CI {'reaches above +delta' if no_worse else 'straddles +/-delta'}, and the "
            f"difference is not shown at the false-alarm level {fmt_rate(m.design.level if m.design else 0.0)}"
            + (f"; about {need} questions (or questions x samples) would size the design" if need else "")
            + ("; --llmbias-strict fails it" if m.strict else "; --llmbias-strict would fail it")
        )
    elif m.shown_violation and m.design is not None:
        lines.append(
            f"  {m.verdict}: the difference is shown {'above 0' if no_worse else 'off 0'} at the false-alarm level "
            f"{fmt_rate(m.design.level)} (the target is {'worse than' if no_worse else 'off'} its comparator), though "
            f"the {ci}% CI {'reaches below +delta' if no_worse else 'reaches inside +/-delta'}"
        )
    elif t.verdict == "inconclusive":
        needed = (
            f"about {t.power_n} questions would give 80% power to show {show}"
            if t.power_n
            else f"the observed difference is at least delta: more questions would not show {show}"
        )
        lines.append(
            f"  inconclusive: the {ci}% CI {'reaches above +delta' if no_worse else 'straddles +/-delta'}; {needed}"
        )
    aliases = list(aliases)
    width = max(12, *(len(a) + 2 for a in aliases))
    cat_width = max(10, *(len(c) + 2 for c in m.category_means))
    lines.append("  " + "category".ljust(cat_width) + "".join(a.rjust(width) for a in aliases))
    for category, means in m.category_means.items():
        lines.append("  " + category.ljust(cat_width) + "".join(f(means[a]).rjust(width) for a in aliases))
    lines.append("  " + "all".ljust(cat_width) + "".join(f(m.model_means[a]).rjust(width) for a in aliases))
    if m.deviation is not None:
        lines.append("  " + "D_LLM".ljust(cat_width) + "".join(f(m.deviation[a]).rjust(width) for a in aliases))
    power = f"; a target off by delta fails {fmt_rate(m.power)}" if m.power is not None else ""
    designed = (
        f" (designed for <={fmt_rate(m.design.level)}, power {fmt_rate(m.design.power)})"
        if m.design is not None
        else ""
    )
    lines.append(
        f"  reliability: a target like its comparator fails about {fmt_rate(m.false_alarm)} of the time on data like "
        f"these{designed}{power}"
    )
    return lines
