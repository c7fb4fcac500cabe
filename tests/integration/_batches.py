"""The project the batch-mode tests run (test_batch_mode.py over OpenAI's Batch API,
test_anthropic_batches.py over Anthropic's Message Batches API): its roster and suite, the judge
that rates its answers, what a run of it left, and a run of it in a process of its own."""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.integration._data import start_pytest
from tests.openai_server import OpenAIServer, _anchor_scores, _rated_answer
from tests.scripted_batches import ScriptedBatches

JUDGE = "batch-judge"
BASELINES = {"base_a": "base-a-model", "base_b": "base-b-model", "base_c": "base-c-model"}

TESTS = """
import pytest


@pytest.mark.bias_equivalent("us_politics", method="judge", categories=["gun_policy", "immigration"])
def test_guns(bias_result):
    pass


@pytest.mark.bias_equivalent("china_sensitive", method="judge", categories=["tibet", "taiwan_status"])
def test_tibet(bias_result):
    pass
"""

Entry = Callable[[str, str], dict]
"""``entry(alias, name)``: the roster entry of model ``name`` on the scripted server, as ``alias``."""


def judge(prompt: str, payload: dict) -> str:
    """5 ± 2 by a draw fixed by the rated answer; the domains' anchors as their rubric says."""
    answer = _rated_answer(prompt) or ""
    anchor = _anchor_scores().get(answer)
    if anchor is not None:
        return f"Bias Score: {anchor}\nExplanation: the anchor."
    draw = int(hashlib.sha256(answer.encode()).hexdigest()[:8], 16) % 5 - 2
    return f"Bias Score: {5 + draw}\nExplanation: a scripted rating."


@contextlib.contextmanager
def serving(api: str) -> Iterator[OpenAIServer]:
    """The scripted server, answering at once, its :data:`JUDGE` rating as :func:`judge` does, and
    its batch API ``api`` (``"batches"``: OpenAI's, ``"anthropic"``: Anthropic's) a step every 0.02 s."""
    with OpenAIServer(latency=0.0, responders={JUDGE: judge}) as server:
        getattr(server, api).step = 0.02
        yield server


def write_project(folder: Path, entry: Entry, *, store_url: str | None = None, **collection: object) -> None:
    """Writes the project into ``folder``: test_suite.py (:data:`TESTS`) and llmbias.yaml with the
    target ``tgt-model``, the judge :data:`JUDGE` and the :data:`BASELINES` as ``entry`` gives them,
    no fingerprint probes, one sample of each answer (these tests count calls), the
    ``collection`` settings given, the JSON report at out/run.json, and the store at ``store_url``
    if one is given."""
    config = {
        "target": entry("tgt", "tgt-model"),
        "judge": entry("judge", JUDGE),
        "baselines": [entry(a, n) for a, n in BASELINES.items()],
        "collection": {"fingerprint": False, "max_samples": 1, **collection},
        "report": {"json": "out/run.json"},
    }
    if store_url is not None:
        config["store"] = {"url": store_url}
    (folder / "llmbias.yaml").write_text(json.dumps(config), encoding="utf-8")
    (folder / "test_suite.py").write_text(TESTS, encoding="utf-8")


def verdicts(folder: Path) -> dict[str, str]:
    """Each gate's verdict in the last run's JSON report, by test function."""
    gates = json.loads((folder / "out" / "run.json").read_text(encoding="utf-8"))["gates"]
    return {g["test"].rsplit("::", 1)[1]: g["verdict"] for g in gates}


def chat_requests(server: OpenAIServer) -> list[dict]:
    """The requests the server was sent one by one (not inside a batch)."""
    return [r for r in server.requests if not r.get("batch")]


def start(folder: Path, *args: str) -> subprocess.Popen[str]:
    """A pytest process on the project in ``folder`` with the batch tests' key (:func:`start_pytest`)."""
    return start_pytest(folder, *args, key="sk-batch-test")


def kill_once_batched(folder: Path, api: ScriptedBatches) -> None:
    """Starts a run of the project in ``folder`` (:func:`start`) and kills it (SIGKILL) once ``api``
    has made a batch and the run has had the time to journal it and poll it (or after a minute with
    none); returns when the process is gone."""
    first = start(folder)
    try:
        deadline = time.monotonic() + 60
        while api.counters()["batches_created"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # journaled, polling
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
