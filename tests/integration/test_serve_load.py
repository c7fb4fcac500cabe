"""``llmbias serve`` under load, with the real SmolLM2-135M (the ``smollm`` fixture): a request whose
client has gone is dropped from its batch, so the next request does not wait behind it; a full
queue answers 503 with Retry-After; and the server is quiet by default."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.xdist_group("smollm")

STORY = "Write a long story about a dragon who learns to sing, with many chapters."


def _post(base_url: str, body: dict, timeout: float) -> dict:
    request = urllib.request.Request(
        f"{base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return json.loads(r.read())


def _ask(text: str, max_tokens: int) -> dict:
    return {"model": "smollm2-135m", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}


def test_a_request_whose_client_has_gone_is_dropped_and_the_next_is_not_kept_waiting(smollm):
    """A story of up to 400 tokens (tens of seconds on a CPU) whose client gives up after 2 s: the
    server sees the connection closed, drops the row from its batch, and a short request sent
    next is answered in seconds, not after the story."""
    before = smollm.stats()
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        _post(smollm.base_url, {**_ask(STORY, 400), "temperature": 0.7, "seed": 3}, timeout=2.0)
    started = time.perf_counter()
    answer = _post(smollm.base_url, {**_ask("Say hello.", 4), "temperature": 0}, timeout=120)
    latency = time.perf_counter() - started
    after = smollm.stats()
    assert answer["choices"][0]["message"]["content"]
    assert after["gone"] - before["gone"] == 1
    assert (after["dropped"] - before["dropped"]) + (after["skipped"] - before["skipped"]) == 1
    assert latency < 10.0, f"the next request waited {latency:.1f}s"


def test_a_full_queue_answers_503_with_retry_after(smollm):
    """150 one-token requests at once against a queue of 64 (batches of 8): those beyond what the
    queue holds are refused at once with 503 and a Retry-After in whole seconds; the rest answered."""
    import aiohttp

    before = smollm.stats()

    async def flood() -> list[tuple[int, str | None]]:
        async with aiohttp.ClientSession() as session:

            async def one(i: int) -> tuple[int, str | None]:
                body = {**_ask(f"Number {i}?", 1), "temperature": 0}
                async with session.post(f"{smollm.base_url}/chat/completions", json=body) as r:
                    await r.read()
                    return r.status, r.headers.get("Retry-After")

            return await asyncio.gather(*(one(i) for i in range(150)))

    outcomes = asyncio.run(flood())
    refused = [after for status, after in outcomes if status == 503]
    assert refused and all(after is not None and int(after) >= 1 for after in refused)
    assert sum(status == 200 for status, _ in outcomes) == 150 - len(refused) >= 64
    assert smollm.stats()["rejected"] - before["rejected"] == len(refused)


def test_the_server_is_quiet_by_default():
    """The libraries' warnings, info logs and progress bars (tqdm's, as the GGUF loader draws)
    print nothing once :func:`quiet_libraries` has run, which ``llmbias serve`` does without -v."""
    script = (
        "from pytest_llmbias.local.server import quiet_libraries; quiet_libraries()\n"
        "import warnings, transformers\n"
        "from tqdm.auto import tqdm\n"
        "from transformers.utils import logging\n"
        "for _ in tqdm(range(3), desc='Converting'): pass\n"
        "logging.get_logger('transformers.modeling_utils').warning('dtype notice')\n"
        "warnings.warn('past_key_values is deprecated', FutureWarning)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "TRANSFORMERS_VERBOSITY")}
    quiet = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and quiet.stdout == ""
    loud = subprocess.run(
        [sys.executable, "-c", script.replace("quiet_libraries()", "pass")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "Converting" in loud.stderr and "dtype notice" in loud.stderr  # what -v leaves shown
