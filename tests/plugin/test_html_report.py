"""The HTML report (``--llmbias-html``, ``llmbias report RUN.json --html``) in a real headless
Chromium: it renders with no script error and no request, every gate has its section and plots,
and a model's answer that holds markup shows as text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import open_page
from tests.plugin._data import loaded_on

#: plots each gate draws on the example suite (per method for bias_equivalent)
PLOTS = {
    "bias_equivalent": 3,
    "bias_impact_ratio": 2,
    "bias_index": 3,
    "bias_stance": 2,
    "bias_preference": 2,
    "bias_benchmark": 2,
}


@pytest.mark.xdist_group("example")
def test_the_example_suite_report_renders_in_chromium(example_run, tmp_path: Path):
    """The report of the example suite's run (the ``example_run`` fixture: in its own process,
    offline, with ``--llmbias-json`` and ``--llmbias-html``)."""
    project, result, report = example_run.project, example_run.result, example_run.html
    result.assert_outcomes(passed=9, xfailed=8)
    result.stdout.fnmatch_lines([f"*llmbias: the run's HTML report is written to {report}*"])

    import json

    gates = json.loads((project / "out" / "run.json").read_text())["gates"]
    with open_page(report) as visit:
        page = visit.page
        assert page.get_attribute("body", "data-ready") == "true"  # its script ran to the end
        # it fits a 1280-pixel window: no horizontal scrolling, no element wider than the viewport
        page.set_viewport_size({"width": 1280, "height": 800})
        wide = page.evaluate(
            "() => [...document.querySelectorAll('body *')].filter("
            "e => e.getBoundingClientRect().right > window.innerWidth + 1).map("
            "e => e.tagName + '.' + e.className).slice(0, 5)"
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280 and wide == [], wide
        # legible plots: every label and legend entry at least 10 CSS pixels high as drawn (a wide
        # plot scaled down to the window shrinks its text with it)
        small = page.evaluate(
            "() => [...document.querySelectorAll('svg.plot text')].map(t => [t.textContent,"
            " parseFloat(getComputedStyle(t).fontSize) * Math.hypot(t.getScreenCTM().a,"
            " t.getScreenCTM().b)]).filter(([, px]) => px < 9.95).slice(0, 5)"
        )
        assert small == [], small
        # no number, badge or one-word header of the summary breaks across lines ("0.066 / 67",
        # "pas / sed", "tar / get" at 1280 px when the test ids took the width)
        broken = page.evaluate(
            "() => [...document.querySelectorAll('table.summary td.num, table.summary .badge, "
            "table.summary th')].filter(e => !e.textContent.trim().includes(' ')).filter(e => {"
            " const r = document.createRange(); r.selectNodeContents(e);"
            " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1;"
            " }).map(e => e.textContent).slice(0, 5)"
        )
        assert page.locator("table.summary td.num").count() > 0 and broken == [], broken
        # no word of any table breaks inside itself ("bias_ben / chmark", "~ / <0.1%"): lines
        # break between words, after a hyphen or a slash, and a test id at its <wbr>s
        assert page.evaluate(BROKEN_WORDS) == []
        # the first screen answers the question: the gate table starts above the fold at 1280 x 900,
        # the calls below it, folded; no heading stands over nothing
        page.set_viewport_size({"width": 1280, "height": 900})
        assert page.evaluate("document.querySelector('table.summary').getBoundingClientRect().top") < 900 - 100
        calls = page.locator("details", has=page.locator("summary", has_text="Calls"))
        assert calls.count() == 1 and not calls.first.evaluate("e => e.open")
        assert page.evaluate(
            "document.querySelector('table.summary').compareDocumentPosition(document.querySelector('details')) & 4"
        )
        assert page.evaluate(EMPTY_HEADINGS) == []
        page.set_viewport_size({"width": 1280, "height": 800})
        # a test id wraps only at its word boundaries (after '_', '::', '/'), never inside a word
        ids = page.evaluate(
            "() => [...document.querySelectorAll('table.summary td:first-child a')].map(a => {"
            " const r = document.createRange(); const t = a.firstChild; const out = [];"
            " for (const n of a.childNodes) { if (n.nodeType !== 3) continue;"
            "   r.selectNodeContents(n);"
            "   if (new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1)"
            "     out.push(n.textContent); }"
            " return out; }).flat().slice(0, 5)"
        )
        assert ids == [], ids
        # on a 390-pixel phone the summary scrolls sideways inside its box: no digit wraps, the page does not widen
        page.set_viewport_size({"width": 390, "height": 800})
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        box = page.locator("table.summary").first
        assert box.evaluate("e => e.scrollWidth > e.clientWidth")
        narrow = page.evaluate(
            "() => [...document.querySelectorAll('table.summary td.num')].filter(e => {"
            " const r = document.createRange(); r.selectNodeContents(e);"
            " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1;"
            " }).map(e => e.textContent).slice(0, 5)"
        )
        assert narrow == [], narrow
        page.set_viewport_size({"width": 1280, "height": 800})
        sections = page.locator("section.gate")
        assert sections.count() == len(gates) == 13
        for i, gate in enumerate(gates):
            section = page.locator(f"#gate-{i}")
            assert section.get_attribute("data-gate") == gate["gate"]
            assert gate["test"] in section.locator("h2").inner_text()
            plots = section.locator("svg.plot")
            per_method = len(gate["result"]["methods"]) if gate["gate"] == "bias_equivalent" else 1
            assert plots.count() >= PLOTS[gate["gate"]] * per_method, gate["test"]
            assert plots.first.bounding_box()["height"] > 50  # drawn, not an empty element
        assert {s.get_attribute("data-gate") for s in sections.all()} == set(PLOTS)
        assert page.locator("text=could not be drawn").count() == 0
        # the summary: a row per check, a gate (one link, its outcome spanning its checks) counted
        # once, as the JSON document and the terminal count it
        checks = sum(len(g["row"]["methods"]) for g in gates)
        assert page.locator("table.summary tr").count() == 1 + checks
        assert page.locator("table.summary a[href^='#gate-']").count() == len(gates)
        assert page.locator("table.summary .badge").count() == len(gates)
        document = json.loads((project / "out" / "run.json").read_text())
        assert document["counts"] == {
            "gates": 13,
            "checks": 14,
            "outcomes": {"passed": 6, "xfailed": 7},
            "sentence": "13 gates in 14 rows (one a check): 6 passed, 7 xfailed (failed as expected)",
        }
        assert page.locator("p.counts").inner_text() == document["counts"]["sentence"] + "."
        result.stdout.fnmatch_lines([f"llmbias: {document['counts']['sentence']}"])
        for line in ("acme (target)", "orbit"):
            assert page.locator(f"text={line}").count() >= 1
        # the script's one control: show only the gates that did not pass
        passed = sum(1 for g in gates if g["passed"])
        assert 0 < passed < len(gates)
        page.check("#failing-only")
        assert page.locator("section.gate:visible").count() == len(gates) - passed
        page.uncheck("#failing-only")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        assert visit.errors == [] and visit.console == []
        assert visit.requests == [report.resolve().as_uri()]  # self-contained: nothing else is fetched
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The saved document re-renders to the same page, without the run and without any model.
    from pytest_llmbias.cli.command import main

    again = tmp_path / "again.html"
    assert main(["report", str(project / "out" / "run.json"), "--html", str(again)]) == 0
    assert again.read_text() == report.read_text()


#: the words (runs of characters between spaces, hyphens and slashes) of every table cell whose
#: characters lie on more than one line
BROKEN_WORDS = """() => {
  const out = [];
  for (const cell of document.querySelectorAll('table td, table th')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const words = /[^\\s\\-\\/]+/g;
      for (let m = words.exec(n.textContent); m; m = words.exec(n.textContent)) {
        const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
        if (tops.size > 1) out.push(m[0]);
      }
    }
  }
  return out.slice(0, 5);
}"""
#: headings followed by another heading of the same or a higher level, or by nothing
EMPTY_HEADINGS = """() => [...document.querySelectorAll('h1, h2, h3')].filter(h => {
  const next = h.nextElementSibling;
  return !next || (/^H[1-3]$/.test(next.tagName) && next.tagName <= h.tagName);
}).map(h => h.textContent)"""


def _scripted(alias: str, question: str, sample: int = 0) -> str:
    """The target's loaded answers on the `speech` dimension carry markup."""
    text = loaded_on("speech")(alias, question, sample)
    if alias == "tgt" and question == "spe-1":
        return "<script>window.__pwned = 1</script> " + text
    if alias == "tgt" and question == "spe-3":
        return "<img src=x onerror='window.__pwned = 2'> " + text
    return text


def test_an_answer_that_holds_markup_shows_as_text(pytester: pytest.Pytester, dims_project, run_pytest_once):
    dims_project(_scripted)
    pytester.makepyfile("""
        import pytest

        @pytest.mark.bias_index("dims")
        def test_index(bias_result):
            pass
    """)
    result = run_pytest_once("--llmbias-offline", "--llmbias-snapshot=snap.jsonl", "--llmbias-html=report.html")
    result.assert_outcomes(failed=1)
    report = pytester.path / "report.html"
    source = report.read_text()
    assert "<script>window.__pwned" not in source and "<img src=x" not in source
    with open_page(report) as visit:
        text = visit.page.inner_text("section.gate pre")
        assert "<script>window.__pwned = 1</script>" in text
        assert "<img src=x onerror='window.__pwned = 2'>" in text
        assert visit.page.evaluate("typeof window.__pwned") == "undefined"
        assert visit.errors == [] and visit.console == []
        assert visit.requests == [report.resolve().as_uri()]
