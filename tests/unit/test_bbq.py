"""BBQ scored as lm-evaluation-harness scores it: ``evaluate_bbq`` against the harness's own
functions (``lm_eval/tasks/bbq/utils.py`` of the installed ``lm_eval`` package, loaded by its path:
``process_docs``, ``doc_to_choice``, ``_process_results`` and the ``agg_*`` aggregations) on the same
answers, and against the BBQ paper's formulas worked by hand.

The items (``data/bbq_items.jsonl``) are in BBQ's published format, written for these tests: five
categories, both context conditions and polarities, an option label with "man" inside it, an
intersectional label, and an option whose group BBQ leaves empty.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest

from pytest_llmbias.errors import DomainError
from pytest_llmbias.stats.bbq import biased_options, evaluate_bbq, option_groups

ITEMS = [json.loads(line) for line in (Path(__file__).parent / "data" / "bbq_items.jsonl").read_text().splitlines()]
KEY = [(i["category"], i["example_id"]) for i in ITEMS]


@pytest.fixture(scope="module")
def harness():
    """lm-evaluation-harness's BBQ task module (it imports ``datasets`` and numpy only)."""
    pytest.importorskip("datasets")
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("lm-evaluation-harness is not installed (the README's test command installs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / "tasks" / "bbq" / "utils.py"
    module_spec = importlib.util.spec_from_file_location("lm_eval_bbq_utils", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def harness_figures(harness, items, choices) -> dict:
    import datasets

    docs = list(harness.process_docs(datasets.Dataset.from_list(items)))
    rows = []
    for doc in docs:
        choice = choices[(doc["category"], doc["example_id"])]
        answer = -1 if choice is None else harness.doc_to_choice(doc).index(doc[f"ans{choice}"])
        rows.append(harness._process_results(doc, answer))

    def agg(metric: str, name: str) -> float:
        return float(getattr(harness, f"agg_{name}")([r[metric] for r in rows if metric in r]))

    out = {"accuracy": float(sum(r["acc"] for r in rows) / len(rows)),
           "accuracy_ambiguous": agg("accuracy_amb", "accuracy_amb"),
           "accuracy_disambiguated": agg("accuracy_disamb", "accuracy_disamb"),
           "bias_ambiguous": agg("amb_bias_score", "amb_bias_scores"),
           "bias_disambiguated": agg("disamb_bias_score", "disamb_bias_scores")}
    for category in {i["category"] for i in items}:
        out[f"bias_ambiguous/{category}"] = agg(f"amb_bias_score_{category}", "amb_bias_scores")
        out[f"bias_disambiguated/{category}"] = agg(f"disamb_bias_score_{category}", "disamb_bias_scores")
    return out


def ours(items, choices) -> dict:
    scores = evaluate_bbq(items, choices)
    out = {k: getattr(scores, k) for k in ("accuracy", "accuracy_ambiguous", "accuracy_disambiguated",
                                           "bias_ambiguous", "bias_disambiguated")}
    for category, f in scores.categories.items():
        out[f"bias_ambiguous/{category}"] = f.bias_ambiguous
        out[f"bias_disambiguated/{category}"] = f.bias_disambiguated
    return out


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        (math.isnan(a[k]) and math.isnan(b[k])) or a[k] == pytest.approx(b[k], abs=1e-12) for k in a)


@pytest.mark.parametrize("seed", range(40))
def test_every_figure_is_the_harness_s_on_random_answers(harness, seed):
    rng = random.Random(seed)
    weights = [1, 1, 1, 0.3]  # some answers unreadable
    choices = {k: rng.choices([0, 1, 2, None], weights)[0] for k in KEY}
    mine, theirs = ours(ITEMS, choices), harness_figures(harness, ITEMS, choices)
    assert same(mine, theirs), {k: (mine[k], theirs.get(k)) for k in mine if not same({k: mine[k]}, {k: theirs.get(k)})}


def test_the_harness_s_figures_for_the_extreme_answerers(harness):
    def answerer(pick):
        return {(i["category"], i["example_id"]): pick(i) for i in ITEMS}

    always_right = answerer(lambda i: i["label"])
    always_stereotype = answerer(lambda i: min(biased_options(i)) if biased_options(i) else i["label"])
    always_unknown = answerer(lambda i: next(n for n in range(3) if i[f"ans{n}"] in (
        "Unknown", "Not known", "Can't be determined", "Cannot be determined", "Not enough info")))
    never_read = answerer(lambda i: None)
    for choices in (always_right, always_stereotype, always_unknown, never_read):
        assert same(ours(ITEMS, choices), harness_figures(harness, ITEMS, choices))
    right = evaluate_bbq(ITEMS, always_right)
    assert right.accuracy == 1.0 and right.bias_ambiguous == 0.0 and right.unparsed == 0
    unread = evaluate_bbq(ITEMS, never_read)
    assert unread.unparsed == len(ITEMS) and unread.accuracy == 0.0 and unread.bias_disambiguated == 0.0


def test_the_paper_s_formulas_by_hand():
    """Age only: the two disambiguated items answered with the stereotype (the retiree struggles, the
    student is at ease) and the two ambiguous ones once right ("can't be determined") and once with
    the stereotype. s_DIS = 2 * 2/2 - 1 = 1; over the ambiguous items 1 biased of 1 non-unknown
    gives 2 * 1/1 - 1 = 1, times (1 - accuracy 1/2): s_AMB = 0.5."""
    age = [i for i in ITEMS if i["category"] == "Age"]
    scores = evaluate_bbq(age, {0: 2, 1: 0, 2: 1, 3: 1})
    assert scores.bias_disambiguated == 1.0 and scores.accuracy_disambiguated == 0.0
    assert scores.accuracy_ambiguous == 0.5 and scores.bias_ambiguous == 0.5
    half = evaluate_bbq(age, {0: 2, 1: 0, 2: 2, 3: 0})  # the retiree twice: once biased, once right
    assert half.bias_disambiguated == 0.0 and half.accuracy == 0.75 and half.bias_ambiguous == 0.0  # 2 * 1/2 - 1
    # against the stereotype everywhere: the formula gives -1, the harness (and this module) 0
    against = evaluate_bbq(age, {0: 1, 1: 1, 2: 0, 3: 0})
    assert against.bias_disambiguated == 0.0 and against.bias_ambiguous == 0.0
    assert set(scores.categories) == {"Age"} and scores.to_dict()["categories"]["Age"]["n_items"] == 4


def test_group_labels_are_read_as_the_harness_reads_them():
    assert option_groups("lowSES-Black") == ["low ses", "black"]
    assert option_groups("woman_F") == ["f", "woman", "f"]
    assert option_groups("German_Europe") == ["germ", "man", "europe"]  # the harness's split, kept
    nationality = next(i for i in ITEMS if i["category"] == "Nationality" and i["example_id"] == 3)
    assert biased_options(nationality) == {1, 2}  # "German" is not read as the stereotyped group there


def test_bad_input_is_named():
    with pytest.raises(DomainError, match="needs label"):
        evaluate_bbq([{k: v for k, v in ITEMS[0].items() if k != "label"}], {0: 1})
    with pytest.raises(DomainError, match=r"key the choices by \(category, example_id\)"):
        evaluate_bbq(ITEMS, {i["example_id"]: 0 for i in ITEMS})
    with pytest.raises(DomainError, match=r"no choice for BBQ item\(s\) \('Age', 3\)"):
        evaluate_bbq(ITEMS[:4], {("Age", n): 0 for n in range(3)})
    with pytest.raises(DomainError, match="a choice must be 0, 1, 2 or None"):
        evaluate_bbq(ITEMS[:1], {0: 3})
    broken = dict(ITEMS[0], ans2="Maybe")
    with pytest.raises(DomainError, match="none of its options says the answer is unknown"):
        evaluate_bbq([broken], {0: 0})
