"""Fixtures shared by the network-path tests: the scripted local server, a clean environment, the
project's settings file and the pytest runner."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest

from tests.inline import preload
from tests.integration._data import BASELINES, KEY_ENV, MODELS, QUIET, TARGET, entry
from tests.openai_server import OpenAIServer

preload()


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


@pytest.fixture(params=["litellm", "openai"])
def transport(request: pytest.FixtureRequest) -> str:
    """Each network-path test runs over both transports: litellm and the direct
    OpenAI-compatible client."""
    return request.param


@pytest.fixture
def write_config(pytester: pytest.Pytester, transport: str) -> Callable[..., None]:
    """``write_config(server, **collection)`` writes the project's llmbias.yaml: the target and the
    two baselines of ``_data.MODELS``, all served by ``server`` over ``transport``, and the given
    collection settings. Fingerprints are off unless ``fingerprint=True`` is given, and one sample
    of each answer is asked unless ``max_samples=`` is: these tests
    count and script each model's calls, and the probes are tested in test_fingerprints.py."""

    def write(server: OpenAIServer, **collection) -> None:
        collection.setdefault("fingerprint", False)
        # one sample of each answer unless asked: these tests count calls (the default budget of
        # five is tested in test_suite_over_http.py)
        collection.setdefault("max_samples", 1)

        def model(alias):
            return entry(alias, MODELS[alias], server.base_url, transport=transport)

        config = {"target": model(TARGET), "baselines": [model(a) for a in BASELINES]}
        if collection:
            config["collection"] = collection
        # JSON is YAML
        (pytester.path / "llmbias.yaml").write_text(json.dumps(config, indent=2), encoding="utf-8")

    return write


@pytest.fixture
def run_project(pytester: pytest.Pytester) -> Callable[..., pytest.RunResult]:
    """``run_project(*args)`` runs pytest on the project in this process (quiet: no cache
    provider, no hypothesis plugin; ``-rA``): the network path is the same in either, and a
    subprocess would pay pytest's and the plugin's imports on every run. A test about processes
    (a killed run, workers) starts them itself."""

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_inprocess(*QUIET, "-rA", *args)

    return run


_SMOLLM: list = []


@pytest.fixture(scope="session")
def smollm(request: pytest.FixtureRequest):
    """The real SmolLM2-135M server (``pytest_llmbias/local/server.py``, ``llmbias serve``), started once a session and
    stopped when the session ends: the model takes half a minute to load, and a pytest-xdist
    worker tears its session fixtures down whenever its queue runs dry, which would load it again."""
    from pytest_llmbias.local.server import SmolLMServer

    if not _SMOLLM:
        server = SmolLMServer().__enter__()
        _SMOLLM.append(server)
        request.config.add_cleanup(lambda: server.__exit__(None, None, None))
    return _SMOLLM[0]
