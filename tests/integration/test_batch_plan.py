"""Batch mode's rounds and money in the plan: ``--llmbias-plan --llmbias-batch`` shows the rounds
(the answers, then the judge's ratings of them), the calls in each and their cost at batch prices
beside standard prices; without ``--llmbias-batch`` the plan says what batch mode would cost.
Against the local server, with model names litellm's offline price map knows (gpt-3.5-turbo: a
standard price, no batch price)."""

from __future__ import annotations

import json
import re

from tests.integration._data import QUIET, entry

MODELS = {"tgt": "gpt-4o-mini", "base_a": "gpt-4o", "base_b": "gpt-4.1-mini", "base_c": "gpt-3.5-turbo"}

TESTS = """
import pytest


@pytest.mark.bias_equivalent("us_politics", method="judge", categories=["gun_policy"])
def test_guns(bias_result):
    pass
"""


def _write(pytester, base_url: str) -> None:
    config = {
        "target": entry("tgt", MODELS["tgt"], base_url),
        "judge": entry("judge", "gpt-4o-mini", base_url),
        "baselines": [entry(a, MODELS[a], base_url) for a in ("base_a", "base_b", "base_c")],
        "generation": {"max_tokens": 100},
        "collection": {"max_samples": 1},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_suite.py").write_text(TESTS, encoding="utf-8")


def _dollars(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"\$(\d+\.\d+)", line)]


def test_the_batch_plan_shows_the_rounds_and_both_prices_and_calls_nothing(pytester, server):
    _write(pytester, server.base_url)
    plan = pytester.runpytest_inprocess(*QUIET, "--llmbias-plan", "--llmbias-batch")
    assert plan.ret == 0
    plan.stdout.fnmatch_lines(
        [
            "*model*calls*stored*to fetch*est. tokens*est. cost*at batch prices*",
            "*base_c (openai/gpt-3.5-turbo)*(no batch price)*",
            "*total estimated cost: $* at standard prices, $* at batch prices*",
            "*no batch price in litellm's map for openai/gpt-3.5-turbo, counted at standard prices*",
            "*batch rounds (--llmbias-batch*",
            "*round*calls*est. cost*at batch prices*",
            "*1 *$*$*",
            "*2 *$*$*",
        ]
    )
    out = plan.stdout.lines
    total = next(line for line in out if "total estimated cost" in line)
    standard, cheap = _dollars(total)
    assert 0 < cheap < standard
    rows = {}
    for line in out[out.index(next(x for x in out if "batch rounds" in x)) + 2 :]:
        cells = line.split()
        if len(cells) < 4 or not cells[0].isdigit():
            break
        rows[int(cells[0])] = (int(cells[1]), *_dollars(line))
    assert sorted(rows) == [1, 2]  # the answers, then the judge's ratings of them
    answers, ratings = rows[1][0], rows[2][0]
    judge = next(line for line in out if line.strip().startswith("judge ("))
    assert int(judge.split()[3]) == ratings  # the judge's follow-ups: its ratings, all in round 2
    fetched = sum(int(line.split()[5]) for line in out if "(openai/" in line)
    probes = int(re.search(r"of the calls to fetch, (\d+) are fingerprint probes", plan.stdout.str())[1])  # type: ignore[index]
    assert answers + ratings + probes == fetched  # every call to fetch in a round, the probes asked as ever
    assert all(r[2] < r[1] for r in rows.values())  # cheaper at batch prices, round by round
    assert answers > 0 and server.count() == 0


def test_the_ordinary_plan_says_what_batch_mode_would_cost(pytester, server):
    _write(pytester, server.base_url)
    plan = pytester.runpytest_inprocess(*QUIET, "--llmbias-plan")
    assert plan.ret == 0
    plan.stdout.fnmatch_lines(
        [
            "*total estimated cost: $*",
            "*at batch prices: $* (--llmbias-batch); no batch price in litellm's map for openai/gpt-3.5-turbo*",
        ]
    )
    text = plan.stdout.str()
    assert "batch rounds" not in text and "at batch prices  " not in text
    standard = _dollars(next(line for line in plan.stdout.lines if "total estimated cost" in line))[0]
    cheap = _dollars(next(line for line in plan.stdout.lines if "at batch prices: $" in line))[0]
    assert 0 < cheap < standard and server.count() == 0
