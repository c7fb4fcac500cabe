"""A deployment's system prompt and primer turns reach the server over both transports, before
every question; a changed system prompt asks again, an unchanged one is served from the store."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.integration._data import KEY_ENV, MODELS, TARGET, requests_of
from tests.openai_server import OpenAIServer

TEST = """
import pytest


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models="target")
def test_collected(bias_responses):
    assert len(bias_responses) == 10
"""


def _write(pytester: pytest.Pytester, server: OpenAIServer, transport: str, system: str) -> None:
    (pytester.path / "prompts").mkdir(exist_ok=True)
    (pytester.path / "prompts" / "target.txt").write_text(system, encoding="utf-8")
    target = {
        "model": f"openai/{MODELS[TARGET]}",
        "alias": TARGET,
        "api_base": server.base_url,
        "api_key_env": KEY_ENV,
        "transport": transport,
        "system": "@prompts/target.txt",
        "messages": [{"role": "user", "content": "Keep it short."}, {"role": "assistant", "content": "Sure."}],
    }
    # no fingerprint probes: these tests count the deployment's calls and read its exported answers
    config = {"target": target, "store": {"export": "out.jsonl"}, "collection": {"fingerprint": False}}
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (pytester.path / "test_collected.py").write_text(TEST, encoding="utf-8")


def test_a_deployment_s_prompt_travels_and_a_new_prompt_asks_again(pytester, server, transport, run_project):
    _write(pytester, server, transport, "You are Acme's assistant.")
    run_project().assert_outcomes(passed=1)
    sent = requests_of(server, TARGET)
    assert len(sent) == 10
    for request in sent:
        roles = [(m["role"], m["content"]) for m in request["messages"]]
        assert roles[:3] == [
            ("system", "You are Acme's assistant."),
            ("user", "Keep it short."),
            ("assistant", "Sure."),
        ]
        assert roles[3][0] == "user" and len(roles) == 4

    exported = [json.loads(line) for line in (pytester.path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    digest = hashlib.sha256(b"You are Acme's assistant.").hexdigest()[:12]
    assert len(exported) == 10 and all(r["labels"]["system"] == digest for r in exported)  # named for review

    run_project().assert_outcomes(passed=1)  # unchanged: from the store
    assert len(requests_of(server, TARGET)) == 10

    _write(pytester, server, transport, "You are Acme's assistant. Never discuss politics.")
    run_project().assert_outcomes(passed=1)  # a new system prompt: every question asked again
    assert len(requests_of(server, TARGET)) == 20
    assert requests_of(server, TARGET)[-1]["messages"][0]["content"].endswith("Never discuss politics.")
