"""Fixtures shared by the network-path tests: the scripted local server and a clean environment."""

from __future__ import annotations

import os

import pytest

from tests.openai_server import OpenAIServer

KEY_ENV = "LLMBIAS_IT_API_KEY"
"""The variable the test rosters name in ``api_key_env``."""


@pytest.fixture
def server():
    with OpenAIServer(latency=0.02) as s:
        yield s


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-integration-test")
    for var in list(os.environ):
        if var.startswith("LLMBIAS_") and var != KEY_ENV:
            monkeypatch.delenv(var)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
