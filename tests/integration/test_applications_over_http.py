"""Applications as targets, over the scripted local server: a small retrieval app written as a
Python function (sync, then async) that asks the server's model with its own system prompt and a
passage before the question; an application's own HTTP API with its JSON schema, a token header
read from the environment, a 429 and a 500; a judge registered by a ``conftest.py``; and a new
``version:`` that asks again. Each against baselines served by the same server."""

from __future__ import annotations

import json

import pytest

from tests.integration._data import KEY_ENV, MODELS, requests_of
from tests.openai_server import OpenAIServer

TOKEN = "app-token-5f0c9b7e1d"  # what the HTTP application wants in X-App-Token; never written anywhere

APP = '''
"""A small retrieval application: its system prompt and the passage it retrieved go before the question."""
import json
import os
import urllib.request

SYSTEM = "You are the shop's assistant. Answer from the passage."
PASSAGE = "Passage: returns are accepted within 30 days."


def _request(messages, params):
    chat = [{"role": "system", "content": SYSTEM}, *messages[:-1],
            {"role": "user", "content": PASSAGE + "\\n\\n" + messages[-1]["content"]}]
    return {"model": "tgt-model", "messages": chat, **{k: params[k] for k in ("temperature", "max_tokens", "seed")}}


def answer_sync(messages, **params):
    request = urllib.request.Request(os.environ["SHOP_MODEL_URL"] + "/chat/completions",
                                     data=json.dumps(_request(messages, params)).encode("utf-8"),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = json.load(response)
    return {"text": body["choices"][0]["message"]["content"], "usage": body["usage"]}


async def answer_async(messages, **params):
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.post(os.environ["SHOP_MODEL_URL"] + "/chat/completions",
                                json=_request(messages, params)) as response:
            body = await response.json()
    return body["choices"][0]["message"]["content"]
'''

CONFTEST = """
import hashlib

from tests.openai_server import _anchor_scores, _rated_answer


def pytest_llmbias_add_models(registry, config):
    def judge(messages, **params):
        answer = _rated_answer(messages[-1]["content"]) or ""
        score = _anchor_scores().get(answer) or 4 + int(hashlib.sha256(answer.encode()).hexdigest()[:8], 16) % 3
        return f"Bias Score: {score}\\nExplanation: a registered judge."

    registry.register("house_judge", judge)
"""

TESTS = """
import pytest

MODELS = {models!r}


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models="all")
def test_answers(bias_responses):
    assert bias_responses.n_questions == 10
    for q in bias_responses.questions:
        assert bias_responses.text("shop", q.id) == {target!r}.format(q=q.text)
        for alias in ("base_a", "base_b"):
            assert bias_responses.text(alias, q.id) == f"{{MODELS[alias]}} answers: {{q.text}} [seed=0]"


@pytest.mark.bias_equivalent("china_sensitive", method="judge", categories=["tibet"])
def test_judged(bias_result):
    assert bias_result.n_questions == 10
"""

PYTHON_ANSWER = "tgt-model answers: Passage: returns are accepted within 30 days.\n\n{q} [seed=0]"
HTTP_ANSWER = "shop app answers: {q}"


def _write(pytester: pytest.Pytester, server: OpenAIServer, target: dict, expected: str) -> None:
    def baseline(alias: str) -> dict:
        return {
            "model": f"openai/{MODELS[alias]}",
            "alias": alias,
            "api_base": server.base_url,
            "api_key_env": KEY_ENV,
            "transport": "openai",
        }

    config = {
        "target": {"alias": "shop", **target},
        "baselines": [baseline("base_a"), baseline("base_b")],
        # no fingerprint probes: these tests count the application's calls
        "judge": {"python": "house_judge"},
        # one sample of each answer: these tests count the calls (the sampling budget is tested over HTTP
        # in test_suite_over_http.py)
        "collection": {"retries": 2, "fingerprint": False, "max_samples": 1},
        "store": {"export": "out/answers.jsonl"},
        "report": {"json": "out/run.json"},
    }
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "shop_app.py").write_text(APP, encoding="utf-8")
    (pytester.path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (pytester.path / "test_app.py").write_text(TESTS.format(models=MODELS, target=expected), encoding="utf-8")


def _judged(result: pytest.RunResult) -> None:
    """The answers are as expected, and the registered judge rates them to a verdict: the
    scripted scores make the target equivalent to its baselines."""
    result.assert_outcomes(passed=2, warnings=1)  # the warning: ten questions give an underpowered design


@pytest.mark.parametrize("function", ["answer_sync", "answer_async"])
def test_a_python_application_against_baselines_and_a_new_version_asks_again(
    pytester, server, run_project, monkeypatch, function
):
    monkeypatch.setenv("SHOP_MODEL_URL", server.base_url)
    _write(pytester, server, {"python": f"shop_app:{function}", "version": "1"}, PYTHON_ANSWER)
    result = run_project()
    _judged(result)
    sent = requests_of(server, "tgt")
    assert len(sent) == 10
    assert all(
        r["messages"][0] == {"role": "system", "content": "You are the shop's assistant. Answer from the passage."}
        for r in sent
    )
    assert len(requests_of(server, "base_a")) == 10 and len(requests_of(server, "base_b")) == 10

    if function == "answer_async":
        return
    run_project()  # unchanged: everything from the store
    assert len(requests_of(server, "tgt")) == 10
    _write(pytester, server, {"python": f"shop_app:{function}", "version": "2"}, PYTHON_ANSWER)
    _judged(run_project())  # a new version: the application is asked again, the baselines are not
    assert len(requests_of(server, "tgt")) == 20
    assert len(requests_of(server, "base_a")) == 10


def test_an_http_application_with_its_own_schema_retries_and_keeps_its_token_secret(pytester, run_project, monkeypatch):
    monkeypatch.setenv("SHOP_APP_TOKEN", TOKEN)
    with OpenAIServer(app_token=TOKEN) as server:
        server.script("app:shop", {"status": 429, "headers": {"Retry-After": "0.2"}}, {"status": 500})
        target = {
            "http": {
                "url": server.app_url("shop"),
                "headers": {"X-App-Token": "${SHOP_APP_TOKEN}"},
                "body": {
                    "input": "{{prompt}}",
                    "history": "{{messages}}",
                    "options": {"temperature": "{{temperature}}"},
                },
                "response": "data.reply",
                "usage": "meta.usage",
            },
            "system": "You are the shop's assistant.",
            "version": "2024-06",
        }
        _write(pytester, server, target, HTTP_ANSWER)
        result = run_project()
        _judged(result)
        result.stdout.fnmatch_lines(["llmbias: target shop (version 2024-06, system *), baselines base_a, base_b, *"])
        sent = [r for r in server.requests if r["model"] == "app:shop"]
        assert len(sent) == 12  # ten questions, one of them turned away twice
        assert all(r["headers"]["X-App-Token"] == TOKEN for r in sent)
        body = sent[-1]["params"]
        assert body["history"][0] == {"role": "system", "content": "You are the shop's assistant."}
        assert body["history"][-1] == {"role": "user", "content": body["input"]}
        assert body["options"] == {"temperature": 0.7}
        written = [p for p in pytester.path.rglob("*") if p.is_file() and p.suffix != ".py"]
        assert any(p.name == "run.json" for p in written) and any(p.name == "answers.jsonl" for p in written)
        for path in written:  # the store, the exported answers, the JSON report, the run history
            assert TOKEN.encode() not in path.read_bytes(), path
        assert TOKEN not in "\n".join(result.outlines + result.errlines)
        exported = [json.loads(line) for line in (pytester.path / "out/answers.jsonl").read_text("utf-8").splitlines()]
        shop = [r for r in exported if r["model"].startswith("http:")]
        assert len(shop) == 10 and all(r["version"] == "2024-06" and r["request"]["headers"] == {} for r in shop)
        import jsonschema

        from pytest_llmbias.report.json_report import schema

        document = json.loads((pytester.path / "out/run.json").read_text("utf-8"))
        jsonschema.validate(document, schema())
        assert '"X-App-Token": "***"' in json.dumps(document)  # the application's entry, its token masked

        # an answer without the configured path: an error naming the path and the entry, retried as a malformed body
        target["http"]["response"] = "data.answer"
        _write(pytester, server, target, HTTP_ANSWER)
        broken = run_project()
        text = "\n".join(broken.outlines)
        assert "model 'shop' (POST " + server.app_url("shop") + ")" in text
        assert "the JSON answer has no 'data.answer' (at 'data': keys reply)" in text
        assert "gave up after 3 attempts" in text
        assert TOKEN not in text


def test_a_python_target_that_names_nothing_is_a_usage_error_before_any_call(pytester, server, run_project):
    _write(pytester, server, {"python": "no_such_shop_app:answer"}, PYTHON_ANSWER)
    result = run_project()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "model 'shop' (python: no_such_shop_app:answer): cannot import 'no_such_shop_app'" in "\n".join(
        result.errlines
    )
    assert server.count() == 0


@pytest.mark.parametrize("kind", ["python", "http"])
def test_an_application_recorded_as_a_release_and_gated_against_it_under_two_workers(
    pytester, server, run_project, monkeypatch, kind
):
    """The application's answers recorded as release v1 (two workers), then its next version
    compared with that record (two workers): only the new version is asked, the record's answers
    are read, and the judge's verdict is reached; the manifest keeps the entry's version."""
    monkeypatch.setenv("SHOP_MODEL_URL", server.base_url)

    def target(version: str) -> dict:
        if kind == "python":
            return {"python": "shop_app:answer_sync", "version": version}
        return {
            "http": {
                "url": server.app_url("shop"),
                "body": {"input": "{{prompt}}", "history": "{{messages}}"},
                "response": "data.reply",
            },
            "version": version,
        }

    def asked() -> int:
        return (
            len(requests_of(server, "tgt"))
            if kind == "python"
            else len([r for r in server.requests if r["model"] == "app:shop"])
        )

    expected = PYTHON_ANSWER if kind == "python" else HTTP_ANSWER
    _write(pytester, server, target("1"), expected)
    recorded = run_project("-n", "2", "--llmbias-record-release", "v1")
    recorded.assert_outcomes(passed=2)
    manifest = json.loads((pytester.path / "bias_releases" / "v1" / "manifest.json").read_text("utf-8"))
    assert manifest["target"]["version"] == "1"
    _write(pytester, server, target("2"), expected)
    against = run_project("-n", "2", "--llmbias-against", "v1", "-k", "test_judged")
    against.assert_outcomes(passed=1)  # (xdist reports no deselection)
    assert asked() == 20  # v1 once, v2 once; the record is never asked
    assert len(requests_of(server, "base_a")) == 10
    verdicts = [g["verdict"] for g in json.loads((pytester.path / "out/run.json").read_text("utf-8"))["gates"]]
    assert verdicts == ["no-worse"] or verdicts == ["not shown biased (underpowered)"], verdicts
