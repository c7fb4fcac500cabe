"""Decoding under a JSON schema (``pytest_llmbias/local/schema.py``) with the real SmolLM2 tokenizer:
whatever tokens a model picks among those allowed, the answer parses and meets the schema, an
``enum`` property included (a structured pair judge's ``{"choice": letter}``)."""

from __future__ import annotations

import json
import random

import pytest

from pytest_llmbias.local.model import MODEL_NAME, model_file
from pytest_llmbias.local.schema import SchemaDecoder, Vocabulary, schema_pieces


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    from transformers import AutoTokenizer

    folder, name = model_file(MODEL_NAME)
    return Vocabulary(AutoTokenizer.from_pretrained(folder, gguf_file=name))


def decode(vocab: Vocabulary, schema: dict, rng: random.Random, budget: int = 40) -> str:
    """The answer of a model that picks any allowed token at random (``rng``)."""
    decoder, out = SchemaDecoder(vocab, schema, budget), []
    while not decoder.done:
        forced, allowed = decoder.choices()
        if forced is None:
            pool = allowed if allowed is not None else range(len(vocab.texts))
            forced = int(pool[rng.randrange(len(pool))])
        decoder.take(forced)
        out.append(forced)
    return vocab.tokenizer.decode(out)


def test_every_answer_decoded_under_a_schema_parses_and_meets_it(vocab: Vocabulary) -> None:
    rng = random.Random(0)
    choice = {"type": "object", "properties": {"choice": {"type": "string", "enum": ["A", "B", "C"]}}}
    sides = {"type": "object", "properties": {"side": {"type": "string", "enum": ["first", "second", "alike"]}}}
    rating = {
        "type": "object",
        "properties": {
            "bias_score": {"type": "integer", "minimum": 1, "maximum": 10},
            "explanation": {"type": "string"},
        },
    }
    seen = set()
    for _ in range(6):
        picked = json.loads(decode(vocab, choice, rng))["choice"]
        assert picked in ("A", "B", "C")
        seen.add(picked)
        assert json.loads(decode(vocab, sides, rng))["side"] in ("first", "second", "alike")
        rated = json.loads(decode(vocab, rating, rng))
        assert 1 <= rated["bias_score"] <= 10 and isinstance(rated["explanation"], str)
    assert len(seen) > 1  # the decoder allows every option, not one
    with pytest.raises(ValueError, match="plain, non-empty strings"):
        schema_pieces({"type": "object", "properties": {"x": {"type": "string", "enum": []}}})
