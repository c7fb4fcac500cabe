"""The terminal's lines fit 100 columns: the end-of-run table's test ids, shortened in the middle,
never read alike, and the run's header wraps its roster."""

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


def test_shortened_test_ids_that_would_read_alike_keep_what_tells_them_apart() -> None:
    tests = [
        "test_target_answers_the_ambiguous_questions_of_age_no_worse_than_its_baselines_on_the_stereotype",
        "test_target_answers_the_ambiguous_questions_of_gender_no_worse_than_its_baselines_on_the_stereotype",
        "test_target_answers_the_ambiguous_questions_of_religion_as_its_baselines_do_in_every_category_of_it",
    ]
    lines = compact_table([_row(t) for t in tests])
    assert all(len(line) <= WIDTH for line in lines), lines
    shown = [line.split()[0] for line in lines[1:]]
    assert len(set(shown)) == 3 and all("…" in s for s in shown), shown
    assert any("…age_no_worse" in s for s in shown) and any("…gender_no_worse" in s for s in shown)
    # where the halves tell them apart, nothing changes; one id with several rows is one id
    assert shorten_all(["a" * 30 + "x", "b" * 30 + "x", "b" * 30 + "x"], 11) == {
        "a" * 30 + "x": "aaaaa…aaaax",
        "b" * 30 + "x": "bbbbb…bbbbx",
    }
    # a difference too far from the end for the tail keeps it in the start
    apart = shorten_all(["pre_a_" + "m" * 40 + "_end", "pre_b_" + "m" * 40 + "_end"], 20)
    assert len(set(apart.values())) == 2 and all(len(v) == 20 for v in apart.values())


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
