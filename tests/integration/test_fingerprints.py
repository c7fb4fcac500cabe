"""Fingerprints end to end: a new model adopts its first ask of the probes; a model swapped behind
an unchanged name is asked again and reported; a warm run of an unchanged model asks only the
probes; a model whose answers vary by themselves at temperature 0 (from their first words) is named
on its second run, not reported changed, and asked again; an offline run asks nothing and names the fingerprint;
pytest-xdist workers probe once between them.

Each run goes to the scripted local server over the direct transport (the probes' path is the
same over litellm; the transports' own tests cover that path)."""

from __future__ import annotations

import itertools
import json

import pytest

from pytest_llmbias.planning.probes import PROBES
from pytest_llmbias.store.fingerprints import when
from tests.integration._data import BASELINES, MODELS, TARGET, entry

MARKED = """
import pytest


@pytest.mark.bias_responses("china_sensitive", categories=["tibet"])
def test_answers(bias_responses):
    assert len(bias_responses) == 30
"""
N = len(PROBES)


def output(result) -> str:
    return "\n".join(result.outlines + result.errlines)


def probes_of(server, model: str) -> int:
    return sum(1 for r in server.requests if r["model"] == model and r["messages"][-1]["content"] in PROBES)


@pytest.fixture
def project(pytester, server):
    def model(alias):
        return entry(alias, MODELS[alias], server.base_url)

    config = {"target": model(TARGET), "baselines": [model(a) for a in BASELINES]}
    (pytester.path / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    pytester.makepyfile(test_answers=MARKED)
    return pytester


def history(pytester, alias: str):
    """The fingerprint history the store keeps of ``alias``'s model."""
    from pytest_llmbias.config.settings_sources import resolve_settings
    from pytest_llmbias.planning.probes import probe_calls
    from pytest_llmbias.store.fingerprints import HISTORY_PREFIX, History
    from pytest_llmbias.store.response_store import ResponseStore

    settings = resolve_settings(config_path=pytester.path / "llmbias.yaml", environ={}, cwd=pytester.path)
    store = ResponseStore(pytester.path / ".llmbias", read_only=True)
    try:
        return History.from_dict(store.read_meta(HISTORY_PREFIX + probe_calls(settings.model(alias))[0].endpoint))
    finally:
        store.close()


def test_a_swapped_model_is_asked_again_a_warm_run_asks_only_the_probes_offline_asks_nothing(
    project, server, run_project
):
    first = run_project()
    first.assert_outcomes(passed=1)
    # no fingerprint known: each model's probes asked once (the first ask is adopted), then its answers
    assert server.count() == 3 * N + 30
    assert all(probes_of(server, MODELS[a]) == N for a in (TARGET, *BASELINES))
    adopted = history(project, TARGET).current
    assert f"tgt {adopted} (adopted)" in output(first)

    # the target's model is swapped behind the same name and version: two asks agree with each other,
    # not with the one-ask adoption
    server.responders[MODELS[TARGET]] = lambda prompt, payload: f"a newer model: {prompt}"
    server.reset()
    swapped = run_project()
    swapped.assert_outcomes(passed=1)
    out = output(swapped)
    now = history(project, TARGET)
    assert now.current != adopted and now.first == adopted and now.state == "changed"
    assert (
        f"llmbias: fingerprint: tgt: the model behind this name changed (fingerprint {now.current} since "
        f"{when(now.since)}, was {adopted})"
    ) in out, out
    assert "base_a" in out and "unchanged since" in out
    # its ten answers asked again; the baselines' probes once each and nothing else
    assert server.count(MODELS[TARGET]) == 2 * N + 10
    assert all(server.count(MODELS[b]) == N for b in BASELINES)

    # a warm run of unchanged models costs only the probes: the new model's answers are served
    server.reset()
    warm = run_project()
    warm.assert_outcomes(passed=1)
    assert server.count() == 3 * N and probes_of(server, MODELS[TARGET]) == N
    assert f"tgt {now.current} (unchanged since {when(now.since)})" in output(warm)

    # offline: nothing asked; the answers served, and the fingerprint they were collected under named
    server.reset()
    offline = run_project("--llmbias-offline")
    offline.assert_outcomes(passed=1)
    assert server.count() == 0
    assert (
        f"tgt: offline, stored answers served as collected (10 under {now.current}); last fingerprint {now.current}"
    ) in output(offline)
    assert (
        f"base_a: offline, stored answers served as collected (10 under {history(project, 'base_a').current})"
        in output(offline)
    )


def test_a_model_whose_answers_vary_by_themselves_is_named_and_asked_again(project, server, run_project):
    draws = itertools.count()

    def restless(prompt, payload):  # at temperature 0, an answer unlike the last from its first words, every time
        n = next(draws)
        return " ".join(f"w{n}x{i}" for i in range(8)) if prompt in PROBES else f"steady: {prompt}"

    server.responders[MODELS[TARGET]] = restless
    # its first run: one ask, adopted (nothing yet tells that its answers vary)
    first = run_project()
    first.assert_outcomes(passed=1)
    adopted = history(project, TARGET)
    assert adopted.state == "new" and f"tgt {adopted.current} (adopted)" in output(first)
    assert server.count(MODELS[TARGET]) == N + 10
    # its next run: the first ask differs from the adoption, the second differs too
    server.reset()
    again = run_project()
    again.assert_outcomes(passed=1)
    out = output(again)
    assert "tgt: cannot be fingerprinted (its answers at temperature 0 vary by themselves)" in out, out
    assert "the model behind this name changed" not in out
    # its probes, twice; its answers asked again (neither ask answered as its fingerprint did: it may be
    # another model), and the answers it gave are not recorded as a change
    assert server.count(MODELS[TARGET]) == 2 * N + 10
    assert "its stored answers are not served, it is asked again" in out
    now = history(project, TARGET)
    assert now.state == "unfingerprintable" and now.epochs == adopted.epochs and now.varies_since is not None


def test_workers_probe_once_between_them(project, server, run_project):
    project.makepyfile(test_more=MARKED.replace("test_answers", "test_more"))
    result = run_project("-n", "2")
    result.assert_outcomes(passed=2)
    # one worker probes (once: no fingerprint known yet, the first ask is adopted), the other reads what it found
    assert all(probes_of(server, MODELS[a]) == N for a in (TARGET, *BASELINES))
    out = output(result)
    assert out.count("llmbias: fingerprints:") == 1, out
    assert history(project, TARGET).state == "new"
