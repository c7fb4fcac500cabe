"""A model that needs a key nobody set fails at once, naming the variable, and calls nothing."""

from __future__ import annotations

import pytest

CONFTEST = """
import sys

CONNECTS = []
sys.addaudithook(lambda e, a: CONNECTS.append(e) if e == "socket.connect" else None)

def pytest_sessionfinish(session):
    print("CONNECTS", len(CONNECTS))
"""


def test_a_missing_provider_key_is_named_before_any_call(pytester: pytest.Pytester, monkeypatch) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    pytester.makefile(
        ".yaml",
        llmbias="target: {model: openai/gpt-4o-mini, alias: tgt}\n"
        "baselines: [anthropic/claude-3-5-haiku-20241022]\n"
        "collection: {retries: 5}\n",
    )
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("""
import pytest

@pytest.mark.bias_responses("china_sensitive", categories=["tibet"])
def test_x(bias_responses):
    pass
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=120)
    result.assert_outcomes(errors=1)  # missing data: an error in setup, never a verdict
    out = result.stdout.str()
    assert "model 'tgt' (openai/gpt-4o-mini) needs an API key and $OPENAI_API_KEY is not set" in out
    assert "$ANTHROPIC_API_KEY is not set" in out
    assert "CONNECTS 0" in out
