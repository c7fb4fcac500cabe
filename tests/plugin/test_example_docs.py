"""What the getting-started page says of the example suite's run is what the run prints: its
outcomes, the plugin's count of its gates, its summary line and how many ``LLMBiasWarning``s it
shows (a page that said "no test warns" over six warnings is caught here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
NUMBERS = {"no": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}


def _said(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.xdist_group("example")
def test_the_getting_started_page_says_what_the_example_run_prints(example_run):
    page = _said(PAGE.read_text(encoding="utf-8"))
    out = example_run.result.stdout.str()
    printed = _said(out)
    # the outcomes pytest prints
    outcomes = re.search(r"^=+ (\d+ passed, \d+ xfailed)", out, re.M)
    assert outcomes is not None and f'ends "{outcomes.group(1)}"' in page, outcomes
    # the plugin's count of its gates, as its table's last line
    [counted] = [
        line.removeprefix("llmbias: ") for line in out.splitlines() if re.match(r"llmbias: \d+ gates in", line)
    ]
    assert f'"{counted}"' in page, counted
    # the summary line, quoted from its design on
    quoted = re.search(r'summary line reads "([^"]+)"', page)
    assert quoted is not None and quoted.group(1) in printed, quoted
    # the warnings: as many as the page says, none if it says no test warns
    warned = out.count("LLMBiasWarning:")
    said = re.search(r"(\w+) `LLMBiasWarning`s", page)
    assert said is not None and NUMBERS[said.group(1).lower()] == warned, (said, warned)
    assert "no test warns" not in page or warned == 0
