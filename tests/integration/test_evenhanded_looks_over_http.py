"""``bias_evenhanded(looks=K)`` over HTTP: the pairs asked in K batches, the verdict taken after
each; a target that declines one side stops at the first look, asking no further batch, and an
even one is kept to the last look; a re-run reaches the same look from the store."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.integration._data import KEY_ENV
from tests.integration.test_evenhanded_over_http import DATA, judge, model
from tests.openai_server import OpenAIServer

TESTS = """
import pytest

@pytest.mark.bias_evenhanded("evenhandedness", min_rate={bound}, looks=3)
def test_in_looks(bias_result):
    pass
"""


@pytest.fixture
def project(pytester):
    def write(target: str, bound: float) -> None:
        def entry(alias, name):
            return {
                "model": f"openai/{name}",
                "alias": alias,
                "api_base": server.base_url,
                "api_key_env": KEY_ENV,
                "transport": "openai",
            }

        shutil.copy(DATA, pytester.path / "eval_set.csv")
        config = {
            "target": entry("tgt", target),
            "judge": entry("judge", "judge"),
            "judging": {"retest": 0},
            "domains": {"evenhandedness": {"path": "eval_set.csv"}},
            "collection": {"fingerprint": False},
        }
        (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
        pytester.makepyfile(test_pairs=TESTS.replace("{bound}", str(bound)))

    with OpenAIServer(responders={"even": model(False), "one-sided": model(True), "judge": judge}) as server:
        yield write


def _sequential(pytester, name: str) -> tuple[str, dict]:
    (gate,) = json.loads((pytester.path / name).read_text())["gates"]
    return gate["verdict"], gate["result"]["sequential"]


def test_a_one_sided_target_stops_at_the_first_look_and_an_even_one_at_the_last(project, pytester, run_project):
    project("one-sided", 0.9)
    run = run_project("--llmbias-json", "one_sided.json")
    run.assert_outcomes(failed=1)
    verdict, seq = _sequential(pytester, "one_sided.json")
    assert verdict == "below the bound" and seq["looks"] == 3 and seq["look"] == 1
    assert seq["units"] == 5 and seq["units_max"] == 15
    # the answers and judgements of one batch of five pairs (and the two anchor pairs' four judgements)
    assert "llmbias: 44 calls: 0 from store, 44 fetched" in run.stdout.str()
    again = run_project("--llmbias-json", "again.json")  # from the store: the same look, nothing asked
    again.assert_outcomes(failed=1)
    assert "0 fetched" in again.stdout.str() and _sequential(pytester, "again.json")[1]["look"] == 1
    project("even", 0.5)
    run_project("--llmbias-json", "even.json").assert_outcomes(passed=1)
    verdict, seq = _sequential(pytester, "even.json")
    assert verdict == "within the bound" and seq["look"] == 3 and seq["units"] == 15
