"""The HTML report's pure parts: tables, plots to SVG, escaping, the page's policy, and a plot that
cannot be drawn."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re

import numpy as np
import pytest

from pytest_llmbias.report import html, plots
from pytest_llmbias.report.frames import Table


def test_a_table_keeps_plain_values_and_round_trips_through_json():
    rows = [
        {"model": "a", "n": np.int64(3), "rate": np.float64(0.5), "ok": np.bool_(True), "sd": math.nan},
        {"model": "b", "n": 4, "rate": None, "ok": False, "sd": float("inf")},
    ]
    table = Table.of(rows, ["model", "n", "rate", "ok", "sd"])
    assert table.rows == (("a", 3, 0.5, True, None), ("b", 4, None, False, None))
    assert type(table.rows[0][1]) is int and type(table.rows[0][3]) is bool
    again = Table.from_dict(json.loads(json.dumps(table.to_dict(), allow_nan=False)))
    assert again == table
    assert again.column("n") == [3, 4] and again.records()[1]["model"] == "b"
    frame = table.to_frame()
    assert list(frame.columns) == ["model", "n", "rate", "ok", "sd"] and len(frame) == 2


def test_a_ragged_stored_table_is_refused():
    with pytest.raises(ValueError, match="row 1 has 1 values for 2 columns"):
        Table.from_dict({"columns": ["a", "b"], "rows": [[1, 2], [3]]})


def test_plot_labels_are_text_escaped_and_math_mode_is_off():
    figure = plots.grouped_bars(
        "<b>title</b> & co",
        ["$x$ <i>", "q&a"],
        {"tgt": [0.2, 0.4], "b1": [0.3, None]},
        target="tgt",
        line=0.25,
        line_label="line",
    )
    svg = figure.svg
    assert svg.startswith("<svg") and 'class="plot"' in svg and "<?xml" not in svg and "<!DOCTYPE" not in svg
    assert "&lt;b&gt;title&lt;/b&gt; &amp; co" in svg and "$x$ &lt;i&gt;" in svg and "q&amp;a" in svg
    assert "<b>" not in svg and "<i>" not in svg
    # the same figure drawn twice is the same SVG (stable ids, no date)
    assert (
        plots.grouped_bars(
            "<b>title</b> & co",
            ["$x$ <i>", "q&a"],
            {"tgt": [0.2, 0.4], "b1": [0.3, None]},
            target="tgt",
            line=0.25,
            line_label="line",
        ).svg
        == svg
    )


def test_the_interval_plot_states_the_tost_figures():
    tost = {
        "diff": 0.02,
        "ci_low": -0.01,
        "ci_high": 0.05,
        "margin": 0.1,
        "alpha": 0.05,
        "p_value": 0.003,
        "alternative": "equivalent",
    }
    figure = plots.tost_interval("t", tost)
    assert figure.caption == (
        "difference 0.02, 90% interval [-0.01, 0.05] (each end a one-sided 95% bound), margin δ = 0.1, p = 0.003"
    )
    assert "<svg" in figure.svg


def _doc(gates):
    return {
        "schema_version": 1,
        "plugin_version": "9.9",
        "created_at": "2026-01-01T00:00:00Z",
        "settings": {"target": {"model": "m<1>"}},
        "roster": {"target": {"model": "m<1>", "alias": "t&t"}, "baselines": [], "judge": None},
        "plan": {
            "calls": 1,
            "from_store": 1,
            "fetched": 0,
            "failed": 0,
            "missing": 0,
            "tokens": 0,
            "cost_usd": 0.0,
            "elapsed_s": 0.1,
        },
        "gates": gates,
    }


GATE = {
    "test": "t.py::test_<x>",
    "gate": "bias_equivalent",
    "domain": "d<1>",
    "outcome": "failed",
    "passed": False,
    "verdict": "biased",
    "result": {"warnings": ["<w>"]},
    "report": "answer: <script>alert(1)</script>",
    "row": {"test": "t.py::test_<x>", "domain": "d", "methods": [{"method": "<m>", "verdict": "biased"}]},
    "table": {"columns": ["model"], "rows": [["a"]]},
}


def test_every_string_of_the_run_is_escaped_and_the_only_script_is_the_pages_own():
    page = html.render(_doc([GATE]), figures_for=lambda entry: [])
    assert page.count("<script>") == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for raw in ("test_<x>", "d<1>", "<w>", "<m>", "m<1>", "t&t"):
        assert raw not in page
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in policy and "connect-src" not in policy
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy


def test_a_plot_that_cannot_be_drawn_is_said_and_the_page_still_renders():
    def broken(entry):
        raise KeyError("tost")

    page = html.render(_doc([GATE, {**GATE, "test": "t.py::test_two"}]), figures_for=broken)
    assert page.count("could not be drawn: KeyError: &#x27;tost&#x27;") == 2
    assert page.count('<section class="gate"') == 2


def test_a_gate_this_version_does_not_know_gets_its_section_without_plots():
    page = html.render(_doc([{**GATE, "gate": "bias_future"}]))
    assert 'data-gate="bias_future"' in page and "<svg" not in page and "could not be drawn" not in page


def test_an_entry_without_a_verdict_shows_its_error():
    entry = {
        "test": "t.py::test_e",
        "gate": "bias_index",
        "domain": "d",
        "outcome": "failed",
        "passed": None,
        "verdict": "error",
        "result": {"error": "MissingResponsesError: 3 answers missing"},
        "row": {"test": "t.py::test_e", "domain": "d", "error": "x"},
    }
    page = html.render(_doc([entry]))
    assert "MissingResponsesError: 3 answers missing" in page and '<p class="counts">1 gate: 1 failed.</p>' in page


def test_figures_read_as_words_and_rounded_numbers() -> None:
    from pytest_llmbias.report.html import _kv_table

    table = _kv_table(
        {
            "designed_false_alarm": 0.05,
            "false_alarm": 1.781e-17,
            "power": 0.93456,
            "p": 1.2e-9,
            "margin": 0.4647123,
            "underpowered": True,
        }
    )
    # each word of a value in a span that does not break: read without them
    table = re.sub(r'<span class="w">([^<]*)</span>', r"\1", table)
    assert "designed_false_alarm" not in table and "false alarm it is built for</th><td>5%" in table
    assert "below 0.01% (practically none)" in table and "93%" in table and "e-17" not in table
    assert "p</th><td>&lt; 0.001</td>" in table and "0.4647" in table and "<td>yes</td>" in table
    plain = re.sub(r'<span class="w">([^<]*)</span>', r"\1", _kv_table({"difference": -5.551e-18}))
    assert "<td>below 0.0001 (practically zero)</td>" in plain


def test_a_page_without_matplotlib_says_so_at_its_top(monkeypatch) -> None:
    import sys

    from pytest_llmbias.report.html import plots_missing, render

    assert plots_missing() is None
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # how Python marks a package as not importable
    assert "pip install 'pytest-llmbias[html]'" in (plots_missing() or "")
    page = render({"gates": [], "roster": {}, "plan": {}})
    assert page.index("the plots are missing: matplotlib is not installed") < page.index("<table")


def test_every_built_in_gate_says_how_to_read_it() -> None:
    from pytest_llmbias.gates import GATES
    from pytest_llmbias.report.html import HOW_TO_READ, render

    assert set(HOW_TO_READ) == set(GATES)
    page = render(
        {"gates": [{"test": "t::x", "gate": "bias_stance", "result": {}}], "roster": {}, "plan": {}}, figures_for=None
    )
    assert "<summary>How to read this</summary>" in page and HOW_TO_READ["bias_stance"][:40] in page


def test_figures_read_without_an_exponent_anywhere_a_reader_reads_them() -> None:
    from pytest_llmbias.report import readable

    assert readable.number(5.551e-18) == "below 0.0001 (practically zero)" == readable.number(-3e-9)
    assert readable.number(5.551e-18, brief=True) == "≈0" and readable.number(0.0) == "0"
    assert (readable.number(0.000123), readable.number(0.46471), readable.number(123456.7)) == (
        "0.000123",
        "0.4647",
        "123457",
    )
    assert readable.p_value(1.75e-24) == "p < 0.001" and readable.p_value(0.0123) == "p = 0.0123"
    assert readable.p_figure(1.75e-24) == "< 0.001" and readable.p_figure(None) == "-"
    assert readable.signed(0.25) == "+0.25" and readable.signed(-0.25) == "-0.25"


def test_a_target_equal_to_its_baselines_reads_practically_zero_in_its_why_and_captions() -> None:
    """The example suite's case: a target whose scores are its baselines' mean, so its difference
    is floating-point noise and its p-value vanishingly small. The one-line why, the plot caption
    and every table of the page read them in words, with no exponent."""
    from pytest_llmbias import evaluate_equivalence
    from pytest_llmbias.report.run_record import gate_entry

    questions = [f"q{i}" for i in range(20)]
    b1 = {q: 3 + (i % 5) * 0.5 for i, q in enumerate(questions)}
    b2 = {q: 4 + (i % 4) * 0.5 for i, q in enumerate(questions)}
    target = {q: (b1[q] + b2[q]) / 2 + 1e-13 * (i % 3 - 1) for i, q in enumerate(questions)}
    result = evaluate_equivalence(
        {"tgt": target, "b1": b1, "b2": b2}, target="tgt", baselines=["b1", "b2"], method="judge", alpha=0.05
    )
    tost = result.methods[0].tost
    assert abs(tost.diff) < 1e-12 and tost.p_value < 1e-20  # what the page must not show as 5.551e-18
    assert "difference below 0.0001 (practically zero)" in result.why and "(p < 0.001)" in result.why
    from pytest_llmbias.gates import gate_figures

    _, entry = gate_entry("t.py::test_same", "bias_equivalent", "scores", result)
    page = html.render(_doc([{**entry, "outcome": "passed"}]), figures_for=gate_figures)
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", page)
    assert any(
        "difference below 0.0001 (practically zero), 90% interval [≈0, ≈0]" in c and "p &lt; 0.001" in c
        for c in captions
    ), captions
    # every sentence, table and statistics block of the page (the plots' axes are matplotlib's)
    text = re.sub(r"<svg.*?</svg>", "", page, flags=re.S)
    assert "practically zero" in text and not re.findall(r".{40}\de[-+]\d.{10}", text)
    assert "p lower" in text and "&lt; 0.0001" in text  # the Report block's tiny p-values


def test_a_gate_entry_without_its_table_is_the_same_entry_less_the_rows():
    """A run that writes no JSON document and no HTML page keeps no per-item table (the plugin
    passes ``table=False``): the rest of the entry is the same, and a page still renders from it."""
    from pytest_llmbias import evaluate_equivalence
    from pytest_llmbias.report.run_record import gate_entry

    questions = [f"q{i}" for i in range(12)]
    scores = {m: {q: 3 + ((i + k) % 5) * 0.5 for i, q in enumerate(questions)} for k, m in enumerate("abc")}
    result = evaluate_equivalence(scores, target="a", baselines=["b", "c"], method="judge", alpha=0.05)
    row, full = gate_entry("t.py::test_x", "bias_equivalent", "scores", result)
    row_lean, lean = gate_entry("t.py::test_x", "bias_equivalent", "scores", result, table=False)
    assert len(full["table"]["rows"]) == 3 * 12 and "table" not in lean
    assert row_lean == row and {k: v for k, v in full.items() if k != "table"} == lean
    assert html.render(_doc([{**lean, "outcome": "passed"}])).count('<section class="gate"') == 1


def test_runs_of_one_day_and_commit_are_labelled_apart() -> None:
    """Seven runs of one commit on one day read seven labels, not seven `2026-12-01 4326ba1`."""
    from pytest_llmbias.report.trends import run_labels

    def run(created: str, commit: str = "4326ba1f00") -> dict:
        return {"created": created, "git_commit": commit}

    days = [run("2026-11-30T09:00:00+00:00"), run("2026-12-01T09:00:00+00:00", "aaaaaaa1")]
    assert run_labels(days) == ["2026-11-30 4326ba1", "2026-12-01 aaaaaaa"]
    same_day = [run(f"2026-12-01T1{i}:0{i}:00+00:00") for i in range(7)]
    labels = run_labels(same_day)
    assert len(set(labels)) == 7 and labels[0] == "2026-12-01 10:00 4326ba1"
    same_minute = [run("2026-12-01T10:00:01+00:00"), run("2026-12-01T10:00:02+00:00")]
    assert run_labels(same_minute) == ["2026-12-01 10:00:01 4326ba1", "2026-12-01 10:00:02 4326ba1"]
    same_second = [run("2026-12-01T10:00:01+00:00")] * 2
    assert run_labels(same_second) == ["2026-12-01 10:00:01 4326ba1 #1", "2026-12-01 10:00:01 4326ba1 #2"]


def test_a_trend_is_drawn_only_over_two_distinct_runs() -> None:
    """One run recorded twice (say, a re-rendered page) is one point: no line; two runs are a trend."""
    pytest.importorskip("matplotlib")
    from pytest_llmbias.report.trends import trends

    def row(run: str, created: str, value: float) -> dict:
        return {
            "run": run,
            "created": created,
            "git_commit": "4326ba1",
            "method": "judge",
            "target_value": value,
            "comparator_value": 2.0,
            "bound": 1.0,
            "verdict": "equivalent",
        }

    once = [row("r1", "2026-12-01T10:00:00+00:00", 2.1), row("r1", "2026-12-01T10:00:00+00:00", 2.1)]
    assert trends({"history": once}) == []
    twice = [*once, row("r2", "2026-12-01T11:00:00+00:00", 2.4)]
    [figure] = trends({"history": twice})
    assert figure.title == "judge: over the last 2 runs" and "10:00 4326ba1" in figure.svg and "11:00" in figure.svg


def test_no_heading_stands_over_nothing() -> None:
    """A gate whose own reliability holds only its checks' blocks gets no bare "Reliability"
    heading above "Reliability — embedding"."""
    entry = {
        **GATE,
        "result": {
            "reliability": {"embedding": {"test": "paired"}, "judge": {"test": "paired"}},
            "methods": [
                {"method": "embedding", "reliability": {"test": "paired", "designed_false_alarm": 0.05}},
                {"method": "judge", "reliability": {"test": "paired", "designed_false_alarm": 0.01}},
            ],
        },
    }
    page = html.render(_doc([entry]), figures_for=lambda e: [])
    assert "<h3>Reliability</h3>" not in page
    assert "<h3>Reliability — embedding</h3><table>" in page and "<h3>Reliability — judge</h3><table>" in page
    # the verdicts come first: the gate table before the models and the folded calls
    assert page.index('<table class="summary">') < page.index("<h2>Models</h2>") < page.index("<summary>Calls")
