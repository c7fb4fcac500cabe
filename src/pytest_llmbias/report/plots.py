"""The HTML report's plots: matplotlib figures rendered to inline SVG.

Each helper draws one kind of plot a gate's section uses (bars per category, score distributions,
an interval against the equivalence margin, rates with intervals, a heatmap) and returns a
:class:`Figure` whose ``svg`` can be placed in a page as it is: no XML prologue, text kept as text
(so a reader can search and copy it), ids stable from run to run. Labels are drawn literally:
matplotlib's math mode is off, so a ``$`` in a question id is a dollar sign, and the SVG writer
escapes ``<`` and ``&``. matplotlib is imported here only, when a report is drawn (extra ``html``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.report import readable

#: colours of the target and of the baselines, in order
TARGET_COLOUR = "#c0392b"
#: point sizes of legends and of dense tick labels: at 100 % zoom, at least 10 CSS pixels
LEGEND_PT = 8.5
SMALL_PT = 7.5
BASELINE_COLOURS = ("#2e86c1", "#28b463", "#7d3c98", "#b9770e", "#566573", "#17a589", "#a93226", "#2874a6")


@dataclass(frozen=True)
class Figure:
    """One plot of a gate's section: a title, the inline ``<svg>`` element and a caption."""

    title: str
    svg: str
    caption: str = ""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - matplotlib comes with the test extras
        raise ImportError("the HTML report needs matplotlib: pip install 'pytest-llmbias[html]'") from None
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


_RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "pytest-llmbias",
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    _pyplot().close(fig)
    text = buf.getvalue()
    start = text.index("<svg")
    head_end = text.index(">", start)
    return text[start:head_end] + ' class="plot" role="img"' + text[head_end:].rstrip()


def colours(models: Sequence[str], target: str | None) -> dict[str, str]:
    """A colour per model: the target red, the baselines from :data:`BASELINE_COLOURS`."""
    out, i = {}, 0
    for m in models:
        if m == target:
            out[m] = TARGET_COLOUR
        else:
            out[m] = BASELINE_COLOURS[i % len(BASELINE_COLOURS)]
            i += 1
    return out


def _finite(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def grouped_bars(
    title: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    target: str | None = None,
    ylabel: str = "",
    line: float | None = None,
    line_label: str = "",
    caption: str = "",
) -> Figure:
    """Bars per group, one bar per model (``series``: model -> one value per group); an optional
    horizontal reference ``line``."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        width = max(4.5, min(14.0, 0.35 * len(groups) * max(1, len(series)) + 2))
        fig, ax = plt.subplots(figsize=(width, 3.2))
        n = max(1, len(series))
        bar = 0.8 / n
        palette = colours(list(series), target)
        for i, (model, values) in enumerate(series.items()):
            xs = [g + (i - (n - 1) / 2) * bar for g in range(len(groups))]
            ys = [float("nan") if v is None else float(v) for v in values]
            ax.bar(xs, ys, bar, label=model + (" (target)" if model == target else ""), color=palette[model])
        if line is not None:
            ax.axhline(line, color="#333333", linestyle="--", linewidth=1, label=line_label or None)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, rotation=30 if len(groups) > 4 else 0, ha="right" if len(groups) > 4 else "center")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=LEGEND_PT, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return Figure(title, _svg(fig), caption)


def distributions(
    title: str,
    series: Mapping[str, Sequence[float | None]],
    *,
    target: str | None = None,
    ylabel: str = "",
    caption: str = "",
) -> Figure:
    """A box plot per model of its per-item scores, the points drawn over it."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(series) + 2), 3.2))
        models = list(series)
        data = [_finite(series[m]) for m in models]
        palette = colours(models, target)
        ax.boxplot(data, showfliers=False, widths=0.5)
        for i, (m, values) in enumerate(zip(models, data, strict=True), start=1):
            jitter = [i + 0.18 * (((j * 7919) % 101) / 100 - 0.5) for j in range(len(values))]
            ax.scatter(jitter, values, s=8, alpha=0.6, color=palette[m], zorder=3)
        ax.set_xticks(range(1, len(models) + 1))
        ax.set_xticklabels([m + ("\n(target)" if m == target else "") for m in models])
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        return Figure(title, _svg(fig), caption)


def interval_against_margin(
    title: str,
    estimate: float,
    low: float,
    high: float,
    margin: float,
    *,
    alternative: str = "equivalent",
    xlabel: str = "",
    caption: str = "",
) -> Figure:
    """The target's difference with its confidence interval, against the band ±``margin`` (or,
    for a no-worse test, the bound +``margin``), as in the relative-bias paper's figures."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.0, 1.9))
        reach = max(abs(low), abs(high), margin) * 1.35 or 1.0
        lower = -margin if alternative == "equivalent" else -reach
        ax.axvspan(
            lower,
            margin,
            color="#d5f5e3",
            label="equivalence region" if alternative == "equivalent" else "no worse than the margin",
        )
        ax.axvline(0, color="#999999", linewidth=0.8)
        for x in (-margin, margin) if alternative == "equivalent" else (margin,):
            ax.axvline(x, color="#1e8449", linestyle="--", linewidth=1)
        inside = (lower <= low and high <= margin) if alternative == "equivalent" else high <= margin
        colour = "#1e8449" if inside else TARGET_COLOUR
        ax.errorbar(
            [estimate],
            [0],
            xerr=[[estimate - low], [high - estimate]],
            fmt="o",
            color=colour,
            capsize=6,
            linewidth=2,
            label="target − baselines, CI",
        )
        ax.set_xlim(-reach, reach)
        ax.set_yticks([])
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        ax.legend(fontsize=LEGEND_PT, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return Figure(title, _svg(fig), caption)


def rates_with_intervals(
    title: str,
    rows: Sequence[tuple[str, float, float, float]],
    *,
    target: str | None = None,
    reference: float | None = None,
    band: float | None = None,
    xlabel: str = "",
    caption: str = "",
) -> Figure:
    """One horizontal point per row ``(label, rate, low, high)`` with its interval; an optional
    ``reference`` line and the band ``reference ± band``. Rows whose label starts with the target's
    name are drawn in the target's colour."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.0, max(1.8, 0.32 * len(rows) + 0.9)))
        if reference is not None and band is not None:
            ax.axvspan(reference - band, reference + band, color="#d5f5e3", label=f"{reference:g} ± {band:g}")
        if reference is not None:
            ax.axvline(reference, color="#1e8449", linestyle="--", linewidth=1)
        for i, (label, rate, low, high) in enumerate(rows):
            colour = TARGET_COLOUR if target is not None and label.split(" ")[0] == target else BASELINE_COLOURS[0]
            ax.errorbar([rate], [i], xerr=[[rate - low], [high - rate]], fmt="o", color=colour, capsize=4)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([r[0] for r in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        if reference is not None and band is not None:
            ax.legend(fontsize=LEGEND_PT, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return Figure(title, _svg(fig), caption)


def heatmap(
    title: str,
    rows: Sequence[str],
    columns: Sequence[str],
    values: Sequence[Sequence[float | None]],
    *,
    vmin: float = -1.0,
    vmax: float = 1.0,
    colorbar: str = "",
    caption: str = "",
) -> Figure:
    """A diverging heatmap, ``values[i][j]`` for row ``rows[i]`` and column ``columns[j]``; None
    is left blank."""
    plt = _pyplot()
    import numpy as np

    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(max(5.0, min(16.0, 0.22 * len(columns) + 2.5)), 0.42 * len(rows) + 1.6))
        grid = np.array([[np.nan if v is None else float(v) for v in row] for row in values], dtype=float)
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="RdBu_r", vmin=vmin, vmax=vmax, aspect="auto")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(rows)
        ax.set_xticks(range(len(columns)))
        ax.set_xticklabels(columns, rotation=90, fontsize=SMALL_PT)
        ax.set_title(title)
        bar = fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
        bar.set_label(colorbar)
        return Figure(title, _svg(fig), caption)


def tost_interval(title: str, tost: Mapping[str, Any], *, xlabel: str = "target − baselines") -> Figure:
    """:func:`interval_against_margin` for a stored TOST result (``TostResult.to_dict()``)."""
    alpha = float(tost.get("alpha", 0.05))
    n = readable.number
    caption = (
        f"difference {n(tost['diff'])}, {1 - 2 * alpha:.0%} interval [{n(tost['ci_low'], brief=True)}, "
        f"{n(tost['ci_high'], brief=True)}] (each end a one-sided {1 - alpha:.0%} bound), margin δ = "
        f"{n(tost['margin'])}, {readable.p_value(tost['p_value'])}"
    )
    return interval_against_margin(
        title,
        float(tost["diff"]),
        float(tost["ci_low"]),
        float(tost["ci_high"]),
        float(tost["margin"]),
        alternative=str(tost.get("alternative", "equivalent")),
        xlabel=xlabel,
        caption=caption,
    )


def trend(
    title: str,
    runs: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    ylabel: str = "",
    caption: str = "",
) -> Figure:
    """One line per series (say, the target's figure and its comparators') over the runs, oldest
    first; a run without a value leaves a gap."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.0, 2.4))
        x = list(range(len(runs)))
        for i, (name, values) in enumerate(series.items()):
            y = [float("nan") if v is None else float(v) for v in values]
            colour = TARGET_COLOUR if i == 0 else BASELINE_COLOURS[(i - 1) % len(BASELINE_COLOURS)]
            ax.plot(x, y, marker="o", color=colour, label=name)
        ax.set_xticks(x)
        ax.set_xticklabels(list(runs), rotation=30, ha="right", fontsize=LEGEND_PT)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=LEGEND_PT, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return Figure(title, _svg(fig), caption)


def boundaries(q: Mapping[str, Any]) -> Figure:
    """A group-sequential gate's design (``q``: its ``sequential`` figures): the nominal level each
    look's test had to reach and the error spent by then, per look, the look it stopped at marked."""
    plt = _pyplot()
    looks = list(range(1, int(q["looks"]) + 1))
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(6.0, 2.4))
        ax.plot(looks, q["nominal"], marker="o", color=BASELINE_COLOURS[0], label="nominal level of the look's test")
        ax.plot(
            looks,
            q["spent"],
            marker="s",
            linestyle="--",
            color=BASELINE_COLOURS[1 % len(BASELINE_COLOURS)],
            label="error spent by the look",
        )
        ax.axvline(int(q["look"]), color=TARGET_COLOUR, linewidth=1.2, label=f"stopped: {q['decision']}")
        ax.set_yscale("log")
        ax.set_xticks(looks)
        ax.set_xlabel("look")
        ax.set_title(f"looks ({q['spending']} spending of alpha {q['alpha']:g})")
        ax.legend(fontsize=LEGEND_PT, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        asked, most = (q["units"], q["units_max"]) if "units" in q else (q["items"], q["items_max"])
        caption = (
            f"{q['decision']} at look {q['look']} of {q['looks']}: {asked} of {most} "
            f"{'units' if 'units' in q else 'items'} asked, {q['saved']:.0%} of the fixed design's calls saved"
        )
        return Figure("looks", _svg(fig), caption)


def by_model(table: Any, value: str, *, where: Mapping[str, Any] | None = None) -> dict[str, list[Any]]:
    """Model -> the ``value`` column of its rows of a stored table (``frames.Table``), in order;
    ``where`` keeps only rows whose columns have the given values."""
    out: dict[str, list[Any]] = {}
    for row in table.records():
        if where and any(row.get(k) != v for k, v in where.items()):
            continue
        out.setdefault(str(row["model"]), []).append(row.get(value))
    return out
