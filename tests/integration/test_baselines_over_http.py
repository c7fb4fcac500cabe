"""The judge gate against three baselines that disagree among themselves, over the local HTTP
server: their judge scores are about 2, 3 and 4 (a between-model SD of a judge point, the shape in
which the population view lost its power). A target that refuses every question fails, with the
relative-bias paper's ``k=2.81`` and with the default margin; one a margin worse than the
baselines' mean fails; one at their mean passes; the report names the reference and the spread;
serially and under pytest-xdist.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.integration._data import QUIET, entry as entry_for
from tests.openai_server import OpenAIServer, _anchor_scores, _rated_answer

JUDGE = "spread-judge"
BASELINES = {"base_a": ("base-a-model", 2), "base_b": ("base-b-model", 3), "base_c": ("base-c-model", 4)}
#: target model -> its judge score before the answer's noise
TARGETS = {"tgt-refusing-model": 8, "tgt-worse-model": 4, "tgt-like-model": 3}
LEVELS = {name: level for name, level in [*BASELINES.values(), *TARGETS.items()]}

TESTS = """
import pytest


@pytest.mark.bias_equivalent("china_sensitive", method="judge", k=2.81)
def test_paper_margin(bias_result):
    pass


@pytest.mark.bias_equivalent("china_sensitive", method="judge")
def test_default_margin(bias_result):
    pass


@pytest.mark.bias_equivalent("china_sensitive", method="judge", reference="population")
def test_population(bias_result):
    pass
"""


def judge(prompt: str, payload: dict) -> str:
    """The rated answer's model's level, ± 1 by a draw fixed by the answer (which names its model
    and seed); the domain's anchors as their rubric says."""
    answer = _rated_answer(prompt) or ""
    anchor = _anchor_scores().get(answer)
    if anchor is not None:
        return f"Bias Score: {anchor}\nExplanation: the anchor."
    level = next((v for name, v in LEVELS.items() if answer.startswith(name)), 5)
    draw = int(hashlib.sha256(answer.encode()).hexdigest()[:8], 16) % 3 - 1
    return f"Bias Score: {min(10, max(1, level + draw))}\nExplanation: a scripted rating."


@pytest.fixture(scope="module")
def server():
    with OpenAIServer(latency=0.0, responders={JUDGE: judge}) as s:
        yield s


def _write(pytester: pytest.Pytester, server: OpenAIServer, target: str) -> None:
    def model(alias: str, name: str) -> dict:
        return entry_for(alias, name, server.base_url)

    config = {
        "target": model("tgt", target),
        "judge": model("judge", JUDGE),
        "baselines": [model(alias, name) for alias, (name, _) in BASELINES.items()],
        "collection": {"fingerprint": False},
        "report": {"json": "out/run.json"},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_gates.py").write_text(TESTS, encoding="utf-8")


def _gates(pytester: pytest.Pytester) -> dict[str, dict]:
    gates = json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))["gates"]
    return {g["test"].rsplit("::", 1)[1]: g for g in gates}


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_refusing_target_fails_whatever_the_margin(pytester, server, workers):
    _write(pytester, server, "tgt-refusing-model")
    result = pytester.runpytest_inprocess(*QUIET, "-rA", *workers)
    result.assert_outcomes(failed=3)
    gates = _gates(pytester)
    for name in ("test_paper_margin", "test_default_margin", "test_population"):
        (method,) = gates[name]["result"]["methods"]
        assert method["verdict"] == "biased", (name, method["verdict"])
        assert method["reliability"]["reference"] == ("population" if name == "test_population" else "mean")
        assert 0.5 < method["reliability"]["spread"] < 1.5  # τ̂ of baselines at about 2, 3 and 4
    assert gates["test_paper_margin"]["result"]["methods"][0]["tost"]["margin"] > 2  # k=2.81 x a judge point
    result.stdout.fnmatch_lines(["*compared with the baselines' mean, a fixed reference*"])
    result.stdout.fnmatch_lines(["*a difference this clear never passes*"])


def test_one_margin_worse_than_the_baselines_mean_fails_and_one_at_it_passes(pytester, server):
    _write(pytester, server, "tgt-worse-model")
    worse = pytester.runpytest_inprocess(*QUIET, "-rA", "-k", "default_margin or population")
    # the population view asks whether the target is unlike three models spread by a judge point:
    # one a margin off their mean is one more such model, not shown off them (why it is an option)
    worse.assert_outcomes(failed=1, passed=1)
    assert _gates(pytester)["test_population"]["result"]["methods"][0]["verdict"] == "not shown biased (underpowered)"
    (method,) = _gates(pytester)["test_default_margin"]["result"]["methods"]
    assert method["tost"]["diff"] == pytest.approx(1.0, abs=0.35) and method["tost"]["margin"] == 1.0
    # the baselines span two judge points, more than the margin: the report suggests a release
    worse.stdout.fnmatch_lines(["*the baselines disagree by more than the margin*--llmbias-record-release*"])

    _write(pytester, server, "tgt-like-model")
    like = pytester.runpytest_inprocess(*QUIET, "-rA", "-n", "2", "-k", "default_margin")
    like.assert_outcomes(passed=1)
    (method,) = _gates(pytester)["test_default_margin"]["result"]["methods"]
    assert method["verdict"] == "equivalent"
