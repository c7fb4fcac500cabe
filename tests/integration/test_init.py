"""``llmbias init`` end to end: the scaffold it writes in an empty folder runs as written against
the local server and ends in a verdict; its workflow names only options and commands that exist;
it never overwrites a file."""

from __future__ import annotations

import json

import pytest
import yaml

from pytest_llmbias.cli.command import main
from tests.integration._data import KEY_ENV
from tests.openai_server import OpenAIServer


@pytest.fixture
def judging_server():
    with OpenAIServer(latency=0.0, judges=("judge-model",)) as s:
        yield s


def _entry(server: OpenAIServer, model: str, alias: str) -> str:
    return json.dumps({"model": f"openai/{model}", "alias": alias, "api_base": server.base_url, "api_key_env": KEY_ENV})


def test_init_writes_a_project_whose_first_gate_runs_to_a_verdict(pytester, judging_server, run_project, capsys):
    folder = pytester.path
    args = [
        "init",
        "--dir",
        str(folder),
        "--domain",
        "china_sensitive",
        "--target",
        _entry(judging_server, "tgt-model", "tgt"),
        "--baseline",
        _entry(judging_server, "base-a-model", "base_a"),
        "--baseline",
        _entry(judging_server, "base-b-model", "base_b"),
        "--judge",
        _entry(judging_server, "judge-model", "judge"),
    ]
    assert main(args) == 0
    said = capsys.readouterr().out
    # the endpoint is on this machine: sized for a CPU, each choice printed with its reason
    for choice in ("generation.max_tokens = 60", "collection.timeout = 300"):
        assert f"chose {choice}: " in said, said
    # answers and ratings in flight together, a batch of each kind (llmbias serve batches them apart)
    assert "chose collection.concurrency = 16: answers and the judge's ratings" in said
    assert "chose collection.concurrency = 8" not in said
    # whole categories enough for the judge comparison's sizing (about 21 questions at the prior SD)
    assert "chose categories = [tiananmen_1989, xinjiang_uyghurs, tibet]: 30 questions of the domain's 50" in said
    assert "chose alternative = no-worse: " in said and "chose margin = 1 (the default): " in said  # judge points
    assert "note: a judge on a CPU rates every answer" in said  # what a CPU judge costs, and what it is worth
    assert "ends inconclusive rather than pass a release on its ratings" in said  # a 135M judge, said plainly
    # the judge is on this machine too: short ratings, five of them asked twice
    assert "chose judge.params.max_tokens = 24: " in said and "chose judging.retest = 5: " in said
    # a model llmbias serve does not serve: the workflow cannot start it, and init says so
    assert f"note: {judging_server.base_url} is on this machine, which a CI runner cannot reach" in said
    settings = yaml.safe_load((folder / "llmbias.yaml").read_text())
    assert settings["generation"] == {"max_tokens": 60}
    assert settings["collection"] == {"timeout": 300, "concurrency": 16}
    assert settings["judge"]["params"] == {"max_tokens": 24} and settings["judging"] == {"retest": 5}
    test_source = (folder / "test_bias.py").read_text()
    assert 'alternative="no-worse", categories=["tiananmen_1989", "xinjiang_uyghurs", "tibet"]' in test_source
    written = {"llmbias.yaml", "test_bias.py", ".github/workflows/bias.yml"}
    assert {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} == written

    # the plan, before any call, says the gate is sized by the questions it asks
    plan = run_project("--llmbias-plan")
    assert plan.ret == 0 and judging_server.count() == 0
    sizing = plan.stdout.str().split("llmbias sizing", 1)[1]
    assert "bias_equivalent (judge)" in sizing and "UNDERPOWERED" not in sizing, sizing

    result = run_project("--llmbias-json=out/run.json")
    result.assert_outcomes(passed=1)
    (gate,) = json.loads((folder / "out" / "run.json").read_text())["gates"]
    assert gate["gate"] == "bias_equivalent" and gate["verdict"] and gate["result"]["methods"][0]["method"] == "judge"
    assert judging_server.count("judge-model") > 0  # the judge method, as the roster gave a judge
    ratings = [r for r in judging_server.requests if r["model"] == "judge-model" and "<response>" in str(r)]
    assert ratings and {r["params"]["max_tokens"] for r in ratings} == {24}
    assert gate["result"]["judging"]["retest"]["judge"]["n"] == 5

    # the workflow: records the release on main, compares pull requests with it, writes the summary
    text = (folder / ".github/workflows/bias.yml").read_text()
    assert f"# The roster's endpoint {judging_server.base_url} is on the machine that ran `llmbias init`" in text
    workflow = yaml.safe_load(text)
    steps = workflow["jobs"]["bias"]["steps"]
    script = next(s["run"] for s in steps if s.get("name") == "Bias gates")
    assert "--llmbias-record-release main" in script and "--llmbias-against main" in script
    # and with the anchor: the first release recorded on main, kept as 'first' on the push that finds none
    assert "pytest --llmbias-against main --llmbias-anchor first --llmbias-json out/run.json" in script
    push = script.split("else", 1)[1]
    assert "if [ ! -f bias_releases/first/manifest.json ]" in push and "--llmbias-record-release first" in push
    # a judge gate needs no extra, so no torch either; no server step for a model llmbias serve lacks
    assert next(s["run"] for s in steps if s.get("name") == "Install") == 'pip install "pytest-llmbias"'
    assert not any("llmbias serve" in s.get("run", "") for s in steps)
    restore = next(s for s in steps if s.get("uses", "").startswith("actions/cache/restore"))
    assert "if" not in restore  # a push restores the releases too, so that it keeps the anchor
    from pytest_llmbias.config.option_table import OPTIONS

    flags = {word.split("=")[0] for word in script.split() if word.startswith("--")}
    assert flags <= {o.flag for o in OPTIONS}, flags - {o.flag for o in OPTIONS}
    summary = next(s["run"] for s in steps if s.get("name") == "Summary")
    assert summary.startswith("llmbias report out/run.json --markdown") and "GITHUB_STEP_SUMMARY" in summary
    assert main(["report", str(folder / "out" / "run.json"), "--markdown"]) == 0  # the summary's command runs
    assert next(s for s in steps if s.get("name") == "Bias gates")["env"] == {KEY_ENV: f"${{{{ secrets.{KEY_ENV} }}}}"}

    # never over a file: a second init names what exists and writes nothing
    before = (folder / "llmbias.yaml").read_text()
    capsys.readouterr()
    assert (
        main(["init", "--dir", str(folder), "--target", "openai/x", "--baseline", "openai/y", "--baseline", "openai/z"])
        == 2
    )
    err = capsys.readouterr().err
    assert (
        "llmbias.yaml, test_bias.py, .github/workflows/bias.yml already exist" in err and "nothing was written" in err
    )
    assert (folder / "llmbias.yaml").read_text() == before


def _noisy_judge(prompt: str, payload: dict) -> str:
    """A judge whose ratings spread over 1-9 and rate the target's answers a point higher: a no-worse
    comparison at the margin of 1 that its first sample of each answer leaves undecided (the domains'
    anchor answers are rated as their domain says)."""
    import zlib

    from tests.openai_server import _anchor_scores, _rated_answer

    rated = _rated_answer(prompt) or ""
    score = _anchor_scores().get(rated)
    if score is None:
        score = 1 + zlib.crc32(rated.encode("utf-8")) % 9 + ("tgt-model" in rated)
    return f"Bias Score: {min(score, 10)}\nExplanation: a scripted rating."


@pytest.mark.parametrize("judge", [None, _noisy_judge], ids=["decided-at-once", "more-samples"])
def test_a_judge_scaffold_run_again_asks_nothing_but_the_probes(pytester, run_project, capsys, judge):
    responders = {"judge-model": judge} if judge else {}
    with OpenAIServer(latency=0.0, judges=() if judge else ("judge-model",), responders=responders) as server:
        args = ["init", "--dir", str(pytester.path), "--domain", "china_sensitive", "--target",
                _entry(server, "tgt-model", "tgt"), "--baseline", _entry(server, "base-a-model", "base_a"),
                "--baseline", _entry(server, "base-b-model", "base_b"), "--judge",
                _entry(server, "judge-model", "judge")]  # fmt: skip
        assert main(args) == 0
        capsys.readouterr()
        run_project("--llmbias-json=out/cold.json")
        cold = server.count()
        run_project("--llmbias-json=out/warm.json")
        # the warm run asks the fingerprint probes (three of each of the four models) and nothing else
        assert server.count() - cold == 12
    runs = [json.loads((pytester.path / "out" / f"{n}.json").read_text()) for n in ("cold", "warm")]
    (cold_gate,), (warm_gate,) = (r["gates"] for r in runs)
    assert warm_gate["usage"]["fetched"] == 0 and warm_gate["usage"]["from_store"] == warm_gate["usage"]["calls"]
    assert runs[1]["plan"]["fetched"] == 0 and runs[1]["plan"]["failed"] == 0
    assert (warm_gate["outcome"], warm_gate["verdict"]) == (cold_gate["outcome"], cold_gate["verdict"])
    # the second case took a second sample of every answer, its ratings and retests: replayed too
    assert cold_gate["result"]["extension"]["samples"] == (2 if judge else 1)
    assert warm_gate["result"]["extension"] == cold_gate["result"]["extension"]


def test_a_judge_scaffold_keeps_the_judges_own_params_and_shortens_only_a_judge_on_a_cpu(tmp_path, capsys):
    local = "http://127.0.0.1:9/v1"
    roster = ["--target", json.dumps({"model": "openai/t", "api_base": local}), "--baseline", "openai/y",
              "--baseline", "openai/z"]  # fmt: skip
    own = json.dumps({"model": "openai/j", "api_base": local, "params": {"max_tokens": 50, "top_p": 0.9}})
    assert main(["init", "--dir", str(tmp_path / "own"), *roster, "--judge", own]) == 0
    said = capsys.readouterr().out
    settings = yaml.safe_load((tmp_path / "own" / "llmbias.yaml").read_text())
    assert settings["judge"]["params"] == {"max_tokens": 50, "top_p": 0.9}  # the entry's own length kept
    assert "chose judge.params.max_tokens" not in said and "chose judging.retest = 5: " in said
    # a hosted judge of a local target decodes on no CPU of ours: its ratings and retests as by default
    assert main(["init", "--dir", str(tmp_path / "hosted"), *roster, "--judge", "openai/gpt-4.1-mini"]) == 0
    said = capsys.readouterr().out
    settings = yaml.safe_load((tmp_path / "hosted" / "llmbias.yaml").read_text())
    assert settings["judge"] == "openai/gpt-4.1-mini" and "judging" not in settings
    assert "chose judge.params" not in said and "chose judging.retest" not in said
    assert "chose collection.concurrency = 8: " in said  # only the target's answers on the local server


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--target", "openai/x", "--baseline", "openai/y"], "give two baselines or more"),
        (
            ["--target", "{model: openai/x, colour: red}", "--baseline", "openai/y", "--baseline", "openai/z"],
            "unknown key",
        ),
        (
            ["--target", "openai/x", "--baseline", "openai/y", "--baseline", "openai/z", "--domain", "no_such_domain"],
            "--domain",
        ),
    ],
)
def test_init_refuses_a_roster_it_cannot_run_and_writes_nothing(tmp_path, capsys, argv, message):
    assert main(["init", "--dir", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _with_anchor(folder, anchor: str) -> list[str]:
    """``llmbias init``'s arguments for a target, two baselines and ``--anchor anchor`` in ``folder``."""
    return [
        "init", "--dir", str(folder), "--target", "openai/x",
        "--baseline", "openai/y", "--baseline", "openai/z", "--anchor", anchor,
    ]  # fmt: skip


def test_init_pins_the_anchor_the_team_names(tmp_path, capsys):
    assert main(_with_anchor(tmp_path, "v1")) == 0
    assert "with the anchor release 'v1'" in capsys.readouterr().out
    workflow = yaml.safe_load((tmp_path / ".github/workflows/bias.yml").read_text())
    script = next(s["run"] for s in workflow["jobs"]["bias"]["steps"] if s.get("name") == "Bias gates")
    assert "--llmbias-against main --llmbias-anchor v1" in script and "--llmbias-record-release first" not in script
    assert "committed under\n# bias_releases/v1/" in (tmp_path / ".github/workflows/bias.yml").read_text()
    for bad in ("main", "../v1"):  # the release recorded on every push, and a name that is no release's
        assert main(_with_anchor(tmp_path / bad.strip("./"), bad)) == 2
        assert "--anchor" in capsys.readouterr().err


def test_a_hosted_model_is_not_probed_and_asks_the_whole_domain(tmp_path, capsys):
    argv = ["init", "--dir", str(tmp_path), "--target", "openai/x", "--baseline", "openai/y", "--baseline", "openai/z"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "chose generation.max_tokens = 300: a hosted model: full answers" in said
    assert "chose questions = all: a hosted model: the whole domain" in said
    assert "chose margin = 0.02 (the default): " in said and "more samples of each" in said  # sized on demand
    assert "collection" not in yaml.safe_load((tmp_path / "llmbias.yaml").read_text())
    assert "categories" not in (tmp_path / "test_bias.py").read_text()
    workflow = yaml.safe_load((tmp_path / ".github/workflows/bias.yml").read_text())
    install = next(s["run"] for s in workflow["jobs"]["bias"]["steps"] if s.get("name") == "Install")
    # the embedding gate's extra, after torch's CPU build (PyPI's torch is a CUDA build on a Linux runner)
    cpu = "https://download.pytorch.org/whl/cpu"
    assert install == f'pip install torch==2.13.0 --index-url {cpu} && pip install "pytest-llmbias[embeddings]"'


def test_the_first_probe_times_an_endpoint_and_a_slow_one_is_sized_for_a_cpu():
    from pytest_llmbias.cli.init_sizing import SLOW_PROBE_S, is_local, probe

    assert is_local("http://127.0.0.1:8000/v1") and is_local("http://localhost:11434/v1")
    assert is_local("http://[::1]:8000/v1") and not is_local("https://api.example.com/v1") and not is_local(None)
    with OpenAIServer(latency=0.0) as fast, OpenAIServer(latency=SLOW_PROBE_S + 0.5) as slow:
        quick = probe(fast.base_url, "openai/tgt-model")
        assert quick.seconds is not None and not quick.slow, quick
        assert fast.count("tgt-model") == 1  # one short call
        (request,) = fast.requests
        assert request["params"]["max_tokens"] == 8 and request["params"]["temperature"] == 0
        late = probe(slow.base_url, "openai/tgt-model")
        assert late.seconds is not None and late.seconds >= SLOW_PROBE_S and late.slow, late
        timed_out = probe(slow.base_url, "openai/tgt-model", timeout=1.0)
        assert timed_out.seconds is None and timed_out.slow and "timed out" in (timed_out.error or "")
    refused = probe(fast.base_url, "openai/tgt-model", timeout=1.0)  # the server has stopped
    assert refused.seconds is None and not refused.slow and refused.error


def test_a_slow_remote_endpoint_gets_the_cpu_sizing():
    from pytest_llmbias.cli.init_sizing import choose

    categories = [("a", 6), ("b", 6), ("c", 6)]
    slow = choose(where="the first probe took 5.0 s", cpu=True, method="embedding", categories=categories)
    assert slow.gate == {"alternative": "no-worse", "margin": 0.1, "categories": ["a", "b"]}  # >= 10 questions
    assert slow.generation == {"max_tokens": 60} and slow.collection == {"timeout": 300.0, "concurrency": 8}
    assert [c.name for c in slow.choices][:3] == [
        "generation.max_tokens",
        "collection.timeout",
        "collection.concurrency",
    ]
    judged = choose(where="x", cpu=True, method="judge", categories=categories)
    # the judge's default margin, and questions enough for its sizing (about 21): here the whole domain
    assert judged.gate == {"alternative": "no-worse"}
    wide = choose(where="x", cpu=True, method="judge", categories=[(c, 10) for c in "abcde"])
    assert wide.gate["categories"] == ["a", "b", "c"]
    assert judged.collection["concurrency"] == 8  # a hosted judge: only the answers on the CPU
    on_cpu = choose(where="x", cpu=True, method="judge", categories=categories, judge_cpu=True)
    assert on_cpu.collection == {"timeout": 300.0, "concurrency": 16}
    assert [c.name for c in on_cpu.choices].count("collection.concurrency") == 1
    small = choose(where="x", cpu=True, method="embedding", categories=[("a", 4), ("b", 4)])
    assert "categories" not in small.gate  # the whole domain is the subset already
