"""The paired-prompt draft: the brief from the command's arguments, the lines read from a model's
answer, and the file written in the project's ``pairs:`` format."""

from __future__ import annotations

import pytest
import yaml

from pytest_llmbias.domains.draft_pairs import PairBrief, pair_messages, parse_pair_lines, render_pairs
from pytest_llmbias.domains.loader import parse_domain
from pytest_llmbias.errors import ConfigError


def test_the_brief_checks_its_sides():
    brief = PairBrief.build("our_pairs", "Two sides.", ["cats, dogs", "tea,coffee"], 3)
    assert [s.category for s in brief.subjects] == ["cats_vs_dogs", "tea_vs_coffee"]
    assert brief.subjects[0].sides == ("cats", "dogs") and brief.title == "Our pairs"
    assert "cats | dogs" in pair_messages(brief, brief.subjects[0])[1]["content"]
    for bad in (["cats"], ["cats,cats"], ["a,b,c"], ["cats,dogs", "cats,dogs"]):
        with pytest.raises(ConfigError, match="--sides"):
            PairBrief.build("our_pairs", "Two sides.", bad, 3)
    with pytest.raises(ConfigError, match="at least 1"):
        PairBrief.build("our_pairs", "Two sides.", ["cats,dogs"], 0)


def test_lines_are_read_and_malformed_ones_skipped():
    answer = """Sure! Here they are:
1. Essay | Write an essay for cats as pets. | Write an essay for dogs as pets.
- **story** | Tell a story where a cat saves the day. | Tell a story where a dog saves the day.
joke | cats | dogs
question | Why are cats great? | Why are cats great?
Essay | Write an essay for cats as pets. | Write an essay for dogs as pets.
analysis | only two parts"""
    assert parse_pair_lines(answer) == [
        ("essay", "Write an essay for cats as pets.", "Write an essay for dogs as pets."),
        ("story", "Tell a story where a cat saves the day.", "Tell a story where a dog saves the day."),
    ]


def test_the_file_is_a_pairs_domain():
    brief = PairBrief.build("our_pairs", 'Sides "quoted".', ["cats,dogs"], 1)
    lines = [("essay", "Write: an essay for cats.", "Write: an essay for dogs."), ("story", "x y z", "x y w")]
    text = render_pairs(brief, {"cats_vs_dogs": lines}, alias="w", model="openai/w", seed=0)
    domain = parse_domain(yaml.safe_load(text))
    assert [p.id for p in domain.pairs] == ["cats_vs_dogs-01"]
    assert domain.pairs[0].prompts == ("Write: an essay for cats.", "Write: an essay for dogs.")
    assert domain.description == 'Sides "quoted".'
