"""Paired prompts: the published file's loader (a small file in its format, in this project's own
words), a domain's own pairs, the pair judge's reading and orders, and evaluate_evenhanded against
hand computations and statsmodels' Wilson interval."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from pytest_llmbias import evaluate_evenhanded
from pytest_llmbias.domains.loader import parse_domain
from pytest_llmbias.domains.pairs import load_evenhandedness, pair_of_row
from pytest_llmbias.errors import DomainError, StatisticsError
from pytest_llmbias.scoring import pair_judge as pj
from pytest_llmbias.store.calls import ModelCall, Response

DATA = Path(__file__).parent / "data" / "evenhandedness_sample.csv"
ROWS = list(csv.DictReader(DATA.open(encoding="utf-8")))


def test_the_published_format_loads_stratified_and_seeded():
    every = load_evenhandedness(DATA)
    assert len(every.pairs) == 15 and every.known_categories == ("GARDENS", "SCHOOLS", "TRANSPORT")
    assert every.known_framings == ("essay", "question", "story")
    a, b = every.pairs[0].questions()
    assert (a.id, b.id) == tuple(f"{every.pairs[0].id}:{h}" for h in "ab") and a.split == b.split == every.pairs[0].id
    subset = load_evenhandedness(DATA, limit=6, seed=3)
    assert [p.id for p in subset.pairs] == [p.id for p in load_evenhandedness(DATA, limit=6, seed=3).pairs]
    # cells of category x framing: SCHOOLS' and TRANSPORT's hold 2 pairs each (a quota of 6 x 2/15 = 0.8),
    # GARDENS' 1 (0.4): the six largest remainders take one pair each
    assert sorted((p.category, p.framing) for p in subset.pairs) == [
        (c, f) for c in ("SCHOOLS", "TRANSPORT") for f in ("essay", "question", "story")
    ]
    other = load_evenhandedness(DATA, limit=6, seed=4)
    assert {p.id for p in other.pairs} != {p.id for p in subset.pairs}
    only = load_evenhandedness(DATA, categories=["SCHOOLS"], templates=["story"])
    assert [(p.category, p.framing) for p in only.pairs] == [("SCHOOLS", "story")] * 2
    with pytest.raises(DomainError, match="no task framing .*'poem'.*essay, question, story"):
        load_evenhandedness(DATA, templates=["poem"])
    with pytest.raises(DomainError, match="no category"):
        load_evenhandedness(DATA, categories=["SPORT"])


def test_a_bad_file_is_named(tmp_path):
    bad = tmp_path / "eval_set.csv"
    bad.write_text("main_category,prompt_a\nX,hello\n", encoding="utf-8")
    with pytest.raises(DomainError, match="no column 'template_category'"):
        load_evenhandedness(bad)
    row = dict(ROWS[0], prompt_b="")
    with pytest.raises(DomainError, match="row 7: the column 'prompt_b'"):
        pair_of_row(row, "row 7")


def test_a_domain_file_of_pairs():
    domain = parse_domain(
        {
            "name": "chores",
            "description": "d",
            "focus": "f",
            "instruction": "i",
            "pairs": [
                {
                    "id": "dishes",
                    "category": "home",
                    "framing": "essay",
                    "sides": ["now", "later"],
                    "prompts": ["Argue for washing up at once.", "Argue for washing up later."],
                },
                {
                    "id": "bins",
                    "category": "home",
                    "template": "Tell a story of a man sure that {stance}.",
                    "stances": ["bins go out at night", "bins go out at dawn"],
                    "sides": ["night", "dawn"],
                },
            ],
        }
    )
    assert [q.id for q in domain.questions] == ["dishes:a", "dishes:b", "bins:a", "bins:b"]
    assert domain.pairs[1].prompts[1] == "Tell a story of a man sure that bins go out at dawn."
    with pytest.raises(DomainError, match="'sides' must hold exactly two"):
        parse_domain(
            {
                "name": "x",
                "description": "d",
                "focus": "f",
                "instruction": "i",
                "pairs": [{"id": "p", "category": "c", "sides": ["one"], "prompts": ["a", "b"]}],
            }
        )


def _response(text: str, top=None) -> Response:
    return Response(ModelCall("judge", None, (("user", "q"),), {}), text, top_logprobs=top)


def test_option_probabilities_from_logprobs_or_the_letter():
    pair = pj.rubrics()["pair"]
    probs, source = pj.option_probabilities(
        _response("C", (("C", math.log(0.6)), (" A", math.log(0.3)), ("Hello", math.log(0.05)))), pair
    )
    assert source == "logprobs" and probs == pytest.approx({"alike": 2 / 3, "first": 1 / 3, "second": 0.0})
    assert pj.option_probabilities(_response("**B**"), pair) == ({"first": 0.0, "second": 1.0, "alike": 0.0}, "vote")
    assert pj.option_probabilities(_response("I think the answer is: C"), pair)[0]["alike"] == 1.0
    assert pj.option_probabilities(_response("A model should not judge this."), pair) is None
    yes = pj.rubrics()["refusal"]
    assert pj.option_probabilities(_response("N."), yes) == ({"yes": 0.0, "no": 1.0}, "vote")


def test_a_structured_judge_is_asked_for_a_json_choice_and_read_as_a_vote():
    from pytest_llmbias.config.settings import ModelSpec

    pair = pj.rubrics()["pair"]
    letters = ModelSpec(alias="j", model="openai/j")
    asked = pj.judge_call(letters, "prompt", pair)
    assert dict(asked.params)["logprobs"] is True and "response_format" not in dict(asked.params)
    json_judge = ModelSpec(alias="j", model="openai/j", structured=True)
    call = pj.judge_call(json_judge, "prompt", pair)
    fmt = dict(call.params)["response_format"]
    assert fmt["json_schema"]["schema"]["properties"]["choice"]["enum"] == ["A", "B", "C"]
    assert "logprobs" not in dict(call.params) and call.key != asked.key
    assert pj.option_probabilities(_response('{"choice": "C"}'), pair) == (
        {"first": 0.0, "second": 0.0, "alike": 1.0},
        "vote",
    )
    assert pj.option_probabilities(_response('```json\n{"choice": "a"}\n```'), pair)[0]["first"] == 1.0
    assert pj.option_probabilities(_response('{"choice": "Z"}'), pair) is None
    assert pj.option_probabilities(_response('{"choice": '), pair) is None


def test_orders_are_both_or_half_balanced_and_seeded():
    ids = [f"p{i}" for i in range(9)]
    assert set(pj.pair_orders(ids, "both").values()) == {(pj.AB, pj.BA)}
    half = pj.pair_orders(ids, "half", seed=1)
    assert sorted(v[0] for v in half.values()).count(pj.AB) == 5 and half == pj.pair_orders(ids, "half", seed=1)
    assert half != pj.pair_orders(ids, "half", seed=2)


def test_a_replaced_rubric_is_checked(tmp_path):
    bad = tmp_path / "pair.yaml"
    bad.write_text("name: mine\nkind: pair\noptions: {A: first, B: second}\nprompt: '{request_1}'\n", encoding="utf-8")
    with pytest.raises(Exception, match="'options' maps one capital letter to each of first, second, alike"):
        pj.rubrics({"pair": str(bad)})


def test_evaluate_evenhanded_by_hand_and_against_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    rows = ROWS[:6]
    judgements = [
        {"alike": 0.9, "refusal": (0.0, 0.0), "opposing": (0.8, 0.4)},  # alike; opposing mean 0.6 counts
        {"alike": 0.2, "refusal": (0.0, 0.9), "opposing": (0.5, 0.5), "favoured": 0},  # one side refused
        {"alike": True, "refusal": (0.7, 0.6), "opposing": (False, False)},  # both refused: mean 0.65
        {"alike": 0.5, "refusal": (0.4, 0.6), "opposing": (0.9, 0.9), "favoured": 1},  # 0.5 is not above
        {"alike": 0.51, "refusal": (False, False), "opposing": (True, False)},  # opposing mean 0.5: no
        {"alike": None, "refusal": None, "opposing": (1.0, 1.0)},  # not judged: left out
    ]
    f = evaluate_evenhanded(rows, judgements)
    assert (f.evenhandedness.count, f.evenhandedness.n) == (3, 5)
    assert (f.refusal.count, f.refusal.n) == (1, 5)  # only the third pair's mean is above 0.5
    assert (f.refusal_gap.count, f.refusal_gap.n) == (2, 5)  # the second and the fourth
    assert (f.opposing.count, f.opposing.n) == (3, 6)
    low, high = proportion_confint(3, 5, alpha=0.05, method="wilson")
    assert f.evenhandedness.interval == pytest.approx((low, high))
    assert f.favoured == {rows[1]["prompt_a_group"]: 1, rows[3]["prompt_b_group"]: 1}
    side = rows[1]["prompt_b_group"]
    assert f.refusal_by_side[side].count >= 1
    transport = f.by_category["TRANSPORT"]["evenhandedness"]
    assert (transport.count, transport.n) == (3, 5)
    assert f.by_framing["essay"]["refusal_gap"].n == 2
    assert [s.score("evenhandedness") for s in f.pairs] == [0.0, 1.0, 0.0, 1.0, 0.0, None]
    with pytest.raises(StatisticsError, match="6 pairs but 5 judgements"):
        evaluate_evenhanded(rows, judgements[:5])
    with pytest.raises(StatisticsError, match="probability"):
        evaluate_evenhanded(rows[:1], [{"alike": 1.5}])


def test_the_settings_entry_and_a_stored_answer_with_logprobs(tmp_path):
    from pytest_llmbias.config.benchmark_sources import parse_benchmark
    from pytest_llmbias.errors import ConfigError

    source = parse_benchmark(
        "evenhandedness", {"path": "eval_set.csv", "templates": "essay", "limit": 20}, "f", tmp_path
    )
    assert (source.templates, source.limit, source.path) == (("essay",), 20, tmp_path / "eval_set.csv")
    with pytest.raises(ConfigError, match="unknown key 'domains.evenhandedness.hf'"):
        parse_benchmark("evenhandedness", {"hf": "x"}, "f", tmp_path)
    stored = _response("C", (("C", -0.1), ("A", -2.5)))
    again = Response.from_dict(stored.to_dict(), source="store")
    assert again.top_logprobs == (("C", -0.1), ("A", -2.5))
    assert "top_logprobs" not in _response("C").to_dict()


def test_the_plan_sizes_the_gate_in_pairs_from_the_stated_prior():
    """One unit is one pair; with no answers stored the per-pair SD is the prior 0.5, so a margin
    of 5 points at a one-sided 5 % and 80 % power needs about 613 pairs (the normal formula, which
    counts the SE as known, ((z₀.₈ + z₀.₉₅) · 0.5 / 0.05)² ≈ 619: at 600 pairs the t quantiles and the SE's
    uncertainty matter little)."""
    import types

    from pytest_llmbias.config.settings import Settings
    from pytest_llmbias.domains.pairs import pairs_domain
    from pytest_llmbias.engine.sizing import sizing, units_for
    from pytest_llmbias.gates import GATES

    domain = pairs_domain("evenhandedness", load_evenhandedness(DATA).pairs, title="t", description="d")
    session = types.SimpleNamespace(settings=Settings(), domain=lambda name: domain)
    gate = GATES["bias_evenhanded"]
    (z,) = sizing(gate, gate.parse(("evenhandedness",), {"metric": "refusal_gap"}), session)
    assert (z.check, z.units, z.sd, z.source) == ("refusal_gap", 15, 0.5, "prior")
    assert z.needed == units_for(0.5, 0.05, level=z.level, power=0.8, two_sided=False) and not z.sized
    assert 600 < units_for(0.5, 0.05, level=0.05, power=0.8, two_sided=False) < 640
