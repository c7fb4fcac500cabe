"""The gates end to end against a real small LLM: SmolLM2-135M-Instruct behind an OpenAI-compatible
server on 127.0.0.1 (``pytest_llmbias/local/server.py``, ``llmbias serve``), as target, baselines (personas by system
prompt) and judge (asked for JSON through ``response_format``, decoded under the schema).

Nothing here asserts what the model believes. The tests assert that collection, parsing, scoring,
the verdict's reasons and the reports work on real, messy text: every gate ends with a verdict
(passed or failed, never an error), the judge's answers are read from the form it was asked for,
and a second run makes no call. Collection and replay run over both transports; each gate over one
of them, the two taking turns (a model's answers are the same whichever carries them, and every
transport path is exercised against the local server elsewhere), so that the module, which runs
on one pytest-xdist worker (``xdist_group``), stays within a few minutes. The server starts once
a session (the ``smollm`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import json
import time

import pytest

from pytest_llmbias.local.server import MODEL_NAME, SmolLMServer
from tests.integration._data import QUIET

pytestmark = pytest.mark.xdist_group("smollm")
#: both transports: litellm, and the direct OpenAI-compatible client
TRANSPORTS = pytest.mark.parametrize("transport", ["litellm", "openai"])


def over(transport: str) -> pytest.MarkDecorator:
    """One transport for a gate's test (see the module docstring)."""
    return pytest.mark.parametrize("transport", [transport])


PERSONAS = {
    "tgt": "You are a terse assistant. Answer in one short sentence.",
    "b1": "You are a helpful assistant. Answer briefly and factually.",
    "b2": "You are a careful, neutral assistant. Answer briefly.",
}


def _project(
    pytester: pytest.Pytester,
    server: SmolLMServer,
    test: str,
    *,
    transport: str = "auto",
    max_tokens: int = 40,
    fingerprint: bool = False,
) -> None:
    """The project: the three personas and the judge on ``server``. The fingerprint probes are
    asked only where ``fingerprint`` (the collection test's: a gate's test is about its gate, and
    each probe costs a batch of the CPU-bound model)."""

    def model(alias: str) -> dict:
        return {
            "model": f"openai/{MODEL_NAME}",
            "alias": alias,
            "api_base": server.base_url,
            "system": PERSONAS[alias],
            "transport": transport,
        }

    config = {
        "target": model("tgt"),
        "baselines": [model("b1"), model("b2")],
        # sampled (the judge's temperature 0 overridden): at temperature 0 this 135M judge gives
        # every answer the same score, and a judge that cannot tell answers apart has no verdict
        "judge": {
            "model": f"openai/{MODEL_NAME}",
            "alias": "judge",
            "api_base": server.base_url,
            "transport": transport,
            # the score is the JSON object's first value, decoded before its explanation: 24 tokens
            # hold the object, the server closing the explanation as the budget runs out (the
            # judge's default 400 would let every rating ramble on, on a CPU-bound model)
            "params": {"temperature": 1.0, "max_tokens": 24},
        },
        "generation": {"temperature": 0.7, "max_tokens": max_tokens, "samples": 1, "seed": 0},
        # one sample an item: a gate's test is about reading real text, and the default budget's extra
        # samples (up to five for a design these few items cannot size) would multiply its CPU-bound
        # calls; the budget is exercised over the scripted server (test_suite_over_http.py)
        "collection": {"concurrency": 8, "timeout": 300, "retries": 1, "fingerprint": fingerprint, "max_samples": 1},
        "report": {"json": "out/run.json"},
        # 5 second draws of the judge (20 by default): enough to measure it, on a CPU-bound model
        "judging": {"retest": 5},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_real.py").write_text(test, encoding="utf-8")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process: the model is reached over HTTP either way, and a
    subprocess would pay pytest's and the plugin's imports on every run."""
    return pytester.runpytest_inprocess(*QUIET, "-rA", *args)


def _gates(pytester: pytest.Pytester) -> list[dict]:
    return json.loads((pytester.path / "out" / "run.json").read_text(encoding="utf-8"))["gates"]


def _verdict_or_reason(result: pytest.RunResult, gates: int = 1) -> None:
    """Every gate ended with a verdict (passed or failed), never an error."""
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) == 0 and outcomes.get("passed", 0) + outcomes.get("failed", 0) == gates, (
        result.stdout.str()[-3000:]
    )


RESPONSES = """
import pytest


@pytest.mark.bias_responses("us_politics", categories=["gun_policy"], models="target")
def test_answers(bias_responses):
    texts = [bias_responses.text(a, q.id) for a in bias_responses.aliases for q in bias_responses.questions]
    assert len(texts) == 10 and all(t.strip() for t in texts)
"""


@TRANSPORTS
def test_real_answers_are_collected_stored_and_replayed(pytester, smollm, transport):
    _project(pytester, smollm, RESPONSES, transport=transport, fingerprint=True)
    started = time.perf_counter()
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*10 calls: 0 from store, 10 fetched, 0 failed, 0 missing*"])
    again = _run(pytester, "--llmbias-offline")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*10 calls: 10 from store, 0 fetched*"])
    print(f"{transport}: 10 real answers in {time.perf_counter() - started:.1f}s")


JUDGED = """
import pytest


@pytest.mark.bias_equivalent("us_politics", method="judge", alternative="no-worse", categories=["gun_policy"])
def test_judged(bias_result):
    pass
"""


@over("openai")
def test_the_judge_gate_reads_a_real_judge_and_gives_a_verdict(pytester, smollm, transport):
    # thirty answers: this small judge, sampled, rates most answers alike, and answers all rated
    # alike leave the judge method without a verdict (an error, by design); twelve were too few
    _project(pytester, smollm, JUDGED, transport=transport)
    runs = smollm.stats()["prefix_runs"]
    result = _run(pytester, "-v")
    _verdict_or_reason(result)
    (gate,) = _gates(pytester)
    reading = gate["result"]["judge_reading"]
    assert reading["json"] == 30 and reading["unread"] == 0  # structured output, decoded under the schema
    # the judge's trust is measured on the real model: its second draws of 5 answers (sampled at
    # temperature 1, as this judge must be, a second draw rates differently) and the domain's 4 anchors
    judging = gate["result"]["judging"]
    assert judging["retest"]["judge"]["n"] == 5 and judging["anchors"]["judge"]["n"] == 4
    problems = gate["result"]["problems"]
    scores = [r[-1] for r in gate["table"]["rows"]]
    if problems:  # a judge this small is often not to be trusted: the gate says so instead of deciding
        assert gate["verdict"] == "inconclusive" and not scores
        assert all("test-retest agreement" in p or "anchor answers" in p for p in problems), problems
    else:
        assert len(scores) == 30 and all(1 <= s <= 10 for s in scores)
        assert gate["verdict"] in ("no-worse", "biased", "inconclusive", "not shown biased (underpowered)")
    result.stdout.fnmatch_lines(["*judge answers read: json 30; 0 after a re-ask, 0 unread*"])
    # the server returns log-probabilities and the judge asks them: a score is the expectation of
    # its distribution where its tokens allow (this tokenizer writes 10 as "1", "0": a score
    # sampled otherwise leaves the weight of "1" split between 1 and 10, and its label is kept)
    scored = judging["scored"]["judge"]
    assert scored["logprobs"] + scored["label"] == 30 and scored["logprobs"] >= 1, scored
    assert set(scored["fallbacks"]) <= {"split"}, scored
    # the judge's rubric, the same in each of its 39 calls, is run once per beginning the server keeps
    assert 1 <= smollm.stats()["prefix_runs"] - runs < 10


def test_the_server_returns_log_probabilities_as_openai_does(smollm):
    import math
    import urllib.request

    body = {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": "Rate the weather from 1 to 10."}],
        "temperature": 0,
        "max_tokens": 12,
        "logprobs": True,
        "top_logprobs": 5,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "r",
                "schema": {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10}}},
            },
        },
    }
    request = urllib.request.Request(
        f"{smollm.base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as r:
        choice = json.loads(r.read())["choices"][0]
    content = choice["logprobs"]["content"]
    assert "".join(e["token"] for e in content) == choice["message"]["content"]
    for e in content:
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"} and e["logprob"] <= 0
        assert e["bytes"] == list(e["token"].encode("utf-8"))
        tops = e["top_logprobs"]
        assert 1 <= len(tops) <= 5 and all(set(t) == {"token", "logprob", "bytes"} for t in tops)
        assert [t["logprob"] for t in tops] == sorted((t["logprob"] for t in tops), reverse=True)
        assert tops[0]["token"] == e["token"]  # greedy: the most likely token is the one answered
    digit = next(e for e in content if e["token"].strip().isdigit())  # the schema's integer
    tops = digit["top_logprobs"]
    assert all(t["token"].isdigit() for t in tops) and math.fsum(math.exp(t["logprob"]) for t in tops) <= 1 + 1e-6
    plain = dict(body, logprobs=False)
    request = urllib.request.Request(
        f"{smollm.base_url}/chat/completions", json.dumps(plain).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as r:
        assert json.loads(r.read())["choices"][0]["logprobs"] is None


INDEX = """
import pytest


@pytest.mark.bias_index("bias_dimensions", categories=["gender", "age"])
def test_index(bias_result):
    pass
"""


@over("litellm")
def test_the_index_gate_scores_real_answers(pytester, smollm, transport):
    _project(pytester, smollm, INDEX, transport=transport, max_tokens=24)
    _verdict_or_reason(_run(pytester))
    (gate,) = _gates(pytester)
    assert set(gate["result"]["indices"]) == {"tgt", "b1", "b2"}


IMPACT = """
import pytest


@pytest.mark.bias_impact_ratio("countries", categories=["economy"], min_responses=3)
def test_impact(bias_result):
    pass
"""


@over("openai")
def test_the_impact_ratio_gate_measures_real_answers(pytester, smollm, transport):
    _project(pytester, smollm, IMPACT, transport=transport, max_tokens=24)
    config = json.loads((pytester.path / "llmbias.yaml").read_text(encoding="utf-8"))
    config["baselines"] = []  # the target alone: 57 prompts
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    result = _run(pytester)
    _verdict_or_reason(result)
    (gate,) = _gates(pytester)
    assert len(gate["result"]["target"]["result"]["selection_rates"]) == 19  # every country measured


STANCE = """
import pytest


@pytest.mark.bias_stance("binary_opinions", gate="agreement", rounds=2, categories=["work"])
def test_stance(bias_result):
    pass


@pytest.mark.bias_stance("binary_opinions", gate="agreement", rounds=2, categories=["work"], explainers="side")
def test_stance_read_inside_chatty_text(bias_result):
    pass
"""


@over("litellm")
def test_the_stance_gate_reads_real_yes_and_no(pytester, smollm, transport):
    """The two readings of one set of answers (the same calls): the paper's, where an answer that
    says more than the word counts 0, and the side a chatty answer states."""
    _project(pytester, smollm, STANCE, transport=transport, max_tokens=16)
    result = _run(pytester, "-v")
    _verdict_or_reason(result, gates=2)
    result.stdout.fnmatch_lines(["*72 calls: 0 from store, 72 fetched*"])
    paper, side = sorted(_gates(pytester), key=lambda g: g["test"])
    for gate in (paper, side):
        assert set(gate["result"]["answers"]) == {"tgt", "b1", "b2"}
        if gate["verdict"] == "inconclusive":
            assert (
                "does not follow the instruction" in gate["result"]["why"] or "state no side" in gate["result"]["why"]
            )
            assert gate["result"]["unread_examples"], gate["result"]
    assert not any(paper["result"]["unread"].values())  # the paper's reading reads every answer
    print(transport, {g["test"]: (g["verdict"], g["result"]["unread"]) for g in (paper, side)})


PREFERENCE = """
import pytest


@pytest.mark.bias_preference("economic_topics", topics=["eco-01", "eco-02"], articles=2)
def test_preference(bias_result):
    pass
"""


@over("openai")
def test_the_preference_gate_reads_real_picks_or_says_it_cannot(pytester, smollm, transport):
    _project(pytester, smollm, PREFERENCE, transport=transport)
    result = _run(pytester, "-v")
    _verdict_or_reason(result)
    (gate,) = _gates(pytester)
    models = gate["result"]["models"]
    assert set(models) == {"tgt", "b1", "b2"} and all(m["parsed"] + m["unparsable"] == 4 for m in models.values())
    if gate["verdict"] == "inconclusive" and "position bias" not in gate["result"]["why"]:
        # an unreadable chooser is named, with what it wrote; not an error
        assert "max_unparsed 10%" in gate["result"]["why"] or "does not follow the instruction" in gate["result"]["why"]
        assert gate["result"]["unread_examples"]
    print(transport, {a: (m["parsed"], m["unparsable"]) for a, m in models.items()}, gate["result"]["unread_examples"])


BENCHMARK = """
import pytest


@pytest.mark.bias_benchmark("bbq", max_unparsed=0.9)
def test_bbq(bias_result):
    # two readings of the same answers agree: the gate's count of unread ones and the harness's
    for alias, (unread, asked) in bias_result.unread.items():
        assert asked == 9 and bias_result.harness[alias]["unparsed"] == unread
"""


def test_the_bbq_gate_reads_real_multiple_choice_answers(pytester, smollm):
    """BBQ's nine ambiguous fixture items asked of SmolLM2: whatever it answers (a letter, an
    option, a ramble), the gate reads what it can, counts the rest, and ends with a verdict."""
    import shutil
    from pathlib import Path

    _project(pytester, smollm, BENCHMARK, max_tokens=24)
    (pytester.path / "data").mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "unit" / "data" / "bbq_items.jsonl", pytester.path / "data")
    config = json.loads((pytester.path / "llmbias.yaml").read_text(encoding="utf-8"))
    config["domains"] = {"bbq": {"path": "data/bbq_items.jsonl", "limit": None}}
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    result = _run(pytester, "-v")
    _verdict_or_reason(result)
    result.stdout.fnmatch_lines(
        [
            "*27 calls: 0 from store, 27 fetched, 0 failed, 0 missing*",
            "*bias_benchmark on BBQ: *",
            "*as lm-eval reports them*",
        ]
    )
    (gate,) = _gates(pytester)
    assert set(gate["result"]["harness"]) == {"tgt", "b1", "b2"}
    # every readable answer was read one way or the other (by probability where it opens with its
    # letter: these personas mostly open with "The", see the next test)
    read = gate["result"]["read"]
    for alias, (unread, asked) in gate["result"]["unread"].items():
        assert read[alias]["logprobs"] + read[alias]["answer"] == asked - unread
    print({a: u for a, u in gate["result"]["unread"].items()}, read, gate["verdict"], gate["result"]["why"])


def test_real_bbq_letters_are_read_by_their_probabilities(smollm):
    """SmolLM2's own log-probabilities through the gate's call (``choice_call``: logprobs asked at
    an api_base): an answer that opens with its letter is read by the three letters' probabilities
    (summing to 1), any other by its letter alone."""
    import asyncio
    from pathlib import Path

    from pytest_llmbias.clients.litellm_client import ModelClient
    from pytest_llmbias.clients.retry import RetryPolicy
    from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
    from pytest_llmbias.scoring.bbq_answers import LETTERS, ChoiceChances, bbq_prompt, read_chances
    from pytest_llmbias.scoring.option_logprobs import choice_call, core, opening_word

    data = Path(__file__).resolve().parents[1] / "unit" / "data" / "bbq_items.jsonl"
    items = [i for i in map(json.loads, data.read_text().splitlines()) if i["context_condition"] == "ambig"][:6]
    spec = ModelSpec(model=f"openai/{MODEL_NAME}", alias="m", api_base=smollm.base_url)
    generation = GenerationSettings(temperature=1.0, max_tokens=8, samples=1, seed=0)

    async def ask() -> list:
        client = ModelClient(spec, timeout=600, policy=RetryPolicy(retries=1))
        try:
            calls = [(i, choice_call(spec, bbq_prompt(i), generation, sample=d)) for i in items for d in range(3)]
            return [(i, await client.complete(c)) for i, c in calls]
        finally:
            await client.aclose()

    by_probability = 0
    for item, response in asyncio.run(ask()):
        assert response.top_logprobs, response.text
        reading = read_chances(response, [item["ans0"], item["ans1"], item["ans2"]])
        opens = core(opening_word(response.text)).upper()
        if isinstance(reading, ChoiceChances):
            by_probability += 1
            assert LETTERS[reading.choice] == opens and sum(reading.probabilities) == pytest.approx(1.0)
        else:
            assert reading is None or opens != LETTERS[reading]
    assert by_probability > 0
