"""A call's price: litellm's offline price map is the oracle, and a model no entry of it names is
told unknown without importing litellm (seconds at the end of a run that fetched anything)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHECK = textwrap.dedent(
    """
    import json, sys
    from pytest_llmbias.clients.pricing import _may_be_priced, price

    names = json.loads(sys.argv[1])
    unknown = price("openai/acme-chat-2", 1000, 1000)
    before = {name: _may_be_priced(name) for name in names}
    imported = "litellm" in sys.modules

    from pytest_llmbias.clients.litellm_import import import_litellm

    litellm = import_litellm()
    priced = {}
    for name in names:
        try:
            litellm.cost_per_token(model=name, prompt_tokens=1000, completion_tokens=1000)
            priced[name] = True
        except Exception:
            priced[name] = False
    print(json.dumps({"unknown": unknown, "imported": imported, "before": before, "priced": priced}))
    """
)

NAMES = [
    "gpt-4o-mini",
    "openai/gpt-4o",
    "openai/gpt-4o-mini-2024-07-18",
    "anthropic/claude-3-5-sonnet-20240620",
    "claude-3-haiku-20240307",
    "azure/gpt-4o",
    "gemini/gemini-1.5-pro",
    "mistral/mistral-large-latest",
    "groq/llama3-70b-8192",
    "ft:gpt-4o-mini-2024-07-18:acme::abc123",
    "openai/acme-chat-2",
    "openai/smollm2-135m",
    "hosted_vllm/my-finetune",
]


def test_a_model_the_map_cannot_price_is_unknown_without_importing_litellm_and_no_priced_one_is_missed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(NAMES)], capture_output=True, text=True, check=True, timeout=120
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["unknown"] is None and out["imported"] is False  # told unknown, litellm never imported
    priced = out["priced"]
    assert priced["gpt-4o-mini"] and priced["openai/gpt-4o"] and not priced["openai/acme-chat-2"]
    missed = [name for name in NAMES if priced[name] and not out["before"][name]]
    assert missed == []  # every model litellm prices is handed to it
    assert not out["before"]["openai/acme-chat-2"] and not out["before"]["openai/smollm2-135m"]
