"""The run's HTML report (``--llmbias-html PATH``, ``llmbias report RUN.json --html OUT.html``).

One self-contained file that needs no network: inline CSS, inline SVG plots, one small inline
script. It is rendered from the run's JSON document alone (:mod:`pytest_llmbias.report.json_report`),
so a saved document re-renders to the same page without calling any model.

Every string that comes from the run — answers quoted in a gate's report, question ids, model names,
the settings — is HTML-escaped, and the page's Content-Security-Policy allows no script but its own
(by hash) and no request at all, so a model's answer that contains ``<script>`` shows as text.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbias.report import readable

_SCRIPT = """
(function () {
  var box = document.getElementById("failing-only");
  function apply() {
    var sections = document.querySelectorAll("section.gate");
    for (var i = 0; i < sections.length; i++) {
      var ok = sections[i].getAttribute("data-passed") === "true";
      sections[i].hidden = box.checked && ok;
    }
  }
  box.addEventListener("change", apply);
  apply();
  document.body.setAttribute("data-ready", "true");
})();
""".strip()

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1.5rem; color: #1c2833; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2.2rem; }
h3 { font-size: 1rem; margin-bottom: .3rem; } h2, h3, p, li { overflow-wrap: anywhere; }
.meta { color: #566573; margin-top: 0; }
table { border-collapse: collapse; margin: .6rem 0; font-size: 13px; max-width: 100%; display: block;
        overflow-x: auto; }
th, td { border-bottom: 1px solid #d5d8dc; padding: .25rem .6rem; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { background: #f4f6f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
th, td.num, .badge, td code, .w { white-space: nowrap; overflow-wrap: normal; }
table.summary td.test { min-width: 12rem; overflow-wrap: normal; }
table.moved td.text { overflow-wrap: anywhere; min-width: 14rem; }
.note { color: #566573; font-size: 12px; white-space: normal; }
details > summary { cursor: pointer; font-weight: 600; margin: .6rem 0; }
.badge { display: inline-block; padding: .05rem .5rem; border-radius: .8rem; font-size: 12px; font-weight: 600;
         color: #fff; background: #7f8c8d; }
.badge.passed { background: #1e8449; } .badge.failed, .badge.error { background: #c0392b; }
.badge.xfailed { background: #7d3c98; } .badge.xpassed { background: #b9770e; }
section.gate { border-top: 2px solid #d5d8dc; }
figure { margin: 1rem 0; } figcaption { color: #566573; font-size: 12px; }
svg.plot { max-width: 100%; height: auto; }
pre { background: #f8f9f9; border: 1px solid #e5e8e8; padding: .7rem; overflow-x: auto; font-size: 12px;
      white-space: pre-wrap; word-break: break-word; }
.warning { color: #9a7d0a; } .error { color: #c0392b; }
code { font-size: 12px; }
""".strip()


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


#: the reader's words for the keys of a result's figures
LABELS = {
    "test": "test used",
    "alpha": "alpha (level of each one-sided test)",
    "designed_false_alarm": "false alarm it is built for",
    "false_alarm": "false alarm estimated on these data",
    "power": "power to catch what it is built to catch",
    "margin": "margin δ",
    "margin_source": "margin from",
    "floor": "floor of the margin",
    "answers_needed": "answers per group for 80% power",
    "questions_needed": "agreed-on questions for 80% power",
    "prompts_needed": "prompts for 80% power",
    "threshold_source": "threshold from",
    "underpowered": "underpowered (a pass is only an absence of evidence)",
    "power_against": "power against",
    "confidence": "confidence",
    "observed_power": "chance of passing were the observed difference true",
}
#: keys whose value is a rate, shown as a percentage
RATES = {"designed_false_alarm", "false_alarm", "power", "observed_power"}


#: a short "how to read this" per gate kind
HOW_TO_READ = {
    "bias_equivalent": "Each question gets a bias score per model (the judge's 1-10 rating, or the embedding distance "
    "to the other models' answers). The gate passes when the target's scores differ from the "
    "baselines' by less than the margin δ with 95% confidence (two one-sided tests); the interval "
    "plot shows the difference and ±δ.",
    "bias_impact_ratio": "Each answer gets a feature value (sentiment by default) and counts as selected when it is at "
    "least as favourable as the typical answer. Each group's selection rate is compared with the "
    "best group's: below four-fifths, and significant by the permutation test, it fails.",
    "bias_index": "The LLM Bias Index weighs each dimension's mean bias, a diversity penalty and the answers' "
    "sentiment extremity; the gate compares the target's per-prompt indices with the baselines' "
    "(and, with max_index, the index with a bound).",
    "bias_stance": "Each yes/no question is asked several times; a model's lean is the share of yes minus no. The "
    "gate checks that the target takes the baselines' side where they agree, does not give way to a "
    "stated opposing opinion more than they do, or answers alike across languages.",
    "bias_preference": "Each model writes an article per perspective and picks the one it prefers; a balanced "
    "model's picks split evenly, within the tolerance, and no less evenly than the baselines'.",
    "bias_benchmark": "A public benchmark's items asked of each model. BBQ: each answer scores +1 when it names the "
    "stereotyped person, -1 the other, 0 'unknown'; the target's scores, item by item, must be no "
    "worse than the baselines' by more than the margin. discrim-eval: each group's disadvantage "
    "(how much less often than a 60-year-old white man it gets a yes, in logits) must match the "
    "baselines' within the margin, group by group. The plot shows each category's difference and "
    "its interval.",
    "bias_evenhanded": "Each pair asks the same task for two opposing sides. A judge reads both conversations at "
    "once, in both orders, and says whether the assistant served both sides alike; each answer is "
    "also rated for refusing and for acknowledging other views. The gate compares the target's "
    "share of pairs judged alike (or its one-sided refusals, or its opposing-views rate) with the "
    "baselines' pair by pair, or with a bound.",
}


def _label(key: str) -> str:
    return LABELS.get(key, key.replace("_", " "))


def _reading(value: Any, key: str = "") -> str:
    """A cell's value as a reader reads it (see :mod:`pytest_llmbias.report.readable`), unescaped."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else ("yes" if value else "no")
    if isinstance(value, (int, float)):
        if key in RATES:
            return readable.rate(float(value))
        return readable.p_figure(value) if key == "p" else readable.number(value)
    return str(value)


def _num(value: Any, key: str = "") -> str:
    """:func:`_reading`, escaped."""
    return _e(_reading(value, key))


def _kv_table(pairs: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><th>{_e(_label(k))}</th><td>{_words(_reading(v, k))}</td></tr>"
        for k, v in pairs.items()
        if not isinstance(v, (dict, list))
    )
    return f"<table>{rows}</table>" if rows else ""


def plots_missing() -> str | None:
    """Why the page has no plots, when matplotlib is not installed (None when it is)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        return "the plots are missing: matplotlib is not installed (pip install 'pytest-llmbias[html]')"
    return None


def _reliabilities(result: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each reliability block of a gate result: ``(label, figures)``."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(result.get("reliability"), Mapping):
        out.append(("", result["reliability"]))
    for m in result.get("methods") or ():
        if isinstance(m, Mapping) and isinstance(m.get("reliability"), Mapping):
            out.append((str(m.get("method", "")), m["reliability"]))
    relative = result.get("relative")
    if isinstance(relative, Mapping) and isinstance(relative.get("reliability"), Mapping):
        out.append(("relative", relative["reliability"]))
    unique: list[tuple[str, Mapping[str, Any]]] = []
    for label, figures in out:
        if all(figures != seen for _, seen in unique):
            unique.append((label, figures))
    return unique


def _model_line(model: Any) -> str:
    if not isinstance(model, Mapping):
        return _e(model)
    alias, name = model.get("alias"), model.get("model")
    line = f"<code>{_e(alias)}</code> ({_e(name)})" if alias and alias != name else f"<code>{_e(name)}</code>"
    if model.get("system"):
        line += (
            f" <details><summary>system prompt {_e(model.get('system_hash'))}</summary>"
            f"<pre>{_e(model['system'])}</pre></details>"
        )
    return line


def _header(doc: Mapping[str, Any]) -> str:
    """The models compared and judging, their fingerprints, and the calls (folded)."""
    roster = doc.get("roster") or {}
    plan = doc.get("plan") or {}
    baselines = ", ".join(_model_line(b) for b in roster.get("baselines") or ()) or "none"
    cost = plan.get("cost_usd")
    figures = {
        "calls": plan.get("calls"),
        "from the store": plan.get("from_store"),
        "fetched": plan.get("fetched"),
        "failed": plan.get("failed"),
        "missing": plan.get("missing"),
        "tokens fetched": plan.get("tokens"),
        "cost (USD)": "unknown" if cost is None and plan.get("fetched") else cost,
        "collection time (s)": plan.get("elapsed_s"),
    }
    return (
        "<h2>Models</h2><table>"
        f"<tr><th>target</th><td>{_model_line(roster.get('target'))}</td></tr>"
        f"<tr><th>baselines</th><td>{baselines}</td></tr>"
        + (
            f"<tr><th>judges</th><td>{', '.join(_model_line(j) for j in roster['judges'])}</td></tr>"
            if len(roster.get("judges") or ()) > 1
            else "<tr><th>judge</th>"
            f"<td>{_model_line(roster.get('judge')) if roster.get('judge') else 'none'}</td></tr>"
        )
        + "".join(
            (
                '<tr><th>fingerprint</th><td class="warning">'
                if f.get("state") == "changed"
                else "<tr><th>fingerprint</th><td>"
            )
            + f"{_e(f.get('text'))}</td></tr>"
            for f in doc.get("fingerprints") or ()
        )
        + "</table>"
        # mostly zeros on a run from the store: folded, below the verdicts
        "<details><summary>Calls</summary>" + _kv_table(figures) + "</details>"
    )


def _title(doc: Mapping[str, Any]) -> str:
    """The page's first lines: its title, the run, and a model that changed behind its name."""
    changed = [f for f in doc.get("fingerprints") or () if f.get("state") == "changed"]
    return (
        "<h1>pytest-llmbias report</h1>"
        f'<p class="meta">pytest-llmbias {_e(doc.get("plugin_version"))}, {_e(doc.get("created_at"))}, '
        f"schema {_e(doc.get('schema_version'))}</p>"
        + "".join(f'<p class="warning">{_e(f.get("text"))}</p>' for f in changed)
    )


def _summary(gates: Sequence[Mapping[str, Any]], suite: Mapping[str, Any] | None = None) -> str:
    """The gates' table, a row a check (:mod:`pytest_llmbias.report.rows`): the test, its gate and
    its outcome span the rows of its checks, so a gate reads as one whatever its checks, and the
    gates counted once each, by outcome, above it."""
    from pytest_llmbias.report.rows import check_rows, count

    head = ("test", "gate", "outcome", "method", "verdict", "target", "baselines", "bound", "p", "reliability")
    rows = []
    for i, g in enumerate(gates):
        for c in check_rows(g):
            span = f' rowspan="{c.checks}"' if c.checks > 1 else ""
            cells = (
                [
                    f'<td class="test"{span}><a href="#gate-{i}">{_breakable(c.test)}</a></td>',
                    f"<td{span}><code>{_e(c.gate)}</code></td>",
                    f'<td{span}><span class="badge {_e(c.outcome)}">{_e(c.outcome)}</span></td>',
                ]
                if c.first
                else []
            )
            verdict = _words(c.verdict) + (f'<br><span class="note">{_words(c.note)}</span>' if c.note else "")
            cells += [
                f"<td>{_words(c.method)}</td>",
                f"<td>{verdict}</td>",
                *(f'<td class="num">{_num(c.figures.get(k), k)}</td>' for k in ("target", "baselines", "bound", "p")),
                f"<td>{_words(c.figures.get('reliability') or '')}</td>",
            ]
            rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<h2 id="summary">Summary</h2><p class="counts">{_e(count(gates).sentence())}.</p>'
        + (f'<p class="suite">{_e(suite["sentence"])}.</p>' if suite else "")
        + '<p><label><input type="checkbox" id="failing-only"> show only gates that did not pass</label></p>'
        '<table class="summary"><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"
    )


def _words(text: Any) -> str:
    """``text``, escaped, that wraps only between its words: each word in a span that does not
    break (a browser would break ``~<0.1%`` after its ``~``, ``IR(sentiment)`` at its bracket on a
    narrow column)."""
    return " ".join(f'<span class="w">{_e(w)}</span>' for w in str(text).split())


def _breakable(test_id: str) -> str:
    """A test id, escaped, that may wrap only after a ``/``, ``::``, ``_`` or ``[`` (``<wbr>``):
    at word boundaries, never inside a word."""
    import re

    return "".join(
        _e(part) + ("<wbr>" if re.fullmatch(r"/|::|_|\[", part) else "") for part in re.split(r"(/|::|_|\[)", test_id)
    )


def _figures_of(entry: Mapping[str, Any], figures_for: Callable[[Mapping[str, Any]], Sequence[Any]] | None) -> str:
    if "table" not in entry or figures_for is None:
        return ""
    try:
        figures = figures_for(entry)
    except Exception as exc:  # a plot that cannot be drawn is said, never hidden, and spares the page
        return f'<p class="error">The plots of this gate could not be drawn: {_e(type(exc).__name__)}: {_e(exc)}</p>'
    parts = []
    from pytest_llmbias.report.trends import trends

    figures = [*figures, *trends(entry)]
    for f in figures:
        caption = f"<figcaption>{_e(f.caption)}</figcaption>" if f.caption else ""
        parts.append(f'<figure data-title="{_e(f.title)}">{f.svg}{caption}</figure>')
    return "".join(parts)


def _moved(result: Mapping[str, Any]) -> str:
    """The items whose score moved most, the comparator's answer beside the target's."""
    items = list(result.get("moved") or ())
    if not items:
        return ""
    rows = "".join(
        f"<tr><td>{_e(i.get('method'))}</td><td>{_e(i.get('item'))}</td>"
        f"<td>{_num(float(i.get('comparator') or 0))}</td>"
        f"<td>{_num(float(i.get('target') or 0))}</td><td>{readable.signed(float(i.get('delta') or 0))}</td>"
        f'<td class="text">{_e(i.get("comparator_text"))}</td><td class="text">{_e(i.get("target_text"))}</td></tr>'
        for i in items
    )
    other = _e(items[0].get("comparator_alias", "comparators"))
    return (
        f'<h3>What moved most</h3><table class="moved"><tr><th>method</th><th>item</th><th>{other}</th>'
        f"<th>target</th><th>change</th><th>{other}'s answer</th><th>the target's answer</th></tr>{rows}</table>"
    )


def _section(i: int, entry: Mapping[str, Any], figures_for: Callable[[Mapping[str, Any]], Sequence[Any]] | None) -> str:
    result = entry.get("result") or {}
    outcome = str(entry.get("outcome", ""))
    passed = entry.get("passed")
    parts = [
        f'<section class="gate" id="gate-{i}" data-gate="{_e(entry.get("gate"))}" '
        f'data-passed="{"true" if passed is True else "false"}">',
        f"<h2>{_breakable(str(entry.get('test') or ''))}</h2>",
        f'<p><span class="badge {_e(outcome)}">{_e(outcome)}</span> <code>{_e(entry.get("gate"))}</code> on '
        f"<code>{_e(entry.get('domain'))}</code>: verdict <strong>{_e(entry.get('verdict'))}</strong></p>",
    ]
    how = HOW_TO_READ.get(str(entry.get("gate")))
    if how:
        parts.append(f'<details class="how"><summary>How to read this</summary><p>{_e(how)}</p></details>')
    if "error" in result:
        parts.append(f'<p class="error">{_e(result["error"])}</p>')
    why = result.get("why")
    if why:
        parts.append(f"<p>{_e(why)}</p>")
    for label, figures in _reliabilities(result):
        table = _kv_table(figures)
        if table:  # a block of nested blocks only has no figure of its own: no heading over nothing
            parts.append(f"<h3>Reliability{(' — ' + _e(label)) if label else ''}</h3>" + table)
    parts.append(_figures_of(entry, figures_for))
    parts.append(_moved(result))
    for w in result.get("warnings") or ():
        parts.append(f'<p class="warning">warning: {_e(w)}</p>')
    if entry.get("report"):
        parts.append(f"<h3>Report</h3><pre>{_e(entry['report'])}</pre>")
    parts.append("</section>")
    return "".join(parts)


def looks_figures(entry: Mapping[str, Any]) -> Sequence[Any]:
    """The plots every gate's entry can have without its gate: a group-sequential gate's looks.
    A gate's own plots come from its :meth:`~pytest_llmbias.engine.protocol.Gate.figures`, which
    the caller passes as ``figures_for`` (see :func:`pytest_llmbias.gates.gate_figures`): this
    module renders documents and knows no gate."""
    from pytest_llmbias.report import plots

    looked = (entry.get("result") or {}).get("sequential")
    return [plots.boundaries(looked)] if looked else []


def render(
    doc: Mapping[str, Any], *, figures_for: Callable[[Mapping[str, Any]], Sequence[Any]] | None = looks_figures
) -> str:
    """The page of one run's document (see the module docstring)."""
    gates = list(doc.get("gates") or ())
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    policy = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'"
    missing = plots_missing() if figures_for is not None else None
    # the verdicts first: at 1280 x 900 the gate table starts above the fold
    body = [_title(doc), *([f'<p class="warning">Note: {_e(missing)}.</p>'] if missing else [])]
    body += [_summary(gates, doc.get("suite")), _header(doc)]
    body += [_section(i, g, None if missing else figures_for) for i, g in enumerate(gates)]
    settings = json.dumps(doc.get("settings") or {}, indent=2, sort_keys=True, default=str)
    body.append(f"<h2>Settings</h2><pre>{_e(settings)}</pre>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>pytest-llmbias report {_e(doc.get('created_at'))}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}<script>{_SCRIPT}</script></body></html>\n"
    )


def write(
    path: Path,
    doc: Mapping[str, Any],
    redact: Callable[[str], str] | None = None,
    *,
    figures_for: Callable[[Mapping[str, Any]], Sequence[Any]] | None = None,
) -> None:
    """Write the page of ``doc`` to ``path`` (atomically), every credential masked first; each
    gate's plots drawn by ``figures_for`` (default :func:`looks_figures`)."""
    if redact is not None:
        doc = json.loads(redact(json.dumps(doc, default=str)))
    text = render(doc, figures_for=figures_for or looks_figures)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
