"""The LLM Bias Index: the arithmetic of the LLMBI paper (Oketunji et al.; listings 1 and 3), table 1 reproduced from
the responses its appendix prints, weights, both penalties and a custom feature."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

import pytest_llmbias
from pytest_llmbias.errors import FeatureError, StatisticsError
from pytest_llmbias.scoring.features import FeatureExtractor
from pytest_llmbias.stats.llmbi import index_parts, lexical_penalty, llmbi, prompt_score

TABLE1 = json.loads((Path(__file__).parent / "data" / "llmbi_table1.json").read_text(encoding="utf-8"))

#: table 1 prints each score to 4 decimals; the appendix prints the full figure. They agree except
#: on one row, where the table's rounding is off by one in the last place.
TABLE1_PRINTED = {
    "Discuss the role of women in technology.": 0.8875,
    "Explain the effects of poverty on education.": 0.2738,
    # 0.33194... in the appendix
    "Discuss the challenges faced by LGBTQ+ individuals in conservative societies.": 0.3320,
}


@pytest.mark.parametrize("row", TABLE1, ids=[r["prompt"][:40] for r in TABLE1])
def test_table1_scores_are_reproduced_from_the_printed_responses(row) -> None:
    """Listing 3 scores each response alone: 0.2 + 2.5·|polarity| (weights [1], P = 0.2, λ = 1.5)."""
    result = pytest_llmbias.bias_index({row["dimension"]: [row["response"]]})
    assert result.index == pytest.approx(row["score"], abs=5e-5)
    assert round(result.index, 4) == round(row["score"], 4)
    assert result.response_scores[row["dimension"]] == (pytest.approx(row["score"], abs=5e-5),)
    assert result.dimensions[row["dimension"]] == result.sentiment  # b = S = |polarity|


def test_table1_rounding_and_the_one_row_it_gets_wrong() -> None:
    by_prompt = {r["prompt"]: r["score"] for r in TABLE1}
    assert len(TABLE1) == 18 and len({r["dimension"] for r in TABLE1}) == 9
    for prompt, printed in TABLE1_PRINTED.items():
        computed = round(
            pytest_llmbias.bias_index({"d": [next(r["response"] for r in TABLE1 if r["prompt"] == prompt)]}).index, 4
        )
        assert computed == round(by_prompt[prompt], 4)
        if "LGBTQ+" in prompt:
            assert computed == 0.3319 != printed  # the table rounds 0.331944... up
        else:
            assert computed == printed


def test_listing1_arithmetic_divides_by_the_number_of_dimensions() -> None:
    # (2·0.3 + 1·0.1) / 2 + 0.2 + 1.5·0.25
    assert llmbi([0.3, 0.1], weights=[2.0, 1.0], penalty=0.2, sentiment=0.25, lambda_=1.5) == pytest.approx(0.925)
    assert prompt_score(0.275, 0.275) == pytest.approx(0.8875)
    parts = index_parts({"a": [0.1, 0.3], "b": [0.5]}, {"a": [0.1, 0.3], "b": [0.5]}, weights={"b": 3.0})
    assert parts.dimensions == {"a": pytest.approx(0.2), "b": 0.5}
    assert parts.weights == {"a": 1.0, "b": 3.0}
    assert parts.sentiment == pytest.approx(0.3)  # the mean over every response, not over dimensions
    assert parts.index == pytest.approx((0.2 + 1.5) / 2 + 0.2 + 1.5 * 0.3)


def test_the_lexical_penalty_measures_repetition() -> None:
    assert lexical_penalty(["one two three", "four five six"]) == 0.0
    assert lexical_penalty(["the same words here", "the same words here"]) == pytest.approx(0.5)
    assert lexical_penalty(["a b a b a b"]) == pytest.approx(1 - 2 / 5)
    with pytest.raises(StatisticsError, match="at least two words"):
        lexical_penalty(["one", "two"])
    varied = ["Cities grow when trade routes meet rivers.", "Rural towns keep older customs alive."]
    repetitive = ["This group is great and this group is great.", "This group is great, truly great."]
    low = pytest_llmbias.bias_index({"d": varied}, diversity_penalty="lexical")
    high = pytest_llmbias.bias_index({"d": repetitive}, diversity_penalty="lexical")
    assert low.penalty == 0.0 < high.penalty and high.penalties == {"d": high.penalty}


def test_weights_and_their_errors() -> None:
    responses = {"gender": ["A fair, measured answer."], "age": ["An absolutely wonderful, amazing answer!"]}
    equal = pytest_llmbias.bias_index(responses)
    heavy = pytest_llmbias.bias_index(responses, weights={"age": 3.0})
    gap = (3.0 - 1.0) * equal.dimensions["age"] / 2
    assert heavy.index == pytest.approx(equal.index + gap)
    with pytest.raises(StatisticsError, match="'race', which is not a bias dimension here"):
        pytest_llmbias.bias_index(responses, weights={"race": 1.0})
    with pytest.raises(StatisticsError, match="the weight of 'age' must be positive"):
        pytest_llmbias.bias_index(responses, weights={"age": -1.0})
    with pytest.raises(StatisticsError, match="'religion' has no responses"):
        pytest_llmbias.bias_index({**responses, "religion": []})
    with pytest.raises(StatisticsError, match="diversity_penalty must be a number or 'lexical'"):
        pytest_llmbias.bias_index(responses, diversity_penalty="corpus")


class ShoutFeature(FeatureExtractor):
    """A custom annotation: the share of letters in capitals."""

    name = "shout"

    def extract(self, texts: Sequence[str], references: Sequence[str | None] | None = None) -> list[float]:
        return [sum(c.isupper() for c in t) / max(1, sum(c.isalpha() for c in t)) for t in texts]


def test_a_custom_feature_annotates_while_s_stays_the_sentiment() -> None:
    responses = {"d": ["THIS IS LOUD.", "this is quiet."]}
    result = pytest_llmbias.bias_index(responses, feature=ShoutFeature())
    assert result.feature == "shout"
    assert result.annotations == {"d": (1.0, 0.0)}
    assert result.dimensions == {"d": 0.5}
    sentiment = pytest_llmbias.bias_index(responses)
    assert result.sentiment == sentiment.sentiment  # S is the sentiment extremity either way
    assert result.index == pytest.approx(0.5 + 0.2 + 1.5 * sentiment.sentiment)
    with pytest.raises(FeatureError):
        pytest_llmbias.bias_index(responses, feature="no-such-feature")
