"""Fingerprints on a busy batching server: a server whose every other greedy answer ends in other
words (as vLLM or ``llmbias serve`` may answer a probe decoded beside other traffic) keeps its
models "unchanged" and their answers served from the store; a model swapped behind the same name on
that server is still found changed, its answers asked again, and pytest's last line says so under
``-q``; the probes go alone, before the run's calls."""

from __future__ import annotations

import json

import pytest

from pytest_llmbias.planning.probes import PROBES
from tests.integration._data import BASELINES, MODELS, TARGET, entry
from tests.integration.test_fingerprints import MARKED, N, output
from tests.openai_server import OpenAIServer


@pytest.fixture
def server():
    with OpenAIServer(latency=0.02, restless_ends=True) as s:
        yield s


@pytest.fixture
def project(pytester, server):
    def model(alias):
        return entry(alias, MODELS[alias], server.base_url)

    config = {"target": model(TARGET), "baselines": [model(a) for a in BASELINES]}
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    pytester.makepyfile(test_answers=MARKED)
    return pytester


def probe_texts(server, model: str) -> set[str]:
    return {
        r["messages"][-1]["content"]
        for r in server.requests
        if r["model"] == model and r["messages"][-1]["content"] in PROBES
    }


def stored_probe_answers(pytester) -> list[tuple[str, str]]:
    """Each model's probes as answered last (stored) beside the answers its current fingerprint holds."""
    from pytest_llmbias.config.settings_sources import resolve_settings
    from pytest_llmbias.planning.probes import probe_calls
    from pytest_llmbias.store.fingerprints import HISTORY_PREFIX, History
    from pytest_llmbias.store.response_store import ResponseStore

    settings = resolve_settings(config_path=pytester.path / "llmbias.yaml", environ={}, cwd=pytester.path)
    store = ResponseStore(pytester.path / ".llmbias", read_only=True)
    try:
        out = []
        for alias in (TARGET, *BASELINES):
            calls = probe_calls(settings.model(alias))
            epoch = History.from_dict(store.read_meta(HISTORY_PREFIX + calls[0].endpoint)).epochs[-1]
            assert epoch.answers, "the fingerprint keeps its answers"
            out += [(store.get(c.key).text, known) for c, known in zip(calls, epoch.answers, strict=True)]
        return out
    finally:
        store.close()


def test_a_busy_servers_other_ends_are_the_same_model_and_a_swap_on_it_is_still_caught(project, server, run_project):
    first = run_project()
    first.assert_outcomes(passed=1)
    assert server.count() == 3 * N + 30

    varied = 0
    # the next runs: about half the probe answers end in other words than the adopted ones
    for _ in range(2):
        server.reset()
        warm = run_project()
        warm.assert_outcomes(passed=1)
        out = output(warm)
        # no second ask, no answer asked again: only the probes, once a model
        assert server.count() == 3 * N, out
        assert "cannot be fingerprinted" not in out and "the model behind this name changed" not in out, out
        assert " ".join(out.split()).count("unchanged since") == 3, out
        varied += sum(now != then for now, then in stored_probe_answers(project))
    # the server did vary them: some answers stored were not those the fingerprints were adopted with
    assert varied >= N

    # the target's model swapped behind the same name on the same busy server
    server.responders[MODELS[TARGET]] = lambda prompt, payload: f"Another model altogether replies: {prompt.upper()}"
    server.reset()
    # the controller says it, from what its workers found; with every plugin of this environment on
    # (hypothesis' reads each entry pytest's last line counts)
    swapped = project.runpytest_inprocess("-p", "no:cacheprovider", "-rA", "-q", "-n", "2")
    swapped.assert_outcomes(passed=1)
    out = output(swapped)
    # its probes asked twice (the change seen twice), its ten answers asked again; the baselines served
    assert server.count(MODELS[TARGET]) == 2 * N + 10, out
    assert all(server.count(MODELS[b]) == N for b in BASELINES)
    assert probe_texts(server, MODELS[TARGET]) == set(PROBES)
    # -q hides the header, and pytest's last line still says it
    assert "llmbias: fingerprint" not in out, out
    assert any("1 passed" in line and "1 model changed" in line for line in swapped.outlines), out


def test_the_probes_go_alone_before_the_runs_calls_even_for_a_new_model(project, server, run_project):
    """A first ask is adopted whatever it answers, but one decoded beside the run's own calls may
    be a busy server's early variant, which the model's next quiet run would read as changed."""
    server.latency = 0.4
    first = run_project()
    first.assert_outcomes(passed=1)
    probes = [r["time"] for r in server.requests if r["messages"][-1]["content"] in PROBES]
    calls = [r["time"] for r in server.requests if r["messages"][-1]["content"] not in PROBES]
    assert len(probes) == 3 * N and len(calls) == 30
    assert min(calls) >= max(probes) + server.latency * 0.9
    # what the calls answered is tagged with the fingerprint adopted
    server.reset()
    offline = run_project("--llmbias-offline")
    offline.assert_outcomes(passed=1)
    out = " ".join(output(offline).split())
    assert "untagged" not in out and out.count("stored answers served as collected (10 under ") == 3, out
