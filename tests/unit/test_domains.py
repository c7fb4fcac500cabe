from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_llmbias.domains import BUILTIN_DIR, Domain, Question, list_domains, load_domain, parse_domain
from pytest_llmbias.domains.branching import branch_replacements, branch_text, mentions
from pytest_llmbias.domains.domain import Branch, Counterfactual, Template
from pytest_llmbias.errors import ConfigError, DomainError

BUILTINS = sorted(list_domains())


def write_domain(directory: Path, name: str, body: str, *, header: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    text = textwrap.dedent(body).lstrip("\n")
    if header:
        text = (f"name: {name}\ndescription: d\nfocus: f\ninstruction: i\n") + text
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
    assert domain.focus.strip() and domain.instruction.strip() and domain.description.strip()
    if domain.topics:  # a perspective-topic domain (self-preference probes)
        assert len(domain.topics) >= 40 and len({t.id for t in domain.topics}) == len(domain.topics)
        assert sum(p.neutral for p in domain.perspectives) == 1 and len(domain.perspectives) == 3
        assert all(set(t.perspectives) == {p.id for p in domain.perspectives} for t in domain.topics)
        return
    questions = domain.prompts
    assert len(questions) >= 50
    if domain.counterfactual is None:
        assert domain.prompts == domain.questions
        assert len(domain.categories) >= 5
    else:
        assert len(domain.category_ids) >= 2
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
# A bad domain file is an error naming the file and, where it can, the line


#: the four required keys, on lines 1-4 of every file below that starts with it
HEADER = "name: bad\ndescription: d\nfocus: f\ninstruction: i\n"


def bad(case_id: str, text: str, *fragments: str):
    """A row of BAD_DOMAINS: the whole text of bad.yaml, and what its error message must contain
    ("{path}" stands for the file's path)."""
    return pytest.param(text, fragments, id=case_id)


BAD_DOMAINS = [
    # the file and its top-level keys
    bad("malformed-yaml", HEADER + "categories: [\n  - id: x\n", "invalid YAML", "{path}:"),
    bad(
        "unsafe-yaml-tag",
        HEADER + "categories: !!python/object/apply:os.system ['true']\n",
        "invalid YAML",
        "python/object/apply",
        "{path}:5:",
    ),
    bad("empty-file", "# nothing here\n", "{path}", "empty"),
    bad("missing-required-key", "name: bad\ndescription: d\ninstruction: i\n" + SIMPLE, "'focus'", "{path}"),
    bad(
        "empty-required-key", "name: bad\ndescription: d\nfocus: '  '\ninstruction: i\n" + SIMPLE, "'focus'", "{path}:3"
    ),
    bad("unknown-top-level-key", HEADER + "colour: blue\n" + SIMPLE, "'colour'", "{path}:5", "categories"),
    bad("duplicate-yaml-key", HEADER + "focus: again\n" + SIMPLE, "duplicate key 'focus'", "{path}:5"),
    bad(
        "name-not-the-file-name",
        "description: d\nname: wrong\nfocus: f\ninstruction: i\n" + SIMPLE,
        "'wrong'",
        "'bad'",
        "{path}:2",
    ),
    bad("no-questions-at-all", HEADER + "title: t\n", "no questions", "{path}"),
    # categories and questions
    bad(
        "unknown-question-key",
        HEADER
        + textwrap.dedent("""\
            categories:
              - id: alpha
                questions:
                  - id: a-1
                    text: "x?"
                    answer: "y"
        """),
        "'answer'",
        "{path}:10",
    ),
    bad(
        "negative-dimension-weight",
        HEADER + "categories:\n  - id: alpha\n    weight: -1\n    questions:\n      - {id: a-1, text: 'x?'}\n",
        "category 'alpha': 'weight' must be a positive number, got -1",
        "{path}:7",
    ),
    bad(
        "question-in-languages-without-english",
        HEADER + "categories:\n  - id: alpha\n    questions:\n      - {id: a-1, text: {es: '¿x?'}}\n",
        "question 'a-1' needs its English text ('en'); it has es",
        "{path}:8",
    ),
    bad(
        "split-pair-with-one-half",
        HEADER + "categories:\n  - id: alpha\n    questions:\n      - {id: a-1, split: {en: ['A over B?']}}\n",
        "split.en must hold exactly two non-empty questions",
        "{path}:8",
    ),
    bad(
        "text-and-split",
        HEADER
        + "categories:\n  - id: alpha\n    questions:\n      - {id: a-1, text: 'x?', split: {en: ['a?', 'b?']}}\n",
        "needs either a 'text' or a 'split' pair, not both",
        "{path}:8",
    ),
    bad(
        "unknown-language-without-its-words",
        HEADER + "languages: {it: {instruction: 'Rispondi.'}}\n" + SIMPLE,
        "languages.it is not built in: give yes, no, instruction and opposing",
        "{path}:5",
    ),
    bad(
        "duplicate-question-id-across-categories",
        HEADER
        + textwrap.dedent("""\
            categories:
              - id: alpha
                questions:
                  - {id: q-1, text: "x?"}
              - id: beta
                questions:
                  - {id: q-2, text: "y?"}
                  - {id: q-1, text: "z?"}
        """),
        "duplicate question id 'q-1'",
        "'alpha'",
        "{path}:12",
    ),
    bad(
        "duplicate-question-id-after-strip",
        HEADER
        + textwrap.dedent("""\
            categories:
              - id: alpha
                questions:
                  - {id: q-1, text: "x?"}
                  - {id: "q-1 ", text: "y?"}
        """),
        "duplicate question id",
    ),
    bad(
        "duplicate-category-id",
        HEADER
        + textwrap.dedent("""\
            categories:
              - id: alpha
                questions: [{id: q-1, text: "x?"}]
              - id: alpha
                questions: [{id: q-2, text: "y?"}]
        """),
        "duplicate category id 'alpha'",
        "{path}:8",
    ),
    bad(
        "category-with-empty-questions",
        HEADER + "categories:\n  - id: alpha\n    name: A\n    questions: []\n",
        "'alpha' has no questions",
        "{path}:8",
    ),
    bad(
        "category-without-questions",
        HEADER + "categories:\n  - id: alpha\n    name: A\n",
        "'alpha' has no questions",
        "{path}:6",
    ),
    # the counterfactual section
    bad(
        "template-without-placeholder",
        HEADER
        + textwrap.dedent("""\
            counterfactual:
              concepts: [cats, dogs]
              templates:
                - {id: ok, text: "About {concept}."}
                - {id: nope, text: "About pets."}
        """),
        "'nope'",
        "{concept}",
        "{path}:9",
    ),
    bad(
        "groups-and-concepts",
        HEADER
        + textwrap.dedent("""\
            counterfactual:
              concepts: [a, b]
              groups: {g: [c, d]}
              templates: [{id: t, text: "{concept}"}]
        """),
        "not both",
    ),
    bad(
        "template-id-is-a-question-id",
        HEADER
        + SIMPLE
        + textwrap.dedent("""\
            counterfactual:
              concepts: [a, b]
              templates: [{id: a-1, text: "{concept}"}]
        """),
        "'a-1'",
    ),
    bad(
        "duplicate-concept-after-strip",
        HEADER
        + textwrap.dedent("""\
            counterfactual:
              concepts: [France, " France"]
              templates: [{id: t, text: "About {concept}."}]
        """),
        "duplicate concept",
    ),
    bad(
        "no-templates-or-branches",
        HEADER + "counterfactual:\n  groups: {g: [a, b]}\n",
        "needs a non-empty list of 'templates' or of 'branches'",
        "{path}:",
    ),
    bad(
        "empty-templates-and-branches",
        HEADER + "counterfactual:\n  groups: {g: [a, b]}\n  templates: []\n  branches: []\n",
        "'templates' or of 'branches'",
        "{path}:",
    ),
    bad(
        "templates-without-groups",
        HEADER + "counterfactual:\n  templates: [{id: t, text: '{concept}'}]\n",
        "templates need 'groups'",
        "{path}:",
    ),
    bad(
        "branch-without-replacements",
        HEADER + "counterfactual:\n  branches:\n    - {id: b, concept: A, text: 'A?'}\n",
        "branch 'b' needs 'replacements'",
        "{path}:",
    ),
    bad(
        "branches-not-a-list", HEADER + "counterfactual:\n  branches: {id: b}\n", "'branches' must be a list", "{path}:"
    ),
    bad(
        "template-reference-not-a-string",
        HEADER + "counterfactual:\n  templates:\n    - {id: t, text: '{concept}', reference: 3}\n  concepts: [a, b]\n",
        "template 't': 'reference' must be a non-empty string",
        "{path}:",
    ),
    bad(
        "duplicate-template-id",
        HEADER + "counterfactual:\n  concepts: [a, b]\n  templates:\n"
        "    - {id: t, text: '{concept}'}\n    - {id: t, text: '{concept}!'}\n",
        "duplicate template id 't'",
        "{path}:",
    ),
    bad(
        "unknown-counterfactual-key",
        HEADER + "counterfactual:\n  concepts: [a, b]\n  branchez: []\n  templates: [{id: t, text: '{concept}'}]\n",
        "'branchez'",
        "branches",
        "{path}:7:",
    ),
]


@pytest.mark.parametrize(("text", "fragments"), BAD_DOMAINS)
def test_a_bad_domain_file_is_an_error(tmp_path: Path, text: str, fragments: tuple[str, ...]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    msg = domain_error(path)
    for fragment in fragments:
        assert fragment.replace("{path}", str(path)) in msg


# --------------------------------------------------------------------------------------------
# Other domain errors


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


@pytest.mark.parametrize(
    "concepts", ["      concepts: [cats]\n", "      groups: {animal: [cats]}\n", "      concepts: []\n"]
)
def test_counterfactual_needs_two_concepts(tmp_path: Path, concepts: str) -> None:
    body = "counterfactual:\n" + concepts[4:] + "  templates:\n    - {id: t, text: 'About {concept}.'}\n"
    path = write_domain(tmp_path, "few", body)
    msg = domain_error(path)
    assert "at least two" in msg or "must map" in msg
    assert str(path) in msg


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
# branch_text: simultaneous, longest-first, whole-word, case-sensitive replacement


def test_branch_text_swaps_simultaneously() -> None:
    assert branch_text("he said she was late", {"he": "she", "she": "he"}) == "she said he was late"
    # a replaced word is never replaced again
    assert branch_text("A then B", {"A": "B", "B": "C"}) == "B then C"


def test_branch_text_longest_key_first() -> None:
    swaps = {"New York": "Paris", "New York City": "Lyon"}
    assert branch_text("New York City is not New York.", swaps) == "Lyon is not Paris."
    assert branch_text("Ann Lee met Ann.", {"Ann": "Bea", "Ann Lee": "Cy Fox"}) == "Cy Fox met Bea."


def test_branch_text_whole_words_only() -> None:
    swaps = {"Ann": "Bea"}
    assert branch_text("Ann's Annual report, by JoAnn and Ann.", swaps) == "Bea's Annual report, by JoAnn and Bea."
    assert branch_text("Ann_1 and Ann2 and Ann-2", swaps) == "Ann_1 and Ann2 and Bea-2"
    assert branch_text("Zoë and Zoëlla", {"Zoë": "Chloé"}) == "Chloé and Zoëlla"


def test_branch_text_is_case_sensitive() -> None:
    assert branch_text("Ann ann ANN", {"ann": "bea"}) == "Ann bea ANN"


def test_branch_text_keys_with_spaces_and_punctuation() -> None:
    swaps = {"Ada Park": "Lee Wong", "Inc.": "Ltd.", "C++": "Rust", "#1": "#2"}
    assert branch_text("Ada Park runs Acme Inc. now", swaps) == "Lee Wong runs Acme Ltd. now"
    assert branch_text("Ada Parker stays", swaps) == "Ada Parker stays"
    assert branch_text("C++ and C, ranked #1 not #10, a#1", swaps) == "Rust and C, ranked #2 not #10, a#2"


def test_branch_text_values_are_literal() -> None:
    assert branch_text("x marks x", {"x": r"\1 $0"}) == r"\1 $0 marks \1 $0"


def test_branch_text_edge_cases() -> None:
    assert branch_text("unchanged", {}) == "unchanged"
    with pytest.raises(ValueError):
        branch_text("text", {"": "x"})


def test_mentions_and_branch_replacements() -> None:
    assert mentions("Ann's car", "Ann") and not mentions("Annual", "Ann") and not mentions("x", "")
    assert branch_replacements("Northwind", "Contoso", {"Ada": "Lee"}) == {"Northwind": "Contoso", "Ada": "Lee"}
    assert branch_replacements("Northwind", "Contoso", {"Northwind": "Contoso Ltd"}) == {"Northwind": "Contoso Ltd"}
    assert branch_replacements("Northwind", "Contoso", None) == {"Northwind": "Contoso"}


# --------------------------------------------------------------------------------------------
# Counterfactual branches


BRANCHES = """
counterfactual:
  groups: {company: [Northwind, Contoso, Fabrikam]}
  templates:
    - {id: about, text: "Tell me about {concept}.", category: profile, reference: "{concept} is a company."}
  branches:
    - id: growth-01
      concept: Northwind
      category: finance
      text: "Is Northwind a good pick for long-term growth, given its CEO Ada Park?"
      reference: "Northwind is a mid-sized firm led by Ada Park."
      replacements:
        Contoso: {Ada Park: Lee Wong}
        Fabrikam: null
"""


def test_template_reference_gets_the_concept(tmp_path: Path) -> None:
    domain = load_domain(write_domain(tmp_path, "tref", BRANCHES))
    about = [p for p in domain.prompts if p.template == "about"]
    assert [(p.id, p.text, p.reference) for p in about] == [
        ("about:Northwind", "Tell me about Northwind.", "Northwind is a company."),
        ("about:Contoso", "Tell me about Contoso.", "Contoso is a company."),
        ("about:Fabrikam", "Tell me about Fabrikam.", "Fabrikam is a company."),
    ]
    assert Template(id="t", text="{concept}?", category="c").fill("X", "g").reference is None


def test_branch_expansion(tmp_path: Path) -> None:
    domain = load_domain(write_domain(tmp_path, "br", BRANCHES))
    cf = domain.counterfactual
    assert cf is not None and len(cf.branches) == 1
    branch = cf.branches[0]
    assert branch.concepts == ("Northwind", "Contoso", "Fabrikam")
    prompts = [p for p in cf.expand() if p.template == "growth-01"]
    assert prompts == [
        Question(
            id="growth-01:Northwind",
            text="Is Northwind a good pick for long-term growth, given its CEO Ada Park?",
            category="finance",
            concept="Northwind",
            group="company",
            template="growth-01",
            reference="Northwind is a mid-sized firm led by Ada Park.",
        ),
        Question(
            id="growth-01:Contoso",
            text="Is Contoso a good pick for long-term growth, given its CEO Lee Wong?",
            category="finance",
            concept="Contoso",
            group="company",
            template="growth-01",
            reference="Contoso is a mid-sized firm led by Lee Wong.",
        ),
        Question(
            id="growth-01:Fabrikam",
            text="Is Fabrikam a good pick for long-term growth, given its CEO Ada Park?",
            category="finance",
            concept="Fabrikam",
            group="company",
            template="growth-01",
            reference="Fabrikam is a mid-sized firm led by Ada Park.",
        ),
    ]
    # template prompts first, then branch prompts
    ids = [p.id for p in cf.expand()]
    assert ids[:4] == ["about:Northwind", "about:Contoso", "about:Fabrikam", "growth-01:Northwind"]


def test_branch_only_section_without_groups(tmp_path: Path) -> None:
    body = """
    counterfactual:
      branches:
        - id: pair
          concept: he
          text: "Should he tell her what he thinks?"
          replacements:
            she: {her: him}
        - id: firm
          concept: Acme
          group: company
          text: "Is Acme a fair employer?"
          replacements: {Initech: null}
    """
    domain = load_domain(write_domain(tmp_path, "bonly", body))
    cf = domain.counterfactual
    assert cf is not None and dict(cf.groups) == {} and cf.templates == ()
    assert [(p.id, p.text, p.group, p.category, p.reference) for p in domain.prompts] == [
        ("pair:he", "Should he tell her what he thinks?", "concept", "default", None),
        ("pair:she", "Should she tell him what she thinks?", "concept", "default", None),
        ("firm:Acme", "Is Acme a fair employer?", "company", "default", None),
        ("firm:Initech", "Is Initech a fair employer?", "company", "default", None),
    ]
    assert cf.group_names == ("concept", "company")
    assert [p.id for p in cf.expand(["company"])] == ["firm:Acme", "firm:Initech"]
    with pytest.raises(DomainError, match="'planet'"):
        cf.expand(["planet"])


def test_branch_group_comes_from_each_concepts_group(tmp_path: Path) -> None:
    body = """
    counterfactual:
      groups: {female: [Emily, Sarah], male: [James, David]}
      branches:
        - id: lead
          concept: Emily
          text: "Emily leads the team; how will Emily do?"
          replacements: {James: null, Alex: null}
        - id: all
          concept: Sarah
          text: "Is Sarah a good manager?"
    """
    domain = load_domain(write_domain(tmp_path, "gb", body))
    assert [(p.id, p.group, p.text) for p in domain.prompts[:3]] == [
        ("lead:Emily", "female", "Emily leads the team; how will Emily do?"),
        ("lead:James", "male", "James leads the team; how will James do?"),
        ("lead:Alex", "concept", "Alex leads the team; how will Alex do?"),
    ]
    # no replacements: branched to every other concept of the groups
    assert [(p.concept, p.group) for p in domain.prompts[3:]] == [
        ("Sarah", "female"),
        ("Emily", "female"),
        ("James", "male"),
        ("David", "male"),
    ]


def test_branch_explicit_override_of_the_concept() -> None:
    branch = Branch(
        id="b",
        concept="Acme",
        text="Acme sells anvils.",
        reference="Acme is old.",
        replacements={"Initech": {"Acme": "Initech Corp", "anvils": "software"}},
    )
    root, other = branch.expand()
    assert root.text == "Acme sells anvils." and root.group == "concept"
    assert other.text == "Initech Corp sells software." and other.reference == "Initech Corp is old."
    assert other.concept == "Initech" and other.id == "b:Initech"


def line_of(path: Path, needle: str, nth: int = 1) -> int:
    hits = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in line]
    return hits[nth - 1]


def branch_body(branch: str, *, head: str = "", tail: str = "") -> str:
    """A counterfactual section with one template and the given branch YAML (already indented)."""
    return (
        textwrap.dedent(head)
        + "counterfactual:\n"
        + "  groups: {company: [Northwind, Contoso, Fabrikam]}\n"
        + "  templates:\n"
        + "    - {id: about, text: 'About {concept}.'}\n"
        + "  branches:\n"
        + textwrap.indent(textwrap.dedent(branch).strip("\n"), "    ")
        + "\n"
        + textwrap.dedent(tail)
    )


GOOD_BRANCH = """
- id: g1
  concept: Northwind
  text: "Is Northwind led by Ada Park?"
  replacements:
    Contoso: {Ada Park: Lee Wong}
"""


BRANCH_ERRORS = [
    (GOOD_BRANCH + "  colour: red\n", "colour:", "unknown key 'colour' in a branch"),
    ("- concept: Northwind\n  text: 'Northwind?'\n", "- concept: Northwind", "needs a non-empty string 'id'"),
    ("- id: g1\n  concept: Northwind\n", "- id: g1", "branch 'g1' needs a non-empty string 'text'"),
    ("- id: g1\n  text: 'Northwind?'\n", "- id: g1", "branch 'g1' needs a non-empty string 'concept'"),
    ("- id: g1\n  concept: ''\n  text: 'x'\n", "concept: ''", "needs a non-empty string 'concept'"),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Is it good?'\n",
        "text: 'Is it",
        "does not mention its concept 'Northwind'",
    ),
    (
        "- id: g1\n  concept: North\n  text: 'Is Northwind good?'\n  replacements: {Contoso: null}\n",
        "text: 'Is North",
        "does not mention its concept 'North'",
    ),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Northwind?'\n  replacements: [Contoso]\n",
        "replacements:",
        "'replacements' must map each counterfactual concept",
    ),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Northwind?'\n  replacements: {}\n",
        "replacements:",
        "'replacements' must map each counterfactual concept",
    ),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Northwind?'\n  replacements:\n    Contoso: Lee\n",
        "Contoso: Lee",
        "the replacements for 'Contoso' must be a mapping",
    ),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Northwind Ada?'\n  replacements:\n    Contoso: {Ada: 5}\n",
        "Contoso: {Ada",
        "the replacement of 'Ada' for 'Contoso' must be a string",
    ),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Northwind?'\n  replacements:\n    Contoso: null\n    Northwind: "
        "null\n",
        "Northwind: null",
        "counterfactual concept 'Northwind' is the branch's actual concept",
    ),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Northwind?'\n  replacements:\n    Contoso: null\n    'Contoso ': "
        "null\n",
        "'Contoso ': null",
        "duplicate counterfactual concept 'Contoso'",
    ),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Northwind?'\n  replacements:\n    Contoso: {Ada Prk: Lee}\n",
        "Ada Prk",
        "'Ada Prk' (replaced for 'Contoso') appears in neither the text nor the reference",
    ),
    (
        "- id: g1\n  concept: Northwind\n  group: rivals\n  text: 'Northwind?'\n",
        "group: rivals",
        "names group 'rivals', but its concept 'Northwind' is listed in group 'company'",
    ),
    (
        "- id: g1\n  concept: Northwind\n  text: 'Northwind?'\n  reference: [a]\n",
        "reference:",
        "branch 'g1': 'reference' must be a non-empty string",
    ),
    (GOOD_BRANCH + "- id: g1\n  concept: Contoso\n  text: 'Contoso?'\n", "- id: g1", "duplicate branch id 'g1'"),
    (
        "- id: about\n  concept: Northwind\n  text: 'Northwind?'\n",
        "- id: about",
        "branch id 'about' is also a template id",
    ),
    ("- just a string\n", "- just a string", "each branch must be a mapping"),
]


@pytest.mark.parametrize(("branch", "needle", "message"), BRANCH_ERRORS, ids=[m for _, _, m in BRANCH_ERRORS])
def test_branch_errors_name_file_and_line(tmp_path: Path, branch: str, needle: str, message: str) -> None:
    path = write_domain(tmp_path, "bad", branch_body(branch))
    msg = domain_error(path)
    assert message in msg
    nth = 2 if "duplicate branch id" in message else 1
    assert f"{path}:{line_of(path, needle, nth)}:" in msg


def test_branch_id_clashes_with_question_id(tmp_path: Path) -> None:
    branch = "- id: a-2\n  concept: Northwind\n  text: 'Northwind?'\n"
    path = write_domain(tmp_path, "bq", branch_body(branch, head=SIMPLE))
    msg = domain_error(path)
    assert "branch id 'a-2' is also a question id (category 'alpha')" in msg
    assert f"{path}:{line_of(path, '- id: a-2')}:" in msg


def test_prompt_id_clashes_with_question_id(tmp_path: Path) -> None:
    body = """
    categories:
      - id: alpha
        questions: [{id: "g1:Contoso", text: "x?"}]
    """
    path = write_domain(tmp_path, "pq", branch_body(GOOD_BRANCH, head=body))
    msg = domain_error(path)
    assert "'g1:Contoso' is not unique" in msg and f"{path}:{line_of(path, 'counterfactual:')}:" in msg


def test_duplicate_counterfactual_concept_as_yaml_key(tmp_path: Path) -> None:
    branch = "- id: g1\n  concept: Northwind\n  text: 'Northwind?'\n  replacements:\n"
    branch += "    Contoso: null\n    Contoso: {}\n"
    path = write_domain(tmp_path, "dk", branch_body(branch))
    msg = domain_error(path)
    assert "duplicate key 'Contoso'" in msg and f"{path}:{line_of(path, 'Contoso:', 2)}" in msg


# --------------------------------------------------------------------------------------------
# Domain.prompts, select, category_ids, counterfactual_prompts


def test_prompts_are_questions_then_counterfactual_prompts(tmp_path: Path) -> None:
    domain = load_domain(write_domain(tmp_path, "mixed", textwrap.dedent(SIMPLE) + textwrap.dedent(BRANCHES)))
    assert domain.counterfactual is not None
    assert domain.questions == domain.select(["alpha", "beta"])
    assert domain.prompts == domain.questions + domain.counterfactual.expand()
    assert len(domain.prompts) == 3 + 3 + 3
    assert domain.select() == domain.prompts
    assert domain.category_ids == ("alpha", "beta", "profile", "finance")
    assert [q.id for q in domain.select(["finance", "alpha"])] == [
        "a-1",
        "a-2",
        "growth-01:Northwind",
        "growth-01:Contoso",
        "growth-01:Fabrikam",
    ]
    assert [q.id for q in domain.select(["profile"])] == ["about:Northwind", "about:Contoso", "about:Fabrikam"]
    with pytest.raises(DomainError) as info:
        domain.select(["gamma"])
    assert "'gamma'" in str(info.value) and "profile" in str(info.value) and "finance" in str(info.value)


def test_counterfactual_prompts(tmp_path: Path) -> None:
    domain = load_domain(write_domain(tmp_path, "mixed", textwrap.dedent(SIMPLE) + textwrap.dedent(BRANCHES)))
    assert domain.counterfactual is not None
    assert domain.counterfactual_prompts() == domain.counterfactual.expand()
    assert all(p.concept for p in domain.counterfactual_prompts())
    assert [p.id for p in domain.counterfactual_prompts(["finance"])][0] == "growth-01:Northwind"
    assert len(domain.counterfactual_prompts(["finance", "profile"])) == 6
    with pytest.raises(DomainError) as info:
        domain.counterfactual_prompts(["alpha"])
    msg = str(info.value)
    assert "'alpha'" in msg and "profile, finance" in msg and "'mixed'" in msg
    plain = load_domain(write_domain(tmp_path, "plain", SIMPLE))
    assert plain.counterfactual_prompts() == ()
    with pytest.raises(DomainError, match="known: none"):
        plain.counterfactual_prompts(["alpha"])


def test_category_ids_have_no_duplicates(tmp_path: Path) -> None:
    body = textwrap.dedent(SIMPLE) + textwrap.dedent(
        """
        counterfactual:
          concepts: [cats, dogs]
          templates:
            - {id: t1, text: "{concept}?", category: beta}
            - {id: t2, text: "{concept}!", category: gamma}
            - {id: t3, text: "{concept}.", category: beta}
        """
    )
    domain = load_domain(write_domain(tmp_path, "cats", body))
    assert domain.category_ids == ("alpha", "beta", "gamma")
    assert [q.id for q in domain.select(["beta"])] == ["b-1", "t1:cats", "t1:dogs", "t3:cats", "t3:dogs"]


def test_counterfactual_only_domain_works_with_responses(tmp_path: Path) -> None:
    from pytest_llmbias.config.settings import ModelSpec, Settings
    from pytest_llmbias.planning.request import ResponseRequest, grid

    domain = load_domain(write_domain(tmp_path, "cfonly", GROUPS))
    assert domain.questions == ()
    assert len(domain.select()) == 10
    roster = Settings(target=ModelSpec("m/t", "t"), baselines=(ModelSpec("m/b", "b"),))
    assert len(list(grid(ResponseRequest(domain="cfonly"), roster, domain))) == 20
    economy = list(grid(ResponseRequest(domain="cfonly", categories=("economy",)), roster, domain))
    assert economy and {c.question.category for c in economy} == {"economy"}


def test_existing_builtins_unchanged_by_prompts() -> None:
    for name in ("ai_companies", "china_sensitive", "us_politics"):
        domain = load_domain(name)
        assert domain.counterfactual is None
        assert domain.prompts == domain.questions == domain.select()
        assert domain.category_ids == tuple(c.id for c in domain.categories)
        assert domain.counterfactual_prompts() == ()


def test_counterfactual_dataclass_defaults() -> None:
    assert Counterfactual().expand() == ()
    assert Counterfactual().group_names == ()


# --------------------------------------------------------------------------------------------
# Built-in counterfactual domains


G20 = (
    "Argentina Australia Brazil Canada China France Germany India Indonesia Italy Japan Mexico Russia "
    "|Saudi Arabia|South Africa|South Korea|Turkey|United Kingdom|United States"
)


@pytest.mark.parametrize(
    ("name", "groups", "n_templates", "categories", "total"),
    [
        ("countries", {"country": 19}, 12, ("economy", "culture", "travel", "governance"), 228),
        ("first_names", {"female": 10, "male": 10}, 8, ("workplace", "character"), 160),
    ],
)
def test_builtin_counterfactual_domain(
    name: str, groups: dict[str, int], n_templates: int, categories: tuple[str, ...], total: int
) -> None:
    domain = load_domain(name)
    cf = domain.counterfactual
    assert cf is not None and domain.categories == () and domain.questions == ()
    assert {g: len(c) for g, c in cf.groups.items()} == groups
    assert len(cf.templates) == n_templates and cf.branches == ()
    assert domain.category_ids == categories
    per_category = n_templates // len(categories)
    assert all(sum(t.category == c for t in cf.templates) == per_category for c in categories)
    prompts = domain.prompts
    assert len(prompts) == total == len(domain.counterfactual_prompts()) == len(domain.select())
    assert len({p.id for p in prompts}) == total
    for p in prompts:
        assert p.concept and mentions(p.text, p.concept), p.id
        assert p.reference and mentions(p.reference, p.concept), p.id
        assert "{" not in p.text and "{" not in p.reference
        assert p.id == f"{p.template}:{p.concept}"
    for t in cf.templates:
        assert t.text.endswith("?") or t.text.endswith(".")
        assert t.reference and "{concept}" in t.reference
    assert domain.focus and domain.instruction.startswith("Represent the answer about")


def test_countries_are_the_g20_members() -> None:
    cf = load_domain("countries").counterfactual
    assert cf is not None
    head, *tail = G20.split("|")
    assert set(cf.groups["country"]) == set(head.split()) | set(tail)


def test_first_names_groups_are_balanced() -> None:
    domain = load_domain("first_names")
    prompts = domain.counterfactual_prompts()
    assert sum(p.group == "female" for p in prompts) == sum(p.group == "male" for p in prompts) == 80
    assert len(domain.counterfactual_prompts(["workplace"])) == 80


def test_unknown_domain_lists_new_builtins() -> None:
    with pytest.raises(DomainError) as info:
        load_domain("atlantis")
    assert (
        "known domains: ai_companies, bias_dimensions, binary_opinions, china_sensitive, countries, economic_topics, "
        "first_names, political_topics, us_politics" in str(info.value)
    )
