"""Credentials: which names carry one, how they leave a call's identity, and how text is masked."""

from __future__ import annotations

import logging

import pytest

from pytest_llmbias.config.redaction import (
    MASK,
    LogMask,
    Redactor,
    is_credential_name,
    merge_credentials,
    spec_secrets,
    split_credentials,
    strip_userinfo,
)
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.store.calls import ModelCall


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "Authorization",
        "X-Api-Key",
        "api-key",
        "aws_secret_access_key",
        "access_token",
        "password",
        "Proxy-Authorization",
        "vertex_credentials",
        "apiKey",
        "Ocp-Apim-Subscription-Key",
        "Cookie",
    ],
)
def test_credential_names(name):
    assert is_credential_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_tokens",
        "max_completion_tokens",
        "top_k",
        "temperature",
        "seed",
        "api_version",
        "X-Trace",
        "keyword_bias",
        "user",
    ],
)
def test_ordinary_names(name):
    assert not is_credential_name(name)


def test_split_and_merge_credentials():
    params = {
        "temperature": 0.2,
        "api_token": "t0k3n-abc",
        "extra_headers": {"X-Api-Key": "hdr-123456", "X-Trace": "on"},
    }
    public, secret = split_credentials(params)
    assert public == {"temperature": 0.2, "extra_headers": {"X-Trace": "on"}}
    assert secret == {"api_token": "t0k3n-abc", "extra_headers": {"X-Api-Key": "hdr-123456"}}
    assert merge_credentials(public, secret) == params


def test_strip_userinfo():
    assert strip_userinfo("https://u:p4ss@proxy.example:8443/v1") == "https://proxy.example:8443/v1"
    assert strip_userinfo("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert strip_userinfo(None) is None


def spec(**kw):
    return ModelSpec(model="openai/m", alias="m", **kw)


def test_call_identity_has_no_credentials(monkeypatch):
    a = spec(api_base="http://u:pw-one-1@h/v1", params={"extra_headers": {"Authorization": "Bearer sk-one-111"}})
    b = spec(api_base="http://u:pw-two-2@h/v1", params={"extra_headers": {"Authorization": "Bearer sk-two-222"}})
    ca, cb = (ModelCall.build(s, "hi", GenerationSettings()) for s in (a, b))
    assert ca.key == cb.key  # a rotated key keeps the store valid
    assert ca.api_base == "http://h/v1"
    assert ca.credentials == {
        "extra_headers": {"Authorization": "Bearer sk-one-111"},
        "api_base": "http://u:pw-one-1@h/v1",
    }
    for text in (repr(ca), str(ca.canonical())):
        assert "sk-one" not in text and "pw-one" not in text


def test_spec_to_dict_masks_credentials():
    s = spec(api_base="http://u:pw-xyz@h/v1", params={"extra_headers": {"X-Api-Key": "k-12345", "X-Trace": "on"}})
    d = s.to_dict()
    assert d["api_base"] == "http://h/v1"
    assert d["params"] == {"extra_headers": {"X-Trace": "on", "X-Api-Key": MASK}}


def test_spec_secrets(monkeypatch):
    s = spec(api_base="http://probe:pw-xyz9@h/v1", api_key_env="K_ENV", params={"client_secret": "cs-4567"})
    found = spec_secrets(s, {"K_ENV": "sk-live-0001"})
    assert {"sk-live-0001", "pw-xyz9", "cs-4567"} <= set(found)


def test_redactor_masks_values_and_recognisable_credentials():
    redact = Redactor(["sk-live-0001", "abc"])  # too short to mask by value
    text = (
        "key sk-live-0001 in a body; {'Authorization': 'Bearer other-token-77'}; "
        "api-key: zzz999; url http://bob:hunter22@host/v1; abc stays"
    )
    out = redact(text)
    assert "sk-live-0001" not in out and "other-token-77" not in out and "zzz999" not in out
    assert "hunter22" not in out and "bob" not in out
    assert "'Authorization': 'Bearer ***'" in out and "http://***@host/v1" in out and "abc stays" in out
    assert redact.leaks(text) and not redact.leaks(out)
    assert redact(out) == out


def test_log_mask_masks_every_record(caplog):
    mask = LogMask(Redactor(["sk-log-secret-1"])).install()
    try:
        log = logging.getLogger("some.library.child")
        with caplog.at_level(logging.DEBUG):
            log.warning("sent %s", "sk-log-secret-1")
            try:
                raise RuntimeError("failed with sk-log-secret-1")
            except RuntimeError:
                log.exception("boom")
    finally:
        mask.uninstall()
    assert "sk-log-secret-1" not in caplog.text
    assert "sent ***" in caplog.text and "failed with ***" in caplog.text
    assert logging.getLogRecordFactory() is logging.LogRecord
