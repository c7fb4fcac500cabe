"""The judges and the judging section, from every source."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmbias.choices import JudgeCombine
from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.errors import ConfigError

ROSTER = "target: openai/t\nbaselines: [openai/a, openai/b]\n"


def resolve(tmp_path: Path, text: str, **kw) -> object:
    path = tmp_path / "llmbias.yaml"
    path.write_text(ROSTER + text, encoding="utf-8")
    return resolve_settings(config_path=path, environ=kw.pop("environ", {}), cwd=tmp_path, **kw)


def test_a_panel_from_the_file_and_its_judging_section(tmp_path: Path) -> None:
    s = resolve(
        tmp_path,
        "judges: [openai/j1, {model: openai/j2, alias: second}]\n"
        "judging: {combine: median, retest: 0, min_agreement: 0.6}\n",
    )
    assert [j.alias for j in s.panel] == ["j1", "second"] and s.judge is s.panel[0]
    assert s.judging.combine == JudgeCombine.MEDIAN and s.judging.retest == 0 and s.judging.min_agreement == 0.6
    assert resolve(tmp_path, "judge: openai/j\n").panel == (resolve(tmp_path, "judge: openai/j\n").judge,)
    assert resolve(tmp_path, "").judging.retest == 20 and resolve(tmp_path, "").judging.min_agreement == 0.5


def test_a_panel_given_outside_the_file_replaces_its_judge(tmp_path: Path) -> None:
    s = resolve(tmp_path, "judge: openai/j\n", cli={"judge_panel": ["openai/x", "openai/y"], "judge_combine": "mean"})
    assert [j.alias for j in s.panel] == ["x", "y"] and s.judge.alias == "x"
    s = resolve(
        tmp_path,
        "",
        environ={
            "LLMBIAS_JUDGE_PANEL": "openai/x,openai/y",
            "LLMBIAS_JUDGE_RETEST": "5",
            "LLMBIAS_MIN_JUDGE_AGREEMENT": "0.7",
        },
    )
    assert [j.alias for j in s.panel] == ["x", "y"] and s.judging.retest == 5 and s.judging.min_agreement == 0.7
    s = resolve(tmp_path, "", ini={"judge_panel": ["openai/x", "openai/y"], "judge_retest": "0"})
    assert len(s.panel) == 2 and s.judging.retest == 0


@pytest.mark.parametrize(
    ("text", "kw", "message"),
    [
        (
            "judge: openai/j\njudges: [openai/a1, openai/a2]\n",
            {},
            r"llmbias.yaml:\d+: give 'judge' \(one judge\) or 'judges'",
        ),
        (
            "judge: openai/j\njudging: {combine: mean}\n",
            {},
            r"llmbias.yaml:\d+: 'judging.combine' combines the scores of several judges.*only one judge is given",
        ),
        # given on the command line, the error names the option, not the file
        (
            "judge: openai/j\n",
            {"cli": {"judge_combine": "median"}},
            r"^--llmbias-judge-combine: 'judging.combine' combines the scores of several judges",
        ),
        ("judges: [openai/a, openai/j]\n", {}, r"judges\[0\] has the alias 'a' of a baseline"),
        ("judges: openai/j\n", {}, r"'judges' must be a list of models"),
        ("judging: {retest: -1}\n", {}, r"'judging.retest' must be a non-negative integer"),
        ("judging: {min_agreement: 1}\n", {}, r"'judging.min_agreement' must be a share in \[0, 1\)"),
        ("judging: {combine: mode}\n", {}, r"'judging.combine' must be one of mean \| median"),
        ("judging: {rubric: none.yaml}\n", {}, r"'judging.rubric': .*none.yaml: no rubric file there"),
        ("judging: {retests: 1}\n", {}, r"unknown key 'judging.retests'"),
        ("", {"environ": {"LLMBIAS_JUDGE_RETEST": "many"}}, r"\$LLMBIAS_JUDGE_RETEST: 'judging.retest' must be"),
    ],
)
def test_bad_judging_settings_name_the_key_and_where(tmp_path: Path, text: str, kw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(tmp_path, text, **kw)
