"""Applications as model entries (``python:``, ``http:``) and ``version:`` on every entry: how they
parse, how a body template is filled, how a dotted path reads an answer, and what a call's
identity holds."""

from __future__ import annotations

import asyncio
import json
import random
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_llmbias.clients.litellm_client import ModelClient
from pytest_llmbias.clients.pricing import Budget, price
from pytest_llmbias.clients.python_target import ModelRegistry, check_callables
from pytest_llmbias.clients.retry import RetryPolicy
from pytest_llmbias.config.app_targets import HttpApp, dig, parse_body, render_body
from pytest_llmbias.config.redaction import Redactor
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec, Settings
from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.errors import ConfigError, PathMissing, ProviderError, TemplateError
from pytest_llmbias.releases.release import Release, manifest
from pytest_llmbias.store.calls import ModelCall, Response

GEN = GenerationSettings(temperature=0.5, max_tokens=100, seed=40)
KNOWN = ("prompt", "messages", "temperature", "max_tokens", "seed")


def resolve(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "llmbias.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return resolve_settings(cli={}, environ={}, config_path=path, cwd=tmp_path)


def config_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(tmp_path, text)
    return str(info.value)


# -- parsing the entries ------------------------------------------------------------------------------


def test_python_and_http_entries_parse_as_target_baseline_and_judge(tmp_path: Path) -> None:
    s = resolve(
        tmp_path,
        """
        target: {python: "my_app.chain:answer", version: "2024-06", params: {top_k: 3}, system: Be brief.}
        baselines:
          - {model: openai/b, version: 7}
          - alias: support
            http:
              url: http://127.0.0.1:9/api/chat
              headers: {X-Token: "${APP_TOKEN}", X-Tenant: acme}
              body: {input: "{{prompt}}", history: "{{messages}}"}
              response: data.reply
              usage: meta.usage
        judge: {python: grader}
    """,
    )
    target, (plain, app), judge = s.target, s.baselines, s.judge
    assert (target.model, target.alias, target.python, target.version) == (
        "python:my_app.chain:answer",
        "answer",
        "my_app.chain:answer",
        "2024-06",
    )
    assert target.params == {"top_k": 3} and target.system == "Be brief." and target.structured is False
    assert plain.version == "7"  # an integer version reads as its text
    assert app.model == "http:POST http://127.0.0.1:9/api/chat" and app.alias == "support"
    assert app.http == HttpApp(
        url="http://127.0.0.1:9/api/chat",
        body={"input": "{{prompt}}", "history": "{{messages}}"},
        response="data.reply",
        headers=(("X-Token", "${APP_TOKEN}"), ("X-Tenant", "acme")),
        usage="meta.usage",
    )
    assert (judge.model, judge.alias) == ("python:grader", "grader")
    assert target.to_dict()["version"] == "2024-06" and "version" not in s.baselines[1].to_dict()
    assert app.to_dict()["http"]["headers"] == {"X-Token": "***", "X-Tenant": "acme"}


def test_an_http_entry_s_default_alias_is_its_url_s_last_segment(tmp_path: Path) -> None:
    s = resolve(
        tmp_path,
        """
        target: {http: {url: "https://app.example/v2/ask/", body: '{"q": {{prompt}}}', response: answer, method: put}}
    """,
    )
    assert s.target.alias == "ask" and s.target.http.method == "PUT" and s.target.http.body == {"q": "{{prompt}}"}


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            '{model: openai/x, python: "a:b"}',
            r"'target' gives 'model' and 'python': 'model', 'python' and 'http' exclude",
        ),
        ('{python: "a:b", http: {url: "http://x/y", body: {}, response: r}}', r"gives 'python' and 'http'"),
        (
            '{python: "a:b", api_base: "http://x", colour: red}',
            r"unknown keys 'api_base', 'colour' in 'target' \(a python entry\); accepted keys: python, alias, version",
        ),
        ("{model: openai/x, colour: red, size: 2}", r"unknown keys 'colour', 'size' in 'target'"),
        ('{python: "not a target!"}', r"'target.python' must be 'package.module:function'"),
        ('{http: {url: "http://x/y"}}', r"'target.http' needs 'body', 'response'"),
        ('{http: {url: "ftp://x/y", body: {}, response: r}}', r"'target.http.url' must be an http:// or https:// URL"),
        ('{http: {url: "http://u:pw@x/y", body: {}, response: r}}', r"carries a user:password@"),
        (
            '{http: {url: "http://x/y", body: {}, response: r, method: GET}}',
            r"'target.http.method' must be one of POST",
        ),
        ('{http: {url: "http://x/y", body: {q: "{{promt}}"}, response: r}}', r"unknown placeholder \{\{promt\}\}"),
        ('{http: {url: "http://x/y", body: \'{"q": \', response: r}}', r"'target.http.body' is not JSON text"),
        (
            '{http: {url: "http://x/y", body: {}, response: "data..reply"}}',
            r"'target.http.response' must be a dotted path",
        ),
        ('{http: {url: "http://x/y", body: {}, response: r, timeout: 3}}', r"unknown key 'timeout' in 'target.http'"),
        ("{model: openai/x, version: 1.10}", r"'target.version' must be a string \(quote a number"),
        ('"python:a:b"', r"no litellm model string; an application is an entry"),
    ],
)
def test_a_bad_application_entry_is_named_with_file_and_line(tmp_path: Path, entry: str, expected: str) -> None:
    msg = config_error(tmp_path, f"baselines: [openai/b]\ntarget: {entry}\n")
    assert f"{tmp_path / 'llmbias.yaml'}:2" in msg
    assert __import__("re").search(expected, msg), msg


# -- body templates and dotted paths -------------------------------------------------------------------


@pytest.mark.parametrize(
    "prompt",
    ['She said "no" and left', "line one\nline two\ttab \\ backslash", "Ünïcødé 中文 — 🙂", "{{messages}} literally"],
)
def test_a_body_is_valid_json_whatever_the_question(prompt: str) -> None:
    template = parse_body(
        {
            "input": "{{prompt}}",
            "history": "{{messages}}",
            "note": "Q: {{prompt}}",
            "opts": {"t": "{{temperature}}", "seed": "{{seed}}"},
        },
        KNOWN,
    )
    messages = (("system", "Be brief."), ("user", prompt))
    body = json.loads(json.dumps(render_body(template, messages, {"temperature": 0.2, "max_tokens": 9})))
    assert body == {
        "input": prompt,
        "history": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}],
        "note": f"Q: {prompt}",
        "opts": {"t": 0.2, "seed": None},
    }


def test_a_json_text_body_takes_bare_and_quoted_placeholders() -> None:
    template = parse_body('{"input": {{prompt}}, "chat": {{ messages }}, "label": "says \\"{{prompt}}\\""}', KNOWN)
    assert template == {"input": "{{prompt}}", "chat": "{{ messages }}", "label": 'says "{{prompt}}"'}
    body = render_body(template, (("user", 'a "quoted" one'),), {})
    assert body == {
        "input": 'a "quoted" one',
        "chat": [{"role": "user", "content": 'a "quoted" one'}],
        "label": 'says "a "quoted" one"',
    }
    assert json.loads(json.dumps(body)) == body


def test_a_body_template_must_be_json_values() -> None:
    with pytest.raises(TemplateError, match="must be JSON values"):
        parse_body({"when": object()}, KNOWN)
    assert parse_body({"k": "{{top_k}}"}, (*KNOWN, "top_k")) == {"k": "{{top_k}}"}


def test_dotted_paths_read_mappings_and_lists() -> None:
    data = {"data": {"reply": "hi"}, "choices": [{"message": {"content": "first"}}, {"message": {"content": "last"}}]}
    assert dig(data, "data.reply") == "hi"
    assert dig(data, "choices.0.message.content") == "first"
    assert dig(data, "choices.-1.message.content") == "last"
    with pytest.raises(PathMissing, match=r"no 'data.answer' \(at 'data': keys reply\)"):
        dig(data, "data.answer")
    with pytest.raises(PathMissing, match=r"at 'choices': a list of 2"):
        dig(data, "choices.5.message")
    with pytest.raises(PathMissing, match=r"no 'data.reply.text' \(at 'data.reply': a str\)"):
        dig(data, "data.reply.text")


# -- identity: version and the request shape -----------------------------------------------------------

PINNED = "86117c44983077935835c1968d5865c259482beb0107067555a77b765ede248b"  # tests/unit/test_store.py


def test_a_call_without_version_keeps_the_key_it_always_had() -> None:
    spec = ModelSpec(model="openai/m", alias="m", api_base="http://h/v1", params={"top_p": 0.9})
    call = ModelCall.build(spec, "Héllo?", GEN, sample=2)
    assert call.key == PINNED and "version" not in call.canonical() and "request" not in call.canonical()


def test_a_version_is_part_of_the_identity_and_survives_the_store() -> None:
    base = ModelSpec(model="openai/m", alias="m", api_base="http://h/v1", params={"top_p": 0.9})
    v1 = ModelCall.build(ModelSpec(**{**base.__dict__, "version": "1"}), "Héllo?", GEN, sample=2)
    v2 = ModelCall.build(ModelSpec(**{**base.__dict__, "version": "2"}), "Héllo?", GEN, sample=2)
    assert len({PINNED, v1.key, v2.key}) == 3
    record = Response(call=v2, text="an answer").to_dict()
    assert record["version"] == "2"
    assert Response.from_dict(record, source="store").key == v2.key


def test_an_http_app_s_request_shape_is_identity_and_its_credentials_are_not() -> None:
    def spec(**http) -> ModelSpec:
        app = HttpApp(**{"url": "http://app/ask", "body": {"q": "{{prompt}}"}, "response": "data.reply", **http})
        return ModelSpec(model=f"http:POST {app.url}", alias="app", http=app)

    key = ModelCall.build(spec(), "Q?", GEN).key
    assert ModelCall.build(spec(headers=(("Authorization", "Bearer ${A}"),)), "Q?", GEN).key == key
    assert ModelCall.build(spec(headers=(("X-Key", "literal-secret"),)), "Q?", GEN).key == key
    assert ModelCall.build(spec(headers=(("X-Mode", "strict"),)), "Q?", GEN).key != key
    assert ModelCall.build(spec(body={"q": "{{prompt}}", "v": 2}), "Q?", GEN).key != key
    assert ModelCall.build(spec(response="data.text"), "Q?", GEN).key != key
    record = Response(call=ModelCall.build(spec(), "Q?", GEN), text="x").to_dict()
    assert Response.from_dict(json.loads(json.dumps(record)), source="store").key == key


def test_a_release_manifest_keeps_the_version_and_rebuilds_the_same_calls(tmp_path: Path) -> None:
    app = HttpApp(
        url="http://app/ask",
        body={"q": "{{prompt}}"},
        response="data.reply",
        headers=(("Authorization", "Bearer ${APP_TOKEN}"), ("X-Mode", "fast")),
    )
    target = ModelSpec(model=f"http:POST {app.url}", alias="app", http=app, version="3.1")
    responses = tmp_path / "responses.jsonl"
    responses.write_text("", encoding="utf-8")
    body = manifest(
        Settings(target=target),
        name="v1",
        responses=responses,
        count=0,
        domains={},
        created="now",
        plugin_version="0",
        commit=None,
    )
    assert body["target"]["version"] == "3.1" and "${APP_TOKEN}" not in json.dumps(body)
    spec = Release("v1", tmp_path, json.loads(json.dumps(body))).spec()
    live, recorded = ModelCall.build(target, "Q?", GEN), ModelCall.build(spec, "Q?", GEN)
    assert (recorded.version, recorded.request) == (live.version, live.request)
    assert recorded.model == "release:v1/" + live.model


# -- Python targets through the client -----------------------------------------------------------------


def _client(spec: ModelSpec, registry=None, **kw) -> ModelClient:
    async def no_sleep(_: float) -> None:
        return None

    return ModelClient(
        spec,
        timeout=kw.pop("timeout", 5.0),
        policy=RetryPolicy(retries=2, base=0.01, cap=0.02),
        sleep=no_sleep,
        rng=random.Random(0),
        registry=registry,
        **kw,
    )


def test_a_sync_and_an_async_callable_get_the_chat_and_the_parameters() -> None:
    seen = []

    def sync_app(messages, **params):
        seen.append((messages, params))
        return "sync says " + messages[-1]["content"]

    async def async_app(messages, **params):
        seen.append((messages, params))
        return {"text": "async says hi", "usage": {"input_tokens": 3, "output_tokens": 4}}

    registry = ModelRegistry()
    registry.register("sync_app", sync_app)
    registry["async_app"] = async_app
    for name in ("sync_app", "async_app"):
        spec = ModelSpec(model=f"python:{name}", alias=name, python=name, system="Be brief.", params={"top_k": 2})
        response = asyncio.run(_client(spec, registry).complete(ModelCall.build(spec, "hi", GEN)))
        assert response.text.endswith("says hi")
    (m1, p1), (m2, p2) = seen
    assert m1 == m2 == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert p1 == p2 == {"temperature": 0.5, "max_tokens": 100, "seed": 40, "top_k": 2}
    assert (response.prompt_tokens, response.completion_tokens) == (3, 4)


def test_a_sync_callable_runs_off_the_event_loop() -> None:
    import threading

    threads = []

    def app(messages, **params):
        threads.append(threading.get_ident())
        return "ok"

    spec = ModelSpec(model="python:app", alias="app", python="app")

    async def run():
        await _client(spec, {"app": app}).complete(ModelCall.build(spec, "q", GEN))
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert threads and threads[0] != loop_thread


def test_a_callable_s_exception_is_one_line_naming_entry_and_function_and_not_retried() -> None:
    calls = []

    def app(messages, **params):
        calls.append(1)
        raise ValueError("no index loaded\nsecond line of detail")

    spec = ModelSpec(model="python:app", alias="helpdesk", python="app")
    with pytest.raises(ProviderError) as info:
        asyncio.run(_client(spec, {"app": app}).complete(ModelCall.build(spec, "q", GEN)))
    assert str(info.value) == "model 'helpdesk' (python: app): ValueError: no index loaded (not retryable)"
    assert calls == [1]


def test_a_timeout_or_a_connection_error_is_retried() -> None:
    outcomes = [ConnectionError("reset"), "fine"]

    async def app(messages, **params):
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def slow(messages, **params):
        await asyncio.sleep(5)

    spec = ModelSpec(model="python:app", alias="app", python="app")
    assert asyncio.run(_client(spec, {"app": app}).complete(ModelCall.build(spec, "q", GEN))).text == "fine"
    spec = ModelSpec(model="python:slow", alias="slow", python="slow")
    with pytest.raises(
        ProviderError, match=r"model 'slow' \(python: slow\): .*no answer within 0.05s \(gave up after 3"
    ):
        asyncio.run(_client(spec, {"slow": slow}, timeout=0.05).complete(ModelCall.build(spec, "q", GEN)))


def test_an_answer_that_is_no_text_is_a_clear_error() -> None:
    spec = ModelSpec(model="python:app", alias="app", python="app")
    with pytest.raises(ProviderError, match=r"returned a int, not a text or a mapping with a text under 'text'"):
        asyncio.run(_client(spec, {"app": lambda messages, **p: 42}).complete(ModelCall.build(spec, "q", GEN)))


def test_module_function_is_imported_and_a_bad_one_is_a_configuration_error(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "shop_app.py").write_text(
        "def answer(messages, **params):\n    return 'shop: ' + messages[-1]['content']\nbroken = 3\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = ModelSpec(model="python:shop_app:answer", alias="shop", python="shop_app:answer")
    assert asyncio.run(_client(spec).complete(ModelCall.build(spec, "q", GEN))).text == "shop: q"
    for target, expected in [
        (
            "no_such_module_xyz:answer",
            r"model 'bad' \(python: no_such_module_xyz:answer\): cannot import 'no_such_module_xyz'",
        ),
        ("shop_app:nothing", r"'shop_app' has no attribute 'nothing'"),
        ("shop_app:broken", r"'broken' is a int, not a callable"),
        ("unregistered", r"no callable of that name is registered through pytest_llmbias_add_models \(registered: x\)"),
    ]:
        bad = ModelSpec(model=f"python:{target}", alias="bad", python=target)
        with pytest.raises(ConfigError, match=expected):
            asyncio.run(_client(bad, {"x": print}).complete(ModelCall.build(bad, "q", GEN)))
    sys.modules.pop("shop_app", None)


def test_the_plan_time_check_finds_a_missing_module_without_importing_one(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "loud_app.py").write_text("raise RuntimeError('imported')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    ok = ModelSpec(model="python:loud_app:f", alias="ok", python="loud_app:f")
    assert isinstance(check_callables([ok], None), ModelRegistry)  # found, not run
    assert "loud_app" not in sys.modules
    with pytest.raises(ConfigError, match=r"model 'gone' \(python: gone_app:f\): cannot import 'gone_app'"):
        check_callables([ModelSpec(model="python:gone_app:f", alias="gone", python="gone_app:f")], None)

    def twice(registry):
        registry.register("a", print)
        registry.register("a", print)

    with pytest.raises(ConfigError, match=r"pytest_llmbias_add_models: the model 'a' is registered twice"):
        check_callables([], twice)


def test_applications_cost_nothing_and_never_import_litellm() -> None:
    before = "litellm" in sys.modules
    assert price("python:app", 1000, 1000) == 0.0 and price("http:POST http://x/y", 10, 10) == 0.0
    budget = Budget(0.01)
    budget.spend("python:app", 10**6, 10**6)
    assert budget.spent == 0.0 and not budget.unpriced
    assert ("litellm" in sys.modules) == before


def test_header_credentials_are_masked() -> None:
    app = HttpApp(
        url="http://app/ask",
        body={},
        response="r",
        headers=(("X-App-Token", "${UNIT_APP_TOKEN}"), ("Authorization", "Bearer literal-bearer"), ("X-Mode", "fast")),
    )
    spec = ModelSpec(model="http:POST http://app/ask", alias="app", http=app)
    redact = Redactor.for_models([spec], environ={"UNIT_APP_TOKEN": "tok-1234-secret"})
    assert redact("sent tok-1234-secret and literal-bearer with fast") == "sent *** and *** with fast"
    assert app.resolved_headers({"UNIT_APP_TOKEN": "tok-1234-secret"})["X-App-Token"] == "tok-1234-secret"
    with pytest.raises(TemplateError, match=r"the header 'X-App-Token' reads \$UNIT_APP_TOKEN, which is not set"):
        app.resolved_headers({})


def test_the_documented_application_example_is_a_valid_file(tmp_path: Path) -> None:
    from markdown_it import MarkdownIt

    page = (Path(__file__).resolve().parents[2] / "docs" / "applications.md").read_text(encoding="utf-8")
    block = next(
        t.content
        for t in MarkdownIt("commonmark").parse(page)
        if t.type == "fence" and "python: support_bot.chain:answer" in t.content
    )
    settings = resolve(tmp_path, block)
    assert settings.target.python == "support_bot.chain:answer" and settings.target.version == "2024-06-2"
    api = settings.baselines[1]
    assert api.http.identity()["headers"] == {"X-Client": "bias-tests"} and api.version == "41"
    body = render_body(api.http.body, (("user", 'Is "X" fair?'),), {"temperature": 0.7})
    assert body["input"] == 'Is "X" fair?' and body["options"] == {"temperature": 0.7}
