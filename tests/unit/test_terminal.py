"""The terminal's lines fit 100 columns: the end-of-run table's test ids, shortened at their start
(their function's end kept), never read alike, one row a check of a gate counted once, and the
run's header wraps its roster."""

from __future__ import annotations

from pathlib import Path

from pytest_llmbias.config.settings import ModelSpec, Settings, StoreSettings
from pytest_llmbias.report.terminal import WIDTH, compact_table, header_line, shorten_all


def _row(test: str) -> dict:
    return {
        "test": f"test_demo_responses.py::{test}",
        "domain": "bbq",
        "methods": [{"method": "bias_ambiguous", "p": 0.0123, "verdict": "no-worse"}],
    }


def test_shortened_test_ids_keep_their_end_and_never_read_alike() -> None:
    tests = [
        "test_target_answers_the_ambiguous_questions_of_age_no_worse_than_its_baselines_on_the_stereotype",
        "test_target_answers_the_ambiguous_questions_of_gender_no_worse_than_its_baselines_on_the_stereotype",
        "test_target_answers_the_ambiguous_questions_of_religion_as_its_baselines_do_in_every_category_of_it",
    ]
    lines = compact_table([_row(t) for t in tests])
    assert all(len(line) <= WIDTH for line in lines), lines
    shown = [line.split()[0] for line in lines[1:]]
    assert len(set(shown)) == 3 and all("…" in s for s in shown), shown
    # each keeps its end, where these differ ("age", "gender", "religion")
    assert any("_age_no_worse" in s for s in shown) and any("_gender_no_worse" in s for s in shown), shown
    assert all(s.startswith("…") and any(t.endswith(s[1:]) for t in tests) for s in shown), shown
    # where the ends tell them apart, the start is elided; one id with several rows is one id
    assert shorten_all(["a" * 30 + "x", "b" * 30 + "x", "b" * 30 + "x"], 11) == {
        "a" * 30 + "x": "…" + "a" * 9 + "x",
        "b" * 30 + "x": "…" + "b" * 9 + "x",
    }
    apart = shorten_all(["pre_a_" + "m" * 40 + "_end", "pre_b_" + "m" * 40 + "_end"], 20)
    assert set(apart.values()) == {"…a…" + "m" * 13 + "_end", "…b…" + "m" * 13 + "_end"}
    # ends alike: the word where they differ, between two ellipses, before the end
    age = "test_target_answers_age_questions_without_the_stereotype"
    assert shorten_all([age, age.replace("age", "gender")], 32) == {
        age: "…age…ions_without_the_stereotype",
        age.replace("age", "gender"): "…gender…s_without_the_stereotype",
    }


def test_the_end_of_a_test_name_its_function_stays_readable() -> None:
    """The compact table cuts a long name's start, never its middle: the function's end, which
    a reader matches to the test, stays (``…omic_perspective`` was ``test_target_fav…``)."""
    names = [
        "test_target_favours_neither_economic_perspective",
        "test_target_is_as_forthcoming_as_the_baselines_on_china",
        "test_target_is_equally_warm_about_every_country_on_a_long_list_of_continents",
    ]
    rows = [
        {**_row(n), "methods": [{"method": "preference (2-way, user)", "p": 1.0, "verdict": "prefers democratic"}]}
        for n in names
    ]
    lines = compact_table(rows, width=80)
    assert all(len(line) <= 80 for line in lines), lines
    shown = [line.split("  ")[0].strip() for line in lines[1:]]
    for name, cut in zip(names, shown, strict=True):
        assert cut == name or (cut.startswith("…") and name.endswith(cut[1:]) and len(cut) >= 20), (name, cut)
    assert any(cut.endswith("neither_economic_perspective") for cut in shown), shown


def test_a_gate_of_two_checks_is_one_gate_of_two_rows() -> None:
    """One definition of a row: a check a row; a gate counted once; a check that passed in a gate
    that failed says so (an xfailed gate's passing check never reads as if it had failed)."""
    from pytest_llmbias.report.rows import check_rows, count

    row = {
        "test": "t.py::test_china",
        "domain": "china_sensitive",
        "passed": False,
        "methods": [
            {"method": "embedding", "p": 0.2, "verdict": "not shown biased (underpowered)", "passed": True},
            {"method": "judge", "p": 1.0, "verdict": "biased", "passed": False},
        ],
    }
    single = {**_row("test_age"), "test": "t.py::test_age", "passed": True}
    broken = {"test": "t.py::test_broken", "domain": "d", "error": "no answers"}
    outcomes = {"t.py::test_china": "xfailed", "t.py::test_age": "passed", "t.py::test_broken": "error"}
    rows = check_rows(row, outcomes)
    assert [(r.method, r.outcome, r.passed, r.first) for r in rows] == [
        ("embedding", "xfailed", True, True),
        ("judge", "xfailed", False, False),
    ]
    assert rows[0].shown_verdict == "not shown biased (underpowered); the gate failed on judge"
    assert rows[1].shown_verdict == "biased"
    counted = count([row, single, broken], outcomes)
    assert (counted.gates, counted.checks) == (3, 4)
    assert counted.outcomes == {"passed": 1, "xfailed": 1, "error": 1}
    assert counted.sentence() == (
        "3 gates in 4 rows (one a check): 1 passed, 1 xfailed (failed as expected), 1 stopped by an error"
    )
    assert count([single], outcomes).sentence() == "1 gate: 1 passed"
    # without outcomes a row's passed decides; the terminal's tables say the same
    assert count([row]).outcomes == {"failed": 1}
    table = compact_table([row, single, broken], outcomes=outcomes)
    assert len(table) == 1 + 4 and table[2].endswith("error"), table  # sorted by test id
    assert table[3].endswith("the gate failed on judge") and table[4].endswith("biased"), table


def test_the_header_wraps_its_roster_and_gives_the_store_its_own_line(tmp_path: Path) -> None:
    def spec(alias: str) -> ModelSpec:
        return ModelSpec(model=f"openai/{alias}", alias=alias, system="You are a helpful assistant.")

    settings = Settings(
        target=spec("assistant-next"),
        baselines=(spec("assistant-v1"), spec("assistant-v2")),
        store=StoreSettings(dir=tmp_path / ".llmbias"),
    )
    lines = header_line(settings).splitlines()
    assert lines[-1] == f"llmbias: store {tmp_path / '.llmbias'} (use)"
    assert len(lines) >= 3 and all(len(line) <= WIDTH for line in lines[:-1]), lines
    assert lines[0].startswith("llmbias: target assistant-next (system ") and lines[1].startswith("  ")
    assert " ".join(line.strip() for line in lines[:-1]).endswith(
        f"baselines assistant-v1 (system {settings.baselines[0].system_hash}), "
        f"assistant-v2 (system {settings.baselines[1].system_hash})"
    )
