"""No key, no guess: a call that cannot carry the key (or endpoint) it needs fails before its first
attempt, in one line naming what to set."""

from __future__ import annotations

import pytest

from pytest_llmbias.clients.litellm_client import check_credentials
from pytest_llmbias.config.settings import ModelSpec
from pytest_llmbias.errors import ConfigError


def error(spec: ModelSpec, env: dict[str, str], **kw) -> str:
    with pytest.raises(ConfigError) as info:
        check_credentials(spec, environ=env, **kw)
    return str(info.value)


def test_the_provider_s_variable_is_named_when_it_is_unset() -> None:
    msg = error(ModelSpec(model="anthropic/claude-3-5-sonnet-20240620", alias="c"), {})
    assert msg.startswith(
        "model 'c' (anthropic/claude-3-5-sonnet-20240620) needs an API key and $ANTHROPIC_API_KEY is not set"
    )
    assert "api_key_env" in msg and "api_base" in msg and "\n" not in msg
    check_credentials(
        ModelSpec(model="anthropic/claude-3-5-sonnet-20240620", alias="c"), environ={"ANTHROPIC_API_KEY": "sk-x"}
    )


def test_the_direct_transport_at_openai_needs_openai_s_key() -> None:
    msg = error(ModelSpec(model="openai/gpt-4o", alias="g"), {}, direct=True)
    assert "$OPENAI_API_KEY is not set" in msg
    check_credentials(ModelSpec(model="openai/gpt-4o", alias="g"), environ={"OPENAI_API_KEY": "sk"}, direct=True)


def test_a_provider_without_an_endpoint_is_told_to_set_one() -> None:
    msg = error(ModelSpec(model="ollama/llama3", alias="l"), {})
    assert "has no endpoint: set $OLLAMA_API_BASE, or give 'api_base'" in msg


def test_the_entry_s_own_variable_is_named() -> None:
    msg = error(ModelSpec(model="openai/x", alias="x", api_base="http://127.0.0.1:1/v1", api_key_env="MY_KEY"), {})
    assert "$MY_KEY" in msg and "not set" in msg


@pytest.mark.parametrize("direct", [False, True])
def test_a_local_server_needs_no_key(direct: bool) -> None:
    check_credentials(
        ModelSpec(model="openai/x", alias="x", api_base="http://127.0.0.1:8000/v1"), environ={}, direct=direct
    )
