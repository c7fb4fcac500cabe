"""The run in Markdown: the summary, the items that moved most with both answers, and answers
that try to break the Markdown or inject HTML."""

from __future__ import annotations

from pytest_llmbias.report.markdown import escape, markdown_report

HOSTILE = (
    "| broken | table |\n# Heading\n<script>alert(1)</script> [click](javascript:alert(1)) "
    "![img](http://x/y.png) **bold** `code` &amp; " + "long " * 100
)


def _entry(**moved) -> dict:
    item = {
        "method": "judge",
        "item": "q7",
        "target": 8.0,
        "comparator": 3.0,
        "delta": 5.0,
        "target_text": HOSTILE,
        "comparator_text": "A balanced answer.",
        "comparator_alias": "release-v1",
        **moved,
    }
    return {
        "test": "t.py::test_gate",
        "gate": "bias_equivalent",
        "passed": False,
        "verdict": "biased",
        "row": {
            "methods": [
                {"method": "judge", "target": 6.1, "baselines": 4.0, "bound": 0.9, "p": 0.98, "verdict": "biased"}
            ]
        },
        "result": {
            "why": "the target's scores rose",
            "target": "tgt",
            "baselines": ["release-v1"],
            "moved": [item, {**item, "item": "q2", "delta": 1.0}],
            "warnings": ["mind <this>"],
        },
    }


def test_hostile_answers_stay_inert_text() -> None:
    text = markdown_report([_entry()])
    cell = escape(HOSTILE, 160)
    assert "\n" not in cell and len(cell) < 400 and cell.endswith("…")
    assert "<script>" not in text and "&lt;script&gt;" in text and "mind &lt;this&gt;" in text
    assert "[click]" not in text and "\\[click\\]\\(javascript\\:alert\\(1\\)\\)" in text
    assert "| broken |" not in text and "\\| broken \\|" in text
    assert "\n# Heading" not in text and "\\# Heading" in text
    assert "&amp;amp;" in text  # an entity in an answer shows as written, not as the character
    for line in text.splitlines():
        if line.startswith("| q7"):
            assert line.count(" | ") == 5  # six cells: the answers' pipes are escaped


def test_the_report_lists_the_moves_worse_first() -> None:
    text = markdown_report([_entry()], moved=1)
    assert (
        text.startswith("## pytest-llmbias\n")
        and "| t\\.py\\:\\:test\\_gate | failed | **biased** | judge | 6\\.1 |" not in text
    )
    assert "| t\\.py\\:\\:test\\_gate | failed | **biased** | judge | 6.1 | 4 | 0.9 | 0.98 |" in text
    assert "### t\\.py\\:\\:test\\_gate: BIASED" in text and "target tgt against release\\-v1" in text
    assert "What moved most (judge; the target's score minus release\\-v1's, worse first):" in text
    assert "| q7 | 3 | 8 | +5 | A balanced answer\\. |" in text and "| q2 |" not in text  # moved=1
    assert "\n1 gate: 1 failed.\n" in text


def test_figures_read_without_an_exponent() -> None:
    entry = _entry()
    entry["row"]["methods"][0].update(p=1.75e-24, bound=5.551e-18)
    text = markdown_report([entry])
    assert "| 6.1 | 4 | ≈0 | &lt; 0.001 |" in text and "e-" not in text
