"""A deployment is a model plus its system prompt and primer turns: the settings read them, every
call to the entry carries them, and they are part of the call's identity."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.report.terminal import header_line
from pytest_llmbias.store.calls import ModelCall


def settings_of(tmp_path: Path, text: str):
    path = tmp_path / "llmbias.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return resolve_settings(cli={}, environ={}, config_path=path, cwd=tmp_path)


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        settings_of(tmp_path, text)
    return str(info.value)


def test_two_deployments_of_one_model_are_two_models(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "new.txt").write_text("You are Acme's assistant. Be concise.\n", encoding="utf-8")
    s = settings_of(
        tmp_path,
        """
        target: {model: openai/acme, alias: acme-new, system: "@prompts/new.txt"}
        baselines:
          - {model: openai/acme, alias: acme-old, system: "You are Acme's assistant."}
          - model: openai/acme
            alias: acme-primed
            system: "You are Acme's assistant."
            messages:
              - {role: user, content: "Answer in one paragraph."}
              - {role: assistant, content: "Understood."}
        """,
    )
    new, old, primed = s.target, *s.baselines
    assert new.system == "You are Acme's assistant. Be concise."  # read from the file, relative to it
    assert old.system == "You are Acme's assistant." and old.messages == ()
    assert primed.messages == (("user", "Answer in one paragraph."), ("assistant", "Understood."))

    gen = GenerationSettings()
    calls = [ModelCall.build(m, "Is tea better than coffee?", gen) for m in (new, old, primed)]
    assert calls[0].messages == (("system", new.system), ("user", "Is tea better than coffee?"))
    assert calls[2].messages == (
        ("system", old.system),
        ("user", "Answer in one paragraph."),
        ("assistant", "Understood."),
        ("user", "Is tea better than coffee?"),
    )
    assert len({c.key for c in calls}) == 3  # stored apart
    bare = ModelCall.build(ModelSpec(model="openai/acme", alias="acme"), "Is tea better than coffee?", gen)
    assert bare.key not in {c.key for c in calls}
    # a changed system prompt is a new call: it is asked again
    edited = ModelSpec(model="openai/acme", alias="acme-old", system="You are Acme's helpful assistant.")
    assert ModelCall.build(edited, "Is tea better than coffee?", gen).key != calls[1].key


def test_reports_name_a_deployment_by_its_prompt_s_hash(tmp_path: Path) -> None:
    s = settings_of(
        tmp_path,
        """
        target: {model: openai/acme, alias: acme, system: "Be brief."}
        baselines: [openai/b1, openai/b2]
        """,
    )
    assert s.target.system_hash is not None and len(s.target.system_hash) == 12
    assert f"target acme (system {s.target.system_hash})" in header_line(s)
    assert "baselines b1, b2\nllmbias: store " in header_line(s)
    entry = s.to_dict()["target"]
    assert entry["system"] == "Be brief." and entry["system_hash"] == s.target.system_hash


def test_the_same_model_twice_without_aliases_is_refused(tmp_path: Path) -> None:
    msg = error_of(
        tmp_path,
        """
        target: {model: openai/acme, system: "A."}
        baselines: [{model: openai/acme, system: "B."}, openai/b2]
        """,
    )
    assert "alias" in msg


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ('{model: openai/a, system: "@missing.txt"}', "'target.system' names '@missing.txt', which cannot be read"),
        ("{model: openai/a, system: 3}", "'target.system' must be a non-empty string or @path"),
        ('{model: openai/a, system: ""}', "'target.system' must be a non-empty string or @path"),
        ("{model: openai/a, messages: hello}", "'target.messages' must be a list of {role, content} turns"),
        ("{model: openai/a, messages: [{role: robot, content: hi}]}", "'target.messages[0]' must be {role: system"),
        ("{model: openai/a, messages: [{role: user}]}", "'target.messages[0]' must be {role: system"),
    ],
)
def test_a_bad_deployment_is_named(tmp_path: Path, entry: str, expected: str) -> None:
    msg = error_of(tmp_path, f"target: {entry}\n")
    assert expected in msg and "llmbias.yaml:1" in msg


def test_an_empty_system_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    assert "an empty file" in error_of(tmp_path, 'target: {model: openai/a, system: "@empty.txt"}\n')


def test_a_snapshot_replays_a_deployment_s_answers_with_its_prompt(tmp_path: Path) -> None:
    from pytest_llmbias.store.calls import Response
    from pytest_llmbias.store.snapshot import read_snapshot, write_snapshot

    spec = ModelSpec(model="openai/acme", alias="acme", system="Be brief.")
    call = ModelCall.build(spec, "Q?", GenerationSettings())
    path = tmp_path / "snap.jsonl"
    write_snapshot(path, [Response(call=call, text="A.")], {call.key: {"alias": "acme"}})
    assert read_snapshot(path)[call.key].call.messages[0] == ("system", "Be brief.")  # the prompt, whole
