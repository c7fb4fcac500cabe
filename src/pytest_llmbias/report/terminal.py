"""The terminal's tables: the end-of-run table (one row per gate and method), the plan, expected
power and the budget check."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from pytest_llmbias.report import readable
from pytest_llmbias.stats.multiple import fmt_rate

COLUMNS = ("test", "domain", "method", "target", "baselines", "bound", "p", "reliability", "verdict")
"""The table's columns. For ``bias_equivalent``: the mean scores, δ and the TOST p value; for
``bias_impact_ratio``: the minimum impact ratios (baselines: their lowest), the threshold and the
permutation p value. ``reliability`` names the test and how often it fails a good model."""


def _cell(value: Any, column: str = "") -> str:
    """A figure as a reader reads it (see :mod:`pytest_llmbias.report.readable`): never an exponent."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return readable.p_figure(value) if column == "p" else readable.number(value, brief=True)
    return str(value)


def gate_table(rows: Iterable[Mapping[str, Any]], outcomes: Mapping[str, str] | None = None) -> list[str]:
    """Lines of a fixed-width table with :data:`COLUMNS`, one line per check of a gate (see
    :func:`pytest_llmbias.report.rows.check_rows`: a gate's rows, its outcome, and the note of a
    check that passed in a gate that failed).

    Rows come from each gate result's ``summary_row`` (or an ``error`` row), or a JSON document's
    gate entries; ``outcomes``: test id -> the test's outcome, where the rows carry none. Rows
    are sorted by test id so that the table reads the same with or without pytest-xdist.
    """
    from pytest_llmbias.report.rows import check_rows

    table: list[tuple[str, ...]] = [COLUMNS]
    for row in sorted(rows, key=lambda r: str(r["test"])):
        for c in check_rows(row, outcomes):
            if c.verdict == "error":
                table.append((c.test, c.domain, *("-" for _ in COLUMNS[2:-1]), "error"))
                continue
            figures = (_cell(c.figures.get(k), k) for k in COLUMNS[3:-1])
            table.append((c.test, c.domain, c.method, *figures, c.shown_verdict))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in table]


#: the width the default table keeps to
WIDTH = 100
COMPACT = ("test", "method", "p", "verdict")


def _shorten(text: str, width: int, head: int = 0) -> str:
    """``text`` cut to ``width`` characters, its start elided so that its end — a test's function
    name, the part a reader matches to the test — stays readable; ``head`` characters of its start
    kept before the ellipsis (to tell apart ids whose ends are alike)."""
    if len(text) <= width:
        return text
    keep = width - 1
    head = max(0, min(head, keep))
    return text[:head] + "…" + text[len(text) - (keep - head) :]


def _common_prefix(a: str, b: str) -> int:
    """The length of the prefix ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def shorten_all(texts: Iterable[str], width: int) -> dict[str, str]:
    """Each of ``texts`` shortened as :func:`_shorten` does (its end kept), different ones kept
    apart where ``width`` allows: those whose ends read alike each show the word where they
    differ between two ellipses before their end (``…age…the_stereotype``), or their start up to
    that word where it is the first."""
    short = {t: _shorten(t, width) for t in dict.fromkeys(texts)}
    keep = width - 1
    groups: dict[str, list[str]] = {}
    for text, shown in short.items():
        groups.setdefault(shown, []).append(text)
    for alike in (g for g in groups.values() if len(g) > 1):
        for text in alike:
            differ = max(_common_prefix(text, u) for u in alike if u != text)
            start, end = differ, differ + 1
            while start > 0 and text[start - 1].isalnum():  # the whole word that differs
                start -= 1
            while end < len(text) and text[end].isalnum():
                end += 1
            if start == 0 or end - start + 2 > keep // 2:  # the first word, or one too long: the start
                short[text] = _shorten(text, width, min(end, keep - 1))
            else:
                tail = width - (end - start) - 2
                short[text] = f"…{text[start:end]}…{text[len(text) - tail :]}"
    return short


def compact_table(
    rows: Iterable[Mapping[str, Any]], width: int = WIDTH, outcomes: Mapping[str, str] | None = None
) -> list[str]:
    """The gates' table in at most ``width`` columns, one line per check (see
    :func:`gate_table`): the test's name without its file (its start elided where it must be, its
    end kept, two names never alike: see :func:`shorten_all`), the method, p and the verdict;
    ``-v`` shows :func:`gate_table`."""
    from pytest_llmbias.report.rows import check_rows

    body = []
    for row in sorted(rows, key=lambda r: str(r["test"])):
        for c in check_rows(row, outcomes):
            test = c.test.split("::", 1)[-1]
            body.append(
                (test, c.method, "-" if c.verdict == "error" else _cell(c.figures.get("p"), "p"), c.shown_verdict)
            )
    fixed = [max(len(r[i]) for r in [COMPACT, *body]) for i in range(1, 4)]
    room = max(12, width - sum(fixed) - 2 * (len(COMPACT) - 1))
    short = shorten_all((r[0] for r in body), room)
    table = [COMPACT, *((short[r[0]], *r[1:]) for r in body)]
    widths = [max(len(r[i]) for r in table) for i in range(len(COMPACT))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in table]


def plan_table(
    estimate: Mapping[str, Mapping[str, Any]],
    *,
    budget: float | None = None,
    rounds: Sequence[Mapping[str, Any]] | None = None,
    batch: bool = False,
    one_by_one: Collection[str] = (),
) -> list[str]:
    """The plan's lines: per model the calls planned (of which follow-ups: calls made on answers,
    such as judge ratings; and, when a gate takes looks, the later looks' calls), stored, to fetch, the estimated tokens
    and cost of those, then the
    total (and the budget when there is one), and how many of the calls are fingerprint probes.
    Where the estimate is priced at batch prices too
    (:func:`~pytest_llmbias.planning.estimate.price_batches`, whose ``rounds`` these are): in
    batch mode (``batch``) a column of each model's cost at batch prices (``one_by_one``: the
    aliases batch mode calls one by one) and the table of rounds, their calls and their cost at
    both prices; otherwise one line with what batch mode would cost."""
    looks = any(e.get("optional") for e in estimate.values())  # group-sequential gates' later batches
    priced = rounds is not None and all("batch_cost_usd" in e for e in estimate.values())
    wide = batch and priced
    header = (
        "model",
        "calls",
        "follow-ups",
        *(("later looks",) if looks else ()),
        "stored",
        "to fetch",
        "est. tokens",
        "est. cost",
        *(("at batch prices",) if wide else ()),
    )
    table = [header]
    total, unknown = 0.0, False
    for alias, e in estimate.items():
        cost = e.get("cost_usd")
        unknown |= cost is None
        total += cost or 0.0
        table.append(
            (
                f"{alias} ({e['model']})",
                str(e["calls"]),
                str(e.get("follow_ups", 0)),
                *((str(e.get("optional", 0)),) if looks else ()),
                str(e["stored"]),
                str(e["to_fetch"]),
                f"{e['prompt_tokens'] + e['completion_tokens']:,}",
                "unknown price" if cost is None else f"${cost:.4f}",
                *((_batch_cell(e, alias in one_by_one),) if wide else ()),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [
        "llmbias plan (no call made; follow-ups such as judge ratings are counted, those that depend on "
        "answers not yet stored at their largest"
        + (
            "; later looks: calls asked only while a gate's verdict is open, counted in calls as the most"
            if looks
            else ""
        )
        + "):"
    ]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    cheap = sum(e.get("batch_cost_usd") or 0.0 for e in estimate.values())
    lacking = sorted({e["model"] for e in estimate.values() if e["to_fetch"] and not e.get("batch_priced", True)})
    lines.append(
        f"  total estimated cost: ${total:.4f}"
        + (f" at standard prices, ${cheap:.4f} at batch prices" if wide else "")
        + (" plus models of unknown price" if unknown else "")
        + (f"; budget ${budget:g}" if budget is not None else "")
    )
    no_batch = f"no batch price in litellm's map for {', '.join(lacking)}, counted at standard prices"
    if wide and lacking:
        lines.append(f"  {no_batch}")
    if priced and not batch and cheap < total:  # where batch mode would cost less
        lines.append(f"  at batch prices: ${cheap:.4f} (--llmbias-batch)" + (f"; {no_batch}" if lacking else ""))
    probes = sum(int(e.get("probes") or 0) for e in estimate.values())
    if probes:
        lines.append(
            f"  of the calls to fetch, {probes} are fingerprint probes (asked live every run: 3 a model, "
            "twice over for one whose answers were last seen to vary; --llmbias-no-fingerprint turns them off)"
        )
    if wide and rounds:
        lines += _rounds_table(rounds)
    return lines


def _batch_cell(e: Mapping[str, Any], one_by_one: bool) -> str:
    cost = e.get("batch_cost_usd")
    if cost is None:
        return "unknown price"
    if one_by_one and e["to_fetch"]:
        return f"${cost:.4f} (called one by one)"
    return f"${cost:.4f}" + ("" if e.get("batch_priced", True) or not e["to_fetch"] else " (no batch price)")


def _rounds_table(rounds: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rounds of batch mode: each round's calls and their cost at standard and at batch prices."""
    header = ("round", "calls", "est. cost", "at batch prices")
    table: list[tuple[str, ...]] = [header]
    for r in rounds:
        table.append(
            (
                str(r["round"]),
                str(r["calls"]),
                *("unknown price" if r[k] is None else f"${r[k]:.4f}" for k in ("cost_usd", "batch_cost_usd")),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [
        "  batch rounds (--llmbias-batch; round 1: the calls not stored; each later one: the follow-ups, such "
        "as judge ratings, of the answers the round before brings; fingerprint probes are ordinary calls):"
    ]
    lines += ["    " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return lines


def power_table(rows: Iterable[tuple[str, Any]]) -> list[str]:
    """The plan's second table: per gate test (``rows``: test id and an
    :class:`~pytest_llmbias.engine.expected_power.ExpectedPower`), the gate and check, the expected power
    (the median over stand-in targets), how many stand-ins passed, the false-alarm rate the gate
    estimates (median), and a note: why the power cannot be computed, or what limits it. Sorted
    by test id, as the end-of-run table."""
    rows = sorted(rows, key=lambda r: r[0])
    if not rows:
        return []
    header = ("test", "gate", "expected power", "stand-ins passed", "est. false alarm", "note")
    table = [header]
    for nodeid, e in rows:
        table.append(
            (
                nodeid,
                e.label,
                "-" if e.power is None else fmt_rate(e.power),
                f"{e.passed} of {e.stand_ins}" if e.stand_ins else "-",
                "-" if e.false_alarm is None else fmt_rate(e.false_alarm),
                e.note or "",
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [
        "llmbias expected power (no call made; each baseline in turn as the target, the others as its "
        "baselines, on stored answers):"
    ]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return lines


def sizing_table(rows: Iterable[tuple[str, Any]]) -> list[str]:
    """The plan's table of what each comparison needs (``rows``: test id and a
    :class:`~pytest_llmbias.engine.sizing.Sizing`): its margin, the per-unit SD and its source, the
    false-alarm level and power it is designed for, the units (questions x samples) it will ask and
    those it needs. Sorted by test id."""
    rows = sorted(rows, key=lambda r: r[0])
    if not rows:
        return []
    header = ("test", "gate", "margin", "SD (from)", "false alarm", "power", "units", "needed")
    table = [header]
    for nodeid, z in rows:
        table.append(
            (
                nodeid,
                f"{z.gate} ({z.check})",
                f"{z.margin:g}",
                f"{z.sd:.3g} ({z.source})",
                f"{z.level:.3g}",
                fmt_rate(z.power),
                str(z.units),
                f"{z.needed}" + ("" if z.sized else "  UNDERPOWERED: more questions or samples"),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [
        "llmbias sizing (questions x samples each comparison needs for its false-alarm level and power; "
        "an underpowered gate can show neither a pass nor a regression):"
    ]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return lines


def budget_error(estimate: Mapping[str, Mapping[str, Any]], budget: float, *, batch: bool = False) -> str | None:
    """Why the planned calls cannot be made within ``budget`` USD (``--llmbias-max-cost``), with
    the plan's table; None when they can. ``batch``: batch mode's, the estimate's cost at batch
    prices (``batch_cost_usd``) counted."""
    cost = "batch_cost_usd" if batch and all("batch_cost_usd" in e for e in estimate.values()) else "cost_usd"
    unpriced = sorted({e["model"] for e in estimate.values() if e["to_fetch"] and e[cost] is None})
    total = sum(e[cost] or 0.0 for e in estimate.values())
    if not unpriced and total <= budget:
        return None
    why = (
        f"litellm's price map does not know {', '.join(unpriced)}, so the budget cannot be kept"
        if unpriced
        else f"the estimate{' at batch prices' if cost == 'batch_cost_usd' else ''}, ${total:.4f}, exceeds it"
    )
    return f"the budget is ${budget:g} (--llmbias-max-cost) and {why}; no call was made.\n" + "\n".join(
        plan_table(estimate, budget=budget, rounds=[] if cost == "batch_cost_usd" else None, batch=batch)
    )


def header_line(settings: Any) -> str:
    """The run's header when the plugin is in use: the roster and the judge, wrapped to
    :data:`WIDTH` columns, then the store and its mode on a line of their own (a path is never
    broken); lines joined by newlines."""
    import textwrap

    s = settings

    def name(m: Any) -> str:  # a deployment shows its version, and its system prompt by hash
        about = [
            *([f"version {m.version}"] if getattr(m, "version", None) else []),
            *([f"system {m.system_hash}"] if m.system_hash else []),
        ]
        return m.alias + (f" ({', '.join(about)})" if about else "")

    roster = (
        ", ".join(
            [
                *(f"target {name(s.target)}" for _ in (s.target,) if s.target is not None),
                *([f"against release {s.release.against} ({s.comparators[0].alias})"] if s.release.against else []),
                *([f"and anchor release {s.release.anchor}"] if s.release.against and s.release.anchor else []),
                *(["baselines " + ", ".join(name(b) for b in s.context) + " (context)"] if s.context else []),
                *(
                    ["baselines " + ", ".join(name(b) for b in s.baselines)]
                    if s.baselines and not s.release.against
                    else []
                ),
                *([f"judge {name(s.judge)}"] if len(s.panel) == 1 else []),
                *([f"judges {', '.join(name(j) for j in s.panel)}"] if len(s.panel) > 1 else []),
            ]
        )
        or "no models configured"
    )
    mode = str(s.store.cache) + (", offline" if s.store.offline else "")
    record = f"; recording release {s.release.record}" if s.release.record else ""
    if s.store.url:
        from pytest_llmbias.config.redaction import Redactor

        where = f"team store {Redactor()(s.store.url)}"
    else:
        where = f"store {s.store.dir}"
    lines = textwrap.wrap(
        f"llmbias: {roster}", WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )
    return "\n".join([*lines, f"llmbias: {where} ({mode}){record}"])
