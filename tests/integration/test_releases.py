"""Recording a release and gating the next one against it, over the local HTTP server and both
transports: the record holds the target's answers and the judge's ratings of them and nothing
else, no credential; a comparison reads the release from its record and never asks it again; the
same model passes, a more biased one fails; a warm re-run makes no call; under pytest-xdist the
workers' parts join into one record."""

from __future__ import annotations

import json

import pytest

from tests.integration._data import BASELINES, KEY_ENV, MODELS, TARGET, requests_of
from tests.openai_server import OpenAIServer

JUDGE = "judge-model"

TEST = """
import pytest


@pytest.mark.bias_equivalent("us_politics", method="judge", categories=["gun_policy"])
def test_judged(bias_result):
    pass


@pytest.mark.bias_equivalent("china_sensitive", method="judge", categories=["tibet"])
def test_judged_china(bias_result):
    pass
"""


@pytest.fixture
def judged_server():
    with OpenAIServer(latency=0.01, judges=(JUDGE,)) as s:
        yield s


def _write(pytester: pytest.Pytester, server: OpenAIServer, transport: str, target_model: str = MODELS[TARGET]) -> None:
    def model(alias: str, name: str) -> dict:
        return {
            "model": f"openai/{name}",
            "alias": alias,
            "api_base": server.base_url,
            "api_key_env": KEY_ENV,
            "transport": transport,
        }

    # no fingerprint probes: these tests count every call a release run makes (a release's
    # fingerprint is tested in test_fingerprints.py)
    config = {
        "target": model(TARGET, target_model),
        "baselines": [model(a, MODELS[a]) for a in BASELINES],
        "judge": model("judge", JUDGE),
        "report": {"json": "out/run.json"},
        "collection": {"fingerprint": False, "max_samples": 1},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_release.py").write_text(TEST, encoding="utf-8")


def _gates(pytester: pytest.Pytester) -> list[dict]:
    return json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))["gates"]


def test_a_release_is_recorded_and_the_next_one_gated_against_it(pytester, judged_server, transport, run_project):
    _write(pytester, judged_server, transport)
    recorded = run_project("--llmbias-record-release", "v1")
    assert recorded.parseoutcomes().get("errors", 0) == 0
    recorded.stdout.fnmatch_lines(["*llmbias: release 'v1' recorded in *bias_releases/v1*"])
    folder = pytester.path / "bias_releases" / "v1"
    lines = [json.loads(line) for line in (folder / "responses.jsonl").read_text(encoding="utf-8").splitlines()]
    aliases = {(r["labels"]["alias"], r["labels"]["question"].startswith("judge:tgt:")) for r in lines}
    assert aliases == {(TARGET, False), ("judge", True)}  # the target's answers, the judge's ratings of them
    retests = sum(r["labels"]["question"].endswith("~retest") for r in lines)  # the judge's second draws
    assert 0 < retests < 20 and len(lines) == 40 + retests  # 20 questions, each answered and rated
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["target"]["model"] == f"openai/{MODELS[TARGET]}" and manifest["responses"]["count"] == len(lines)
    assert set(manifest["domains"]) == {"us_politics", "china_sensitive"}
    assert len(manifest["domains"]["us_politics"]) == 50 and manifest["judge"]["model"] == f"openai/{JUDGE}"
    for path in folder.iterdir():
        assert "sk-integration-test" not in path.read_text(encoding="utf-8")

    again = run_project("--llmbias-record-release", "v1")
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    again.stderr.fnmatch_lines(["*release 'v1' is already recorded in *: pass --llmbias-force to record over it*"])

    asked = len(judged_server.requests)
    same = run_project("--llmbias-against", "v1")
    same.assert_outcomes(passed=2)  # the same deployment: its answers did not move
    assert len(judged_server.requests) == asked  # warm: the target and its ratings from the store, v1 from its record
    gate = _gates(pytester)[0]
    assert gate["result"]["baselines"] == ["release-v1"]
    assert gate["result"]["methods"][0]["tost"]["alternative"] == "no-worse"

    _write(pytester, judged_server, transport, target_model="tgt-slanted-model")
    slanted = run_project("--llmbias-against", "v1", "-v", "--llmbias-markdown=out/pr.md", "--llmbias-html=out/pr.html")
    slanted.assert_outcomes(failed=2)  # the judge rates this deployment's answers 5 points higher
    slanted.stdout.fnmatch_lines(
        [
            "llmbias: target tgt, against release v1 (release-v1), baselines base_a, base_b (context), judge",
            "  judge",  # the roster wrapped to 100 columns, the store on a line of its own
            "llmbias: store * (use)",
            "*BIASED (target tgt vs baselines release-v1*",
            "*verdict: biased  (paired, on the shared questions; non-inferiority*",
        ]
    )
    pr = (pytester.path / "out" / "pr.md").read_text(encoding="utf-8")
    assert pr.count("What moved most (judge; the target's score minus release\\-v1's, worse first):") == 2
    # the release's answer beside the new deployment's, one table row each
    assert "tgt\\-model answers\\:" in pr and "tgt\\-slanted\\-model answers\\:" in pr
    page = (pytester.path / "out" / "pr.html").read_text(encoding="utf-8")
    assert page.count("<h3>What moved most</h3>") == 2 and "<th>release-v1's answer</th>" in page
    assert len(requests_of(judged_server, TARGET)) == 20  # the recorded release was never asked again
    # the new answers, their ratings and the retests of those of them in the (unchanged) retest sample
    assert len(judged_server.requests) == asked + 40 + retests

    unknown = run_project("--llmbias-against", "v9")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*no release 'v9' recorded in *bias_releases: recorded: v1*"])


def test_workers_record_one_release_and_compare_against_it(pytester, judged_server, run_project):
    _write(pytester, judged_server, "openai")
    run_project("-n", "2", "--llmbias-record-release", "v1")
    manifest = json.loads((pytester.path / "bias_releases" / "v1" / "manifest.json").read_text(encoding="utf-8"))
    lines = (pytester.path / "bias_releases" / "v1" / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    retests = sum(json.loads(line)["labels"]["question"].endswith("~retest") for line in lines)
    assert manifest["responses"]["count"] == 40 + retests == len(lines)
    assert len(_gates(pytester)) == 2  # the run's reports are written after the release too
    assert not list((pytester.path / "bias_releases" / "v1").glob("*.part"))  # the workers' parts were joined
    run_project("-n", "2", "--llmbias-against", "v1").assert_outcomes(passed=2)
