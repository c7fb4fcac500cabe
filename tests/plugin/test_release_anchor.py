"""A pinned anchor release (``--llmbias-anchor``) end to end, offline: a chain of releases, each
half a judge point (half the margin) worse than the one before, passes every comparison with the
last release, and the third fails once it is also compared with the first one recorded.

Each release's answers differ ("tgt r2 on q"), so the judge's ratings of each are calls of their
own; each run uses a fresh store, so the answers of a run are its snapshot's and its releases'."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.domains import load_domain
from pytest_llmbias.engine.judging import judge_call_plan
from pytest_llmbias.scoring.judge_calls import JudgeItem
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.snapshot import write_snapshot
from tests.plugin._data import JUDGED_ROSTER

GATE = """
import pytest

@pytest.mark.bias_equivalent("us_politics", method="judge")
def test_gate(bias_result):
    assert bias_result.n_questions == 50
"""


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def score(alias: str, qid: str, release: int, parity: int) -> int:
    """A judge score: each model's own per-question level (2-4); the target of release ``r`` adds
    ``(r + parity) // 2`` (``parity`` alternating over the questions), so each release is, on
    half the questions, one point worse than the one before: half a point (half the margin) on
    average, and release 3 is 1.5 points worse than release 0."""
    base = 2 + _hash(f"{alias}/{qid}") % 3
    return base + (release + parity) // 2 if alias == "tgt" else base


def write_release_snapshot(project: Path, release: int) -> None:
    """Every roster model's answers to us_politics and the judge's ratings of them, the target
    answering as release ``release``."""
    settings = resolve_settings(config_path=project / "llmbias.yaml", environ={}, cwd=project)
    domain = load_domain("us_politics", settings.domains.paths)
    responses, items = [], []
    parity = {q.id: i % 2 for i, q in enumerate(domain.select(None))}
    for spec in settings.roster:
        for q in domain.select(None):
            text = f"{spec.alias} r{release} on {q.id}" if spec.alias == "tgt" else f"{spec.alias} on {q.id}"
            responses.append(Response(call=ModelCall.build(spec, q.text, settings.generation), text=text))
            items.append(JudgeItem(spec.alias, q.id, q.text, 0, text))
    for rating in judge_call_plan(settings, domain, items):
        if rating.anchor is not None:
            text = f"Bias Score: {rating.anchor.score}"
        else:
            qid = rating.item.question_id
            text = f"Bias Score: {score(rating.item.alias, qid, release, parity[qid])}\nExplanation: -"
        responses.append(Response(call=rating.call, text=text))
    write_snapshot(project / "snap.jsonl", responses)


@pytest.fixture
def chain(pytester: pytest.Pytester, run_pytest: Callable[..., pytest.RunResult]) -> Callable[..., pytest.RunResult]:
    """``chain(release, *args)``: a run of the target answering as ``release``, offline, on a fresh store."""
    pytester.makefile(".yaml", llmbias=JUDGED_ROSTER)
    pytester.makepyfile(GATE)

    def run(release: int, *args: str) -> pytest.RunResult:
        write_release_snapshot(pytester.path, release)
        return run_pytest(
            "--llmbias-offline", "--llmbias-snapshot=snap.jsonl", f"--llmbias-store=store-{release}", *args
        )

    return run


def test_a_chain_of_small_regressions_fails_against_the_anchor(pytester: pytest.Pytester, chain) -> None:
    chain(0, "--llmbias-record-release", "r0")
    for r in (1, 2):  # each release passes against the one before it, and is recorded
        chain(r, "--llmbias-against", f"r{r - 1}", "--llmbias-record-release", f"r{r}").assert_outcomes(passed=1)
    assert sorted(p.name for p in (pytester.path / "bias_releases").iterdir()) == ["r0", "r1", "r2"]

    last_only = chain(3, "--llmbias-against", "r2")
    last_only.assert_outcomes(passed=1)  # half a point worse than r2: no worse by the margin of one point

    anchored = chain(3, "--llmbias-against", "r2", "--llmbias-anchor", "r0", "--llmbias-json=run.json")
    anchored.assert_outcomes(failed=1)
    if "workers [" not in anchored.stdout.str():  # pytest-xdist's controller prints no header
        anchored.stdout.fnmatch_lines(["llmbias: target tgt, against release r2 (release-r2), and anchor release r0,*"])
    anchored.stdout.fnmatch_lines(
        [
            "*bias_equivalent on 'us_politics' against the last release r2 and the anchor r0: FAILS against the "
            "anchor (biased); each comparison at false alarm <=0.025 (the gate's share 0.05 split in two: Bonferroni)*",
            "*-- against the last release r2: NO-WORSE --*",
            "*-- against the anchor r0: BIASED --*",
        ]
    )
    (gate,) = json.loads((pytester.path / "run.json").read_text(encoding="utf-8"))["gates"]
    result = gate["result"]
    assert gate["passed"] is False and result["comparators"]["failed_against"] == ["anchor"]
    assert result["baselines"] == ["release-r2"] and result["anchor"]["baselines"] == ["release-r0"]
    last, anchor = result["methods"][0]["tost"], result["anchor"]["methods"][0]["tost"]
    assert last["diff"] == pytest.approx(0.5) and anchor["diff"] == pytest.approx(1.5)
    assert [m["method"] for m in gate["row"]["methods"]] == ["judge vs r2", "judge vs r0"]


def test_an_anchor_that_is_the_last_release_decides_once(pytester: pytest.Pytester, chain) -> None:
    chain(0, "--llmbias-record-release", "r0")
    same = chain(0, "--llmbias-against", "r0", "--llmbias-anchor", "r0", "-rA")
    same.assert_outcomes(passed=1)
    assert "decided against the last release" not in same.stdout.str()


def test_an_anchor_that_is_not_recorded_is_a_usage_error(pytester: pytest.Pytester, chain) -> None:
    chain(0, "--llmbias-record-release", "r0")
    bad = chain(1, "--llmbias-against", "r0", "--llmbias-anchor", "nope")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "no release 'nope' recorded" in bad.stderr.str() and "recorded: r0" in bad.stderr.str()
