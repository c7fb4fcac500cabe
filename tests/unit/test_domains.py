from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_llmbias.domains import BUILTIN_DIR, Domain, Question, list_domains, load_domain, parse_domain
from pytest_llmbias.errors import ConfigError, DomainError

BUILTINS = sorted(list_domains())


def write_domain(directory: Path, name: str, body: str, *, header: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = textwrap.dedent(body).lstrip("\n")
    if header:
        text = (
            f"name: {name}\n"
            "description: d\n"
            "focus: f\n"
            "instruction: i\n"
        ) + text
    path = directory / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


SIMPLE = """
categories:
  - id: alpha
    name: Alpha
    questions:
      - {id: a-1, text: "First?"}
      - {id: a-2, text: "Second?", reference: "ref"}
  - id: beta
    questions:
      - {id: b-1, text: "Third?"}
"""


def domain_error(path: Path) -> str:
    with pytest.raises(DomainError) as info:
        load_domain(path)
    assert isinstance(info.value, ConfigError)
    return str(info.value)


# --------------------------------------------------------------------------------------------
# Built-in domains


def test_there_are_builtin_domains() -> None:
    assert len(BUILTINS) >= 3
    assert all(p.parent == BUILTIN_DIR for p in list_domains().values())


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_domain_is_well_formed(name: str) -> None:
    domain = load_domain(name)
    assert domain.name == name
    assert domain.source == list_domains()[name]
    questions = domain.questions
    assert len(questions) >= 50
    assert len(domain.categories) >= 5
    assert all(c.questions for c in domain.categories)
    ids = [q.id for q in questions]
    assert len(ids) == len(set(ids))
    assert len(set(domain.category_ids)) == len(domain.category_ids)
    assert domain.focus.strip() and domain.instruction.strip() and domain.description.strip()
    assert all(q.text.strip() for q in questions)
    assert {q.category for q in questions} == set(domain.category_ids)


# --------------------------------------------------------------------------------------------
# Loading


def test_load_by_path_and_string_path(tmp_path: Path) -> None:
    path = write_domain(tmp_path, "mine", SIMPLE)
    for given in (path, str(path)):
        domain = load_domain(given)
        assert domain.name == "mine"
        assert domain.source == path
        assert [q.id for q in domain.questions] == ["a-1", "a-2", "b-1"]
        assert domain.questions[1] == Question(id="a-2", text="Second?", category="alpha", reference="ref")
        assert domain.categories[1].name == "beta"  # name defaults to the id
        assert domain.title == "mine"


def test_load_by_name_from_search_path(tmp_path: Path) -> None:
    write_domain(tmp_path / "domains", "mine", SIMPLE)
    assert "mine" in list_domains([tmp_path / "domains"])
    assert load_domain("mine", [tmp_path / "domains"]).name == "mine"
    with pytest.raises(DomainError, match="unknown domain 'mine'"):
        load_domain("mine")


def test_search_path_may_be_a_file(tmp_path: Path) -> None:
    path = write_domain(tmp_path, "single", SIMPLE)
    assert list_domains([path])["single"] == path
    assert load_domain("single", [path]).source == path


def test_configured_path_shadows_builtin(tmp_path: Path) -> None:
    name = BUILTINS[0]
    path = write_domain(tmp_path / "d", name, SIMPLE)
    assert list_domains([tmp_path / "d"])[name] == path
    shadowed = load_domain(name, [tmp_path / "d"])
    assert shadowed.source == path
    assert len(shadowed.questions) == 3
    assert len(load_domain(name).questions) >= 50  # the built-in is still there without the path


def test_first_search_path_wins(tmp_path: Path) -> None:
    first = write_domain(tmp_path / "one", "dup", SIMPLE)
    write_domain(tmp_path / "two", "dup", SIMPLE)
    assert load_domain("dup", [tmp_path / "one", tmp_path / "two"]).source == first


def test_missing_search_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DomainError, match="does not exist"):
        load_domain(BUILTINS[0], [tmp_path / "nope"])


def test_unknown_domain_lists_known_names(tmp_path: Path) -> None:
    with pytest.raises(DomainError) as info:
        load_domain("no_such_domain")
    msg = str(info.value)
    assert "'no_such_domain'" in msg
    for name in BUILTINS:
        assert name in msg


def test_missing_domain_file(tmp_path: Path) -> None:
    with pytest.raises(DomainError, match="does not exist"):
        load_domain(tmp_path / "absent.yaml")


# --------------------------------------------------------------------------------------------
# Errors name the file and line


def test_malformed_yaml(tmp_path: Path) -> None:
    path = write_domain(tmp_path, "bad", "categories: [\n  - id: x\n")
    msg = domain_error(path)
    assert "invalid YAML" in msg
    assert f"{path}:" in msg


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n", encoding="utf-8")
    msg = domain_error(path)
    assert str(path) in msg and "empty" in msg


def test_missing_required_key(tmp_path: Path) -> None:
    path = tmp_path / "nofocus.yaml"
    path.write_text("name: nofocus\ndescription: d\ninstruction: i\n" + textwrap.dedent(SIMPLE), encoding="utf-8")
    msg = domain_error(path)
    assert "'focus'" in msg and str(path) in msg


def test_empty_required_key_names_line(tmp_path: Path) -> None:
    path = tmp_path / "blank.yaml"
    path.write_text("name: blank\ndescription: d\nfocus: '  '\ninstruction: i\n" + textwrap.dedent(SIMPLE), encoding="utf-8")
    msg = domain_error(path)
    assert "'focus'" in msg and f"{path}:3" in msg


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write_domain(tmp_path, "extra", "colour: blue\n" + textwrap.dedent(SIMPLE))
    msg = domain_error(path)
    assert "'colour'" in msg and f"{path}:5" in msg and "categories" in msg


def test_unknown_question_key(tmp_path: Path) -> None:
    body = """
    categories:
      - id: alpha
        questions:
          - id: a-1
            text: "x?"
            answer: "y"
    """
    path = write_domain(tmp_path, "qkey", body)
    msg = domain_error(path)
    assert "'answer'" in msg and f"{path}:10" in msg


def test_duplicate_question_id_across_categories(tmp_path: Path) -> None:
    body = """
    categories:
      - id: alpha
        questions:
          - {id: q-1, text: "x?"}
      - id: beta
        questions:
          - {id: q-2, text: "y?"}
          - {id: q-1, text: "z?"}
    """
    path = write_domain(tmp_path, "dupq", body)
    msg = domain_error(path)
    assert "duplicate question id 'q-1'" in msg
    assert "'alpha'" in msg
    assert f"{path}:12" in msg


def test_duplicate_category_id(tmp_path: Path) -> None:
    body = """
    categories:
      - id: alpha
        questions: [{id: q-1, text: "x?"}]
      - id: alpha
        questions: [{id: q-2, text: "y?"}]
    """
    path = write_domain(tmp_path, "dupc", body)
    msg = domain_error(path)
    assert "duplicate category id 'alpha'" in msg and f"{path}:8" in msg


@pytest.mark.parametrize("questions", ["    questions: []\n", ""])
def test_category_without_questions(tmp_path: Path, questions: str) -> None:
    body = "categories:\n  - id: alpha\n    name: A\n" + questions
    path = write_domain(tmp_path, "noq", body)
    msg = domain_error(path)
    assert "'alpha' has no questions" in msg
    assert f"{path}:{8 if questions else 6}" in msg


def test_name_must_match_file_name(tmp_path: Path) -> None:
    path = tmp_path / "right.yaml"
    path.write_text("description: d\nname: wrong\nfocus: f\ninstruction: i\n" + textwrap.dedent(SIMPLE), encoding="utf-8")
    msg = domain_error(path)
    assert "'wrong'" in msg and "'right'" in msg and f"{path}:2" in msg


def test_no_questions_at_all(tmp_path: Path) -> None:
    path = write_domain(tmp_path, "nothing", "title: t\n")
    msg = domain_error(path)
    assert "no questions" in msg and str(path) in msg


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    path = write_domain(tmp_path, "dupkey", "focus: again\n" + textwrap.dedent(SIMPLE))
    msg = domain_error(path)
    assert "duplicate key 'focus'" in msg and f"{path}:5" in msg


def test_parse_domain_without_path() -> None:
    with pytest.raises(DomainError, match="<domain>"):
        parse_domain({"name": "x"})
    with pytest.raises(DomainError, match="must be a mapping"):
        parse_domain(["x"])


# --------------------------------------------------------------------------------------------
# Counterfactual form


GROUPS = """
counterfactual:
  groups:
    country: [France, Japan, Brazil]
    city: [Paris, Tokyo]
  templates:
    - {id: econ, text: "Describe the economy of {concept}.", category: economy, reference: "r"}
    - {id: hist, text: "What is {concept} known for? Tell me about {concept}."}
"""


def test_counterfactual_groups_expand(tmp_path: Path) -> None:
    domain = load_domain(write_domain(tmp_path, "cf", GROUPS))
    cf = domain.counterfactual
    assert cf is not None
    assert dict(cf.groups) == {"country": ("France", "Japan", "Brazil"), "city": ("Paris", "Tokyo")}
    assert domain.questions == ()  # counterfactual prompts are not category questions
    prompts = cf.expand()
    assert len(prompts) == len(cf.templates) * 5
    assert [p.id for p in prompts[:5]] == ["econ:France", "econ:Japan", "econ:Brazil", "econ:Paris", "econ:Tokyo"]
    first = prompts[0]
    assert first == Question(
        id="econ:France",
        text="Describe the economy of France.",
        category="economy",
        concept="France",
        group="country",
        template="econ",
        reference="r",
    )
    last = prompts[-1]
    assert last.text == "What is Tokyo known for? Tell me about Tokyo."
    assert (last.group, last.concept, last.template, last.category) == ("city", "Tokyo", "hist", "default")
    assert len({p.id for p in prompts}) == len(prompts)
    for p in prompts:
        assert p.id == f"{p.template}:{p.concept}"
        assert "{concept}" not in p.text and p.concept in p.text


def test_counterfactual_expand_selected_groups(tmp_path: Path) -> None:
    cf = load_domain(write_domain(tmp_path, "cf", GROUPS)).counterfactual
    assert cf is not None
    prompts = cf.expand(["city"])
    assert [p.id for p in prompts] == ["econ:Paris", "econ:Tokyo", "hist:Paris", "hist:Tokyo"]
    with pytest.raises(DomainError, match="'planet'"):
        cf.expand(["planet"])


def test_counterfactual_flat_concepts(tmp_path: Path) -> None:
    body = """
    counterfactual:
      concepts: [cats, dogs]
      templates:
        - {id: pet, text: "Are {concept} good pets?"}
    """
    domain = load_domain(write_domain(tmp_path, "flat", body))
    assert domain.counterfactual is not None
    prompts = domain.counterfactual.expand()
    assert [(p.id, p.text, p.concept) for p in prompts] == [
        ("pet:cats", "Are cats good pets?", "cats"),
        ("pet:dogs", "Are dogs good pets?", "dogs"),
    ]
    assert all(p.group and p.template == "pet" for p in prompts)


def test_counterfactual_template_without_placeholder(tmp_path: Path) -> None:
    body = """
    counterfactual:
      concepts: [cats, dogs]
      templates:
        - {id: ok, text: "About {concept}."}
        - {id: nope, text: "About pets."}
    """
    path = write_domain(tmp_path, "noph", body)
    msg = domain_error(path)
    assert "'nope'" in msg and "{concept}" in msg and f"{path}:9" in msg


@pytest.mark.parametrize(
    "concepts",
    ["      concepts: [cats]\n", "      groups: {animal: [cats]}\n", "      concepts: []\n"],
)
def test_counterfactual_needs_two_concepts(tmp_path: Path, concepts: str) -> None:
    body = "counterfactual:\n" + concepts[4:] + "  templates:\n    - {id: t, text: 'About {concept}.'}\n"
    path = write_domain(tmp_path, "few", body)
    msg = domain_error(path)
    assert "at least two" in msg or "must map" in msg
    assert str(path) in msg


def test_counterfactual_groups_and_concepts_exclusive(tmp_path: Path) -> None:
    body = """
    counterfactual:
      concepts: [a, b]
      groups: {g: [c, d]}
      templates: [{id: t, text: "{concept}"}]
    """
    msg = domain_error(write_domain(tmp_path, "both", body))
    assert "not both" in msg


def test_counterfactual_template_id_clashes_with_question(tmp_path: Path) -> None:
    body = textwrap.dedent(SIMPLE) + textwrap.dedent(
        """
        counterfactual:
          concepts: [a, b]
          templates: [{id: a-1, text: "{concept}"}]
        """
    )
    msg = domain_error(write_domain(tmp_path, "clash", body))
    assert "'a-1'" in msg


# --------------------------------------------------------------------------------------------
# Domain.select


def test_select_categories(tmp_path: Path) -> None:
    domain = load_domain(write_domain(tmp_path, "sel", SIMPLE))
    assert domain.select() == domain.questions
    assert [q.id for q in domain.select(["beta"])] == ["b-1"]
    # file order, not argument order
    assert [q.id for q in domain.select(["beta", "alpha"])] == ["a-1", "a-2", "b-1"]
    assert domain.select([]) == ()


def test_select_unknown_category(tmp_path: Path) -> None:
    domain = load_domain(write_domain(tmp_path, "sel", SIMPLE))
    with pytest.raises(DomainError) as info:
        domain.select(["alpha", "gamma"])
    msg = str(info.value)
    assert "'gamma'" in msg and "alpha" in msg and "beta" in msg and "'sel'" in msg


def test_builtin_select_every_category() -> None:
    domain: Domain = load_domain(BUILTINS[0])
    for cid in domain.category_ids:
        selected = domain.select([cid])
        assert selected and all(q.category == cid for q in selected)


# --------------------------------------------------------------------------------------------
# Ids are stripped before use, so uniqueness must be checked on the stripped form


def test_duplicate_question_id_after_strip(tmp_path: Path) -> None:
    body = """
    categories:
      - id: alpha
        questions:
          - {id: q-1, text: "x?"}
          - {id: "q-1 ", text: "y?"}
    """
    with pytest.raises(DomainError, match="duplicate question id"):
        load_domain(write_domain(tmp_path, "ws", body))


def test_duplicate_concept_after_strip(tmp_path: Path) -> None:
    body = """
    counterfactual:
      concepts: [France, " France"]
      templates: [{id: t, text: "About {concept}."}]
    """
    with pytest.raises(DomainError, match="duplicate concept"):
        load_domain(write_domain(tmp_path, "wsc", body))
