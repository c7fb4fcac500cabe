"""Feature extraction: the interface, the built-ins, the registry, and stored values.

Models are tiny random BERTs built here at test time (nothing is downloaded).
"""

from __future__ import annotations

import inspect
import math
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

from pytest_llmbias.errors import FeatureError, LLMBiasError, ScorerError, StoreError  # noqa: E402
from pytest_llmbias.scoring.embedding import EmbeddingScorer  # noqa: E402
from pytest_llmbias.scoring.features import (  # noqa: E402
    ClassifierExtractor,
    EmbeddingDistanceExtractor,
    FeatureExtractor,
    FeatureRegistry,
    FeatureStore,
    SentimentExtractor,
    compute_features,
    register_builtin_features,
)
from pytest_llmbias.store.blobs import BlobCache  # noqa: E402

TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "she is not at home, but he is",
    "we have a plan for this",
    "they are from the north",
]
WORDS = (
    "the a of and to in is was for on that with as by it he she they we you this are be at or from his her not but "
    "have an"
).split()
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *LETTERS, *("##" + c for c in LETTERS), *".,!?'"]


# --------------------------------------------------------------------------------------------
# Helpers


class Counting(FeatureExtractor):
    """Word count, recording every extract call."""

    name = "word_count"

    def __init__(self, needs_reference: bool = False) -> None:
        self.calls: list[tuple[list[str], list[str] | None]] = []
        self.needs_reference = needs_reference

    def extract(self, texts: Sequence[str], references: Sequence[str] | None = None) -> list[float]:
        self.calls.append((list(texts), None if references is None else list(references)))
        if references is None:
            return [float(len(t.split())) for t in texts]
        return [float(len(t.split()) - len(r.split())) for t, r in zip(texts, references, strict=True)]


class Returns(FeatureExtractor):
    name = "bad"

    def __init__(self, output) -> None:
        self.output = output

    def extract(self, texts, references=None):
        return self.output


def bert_tokenizer(directory: Path):
    from transformers import BertTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    vocab_file = str(directory / "vocab.txt")
    if "vocab" in inspect.signature(BertTokenizerFast.__init__).parameters:  # transformers >= 5
        return BertTokenizerFast(vocab=vocab_file)
    return BertTokenizerFast(vocab_file=vocab_file)


def bert_config(**kwargs):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        **kwargs,
    )


def build_classifier(directory: Path, labels: Sequence[str], *, seed: int, **config) -> Path:
    """A random tiny BERT sequence classifier with ``labels``, saved with its tokenizer."""
    import torch
    from transformers import BertForSequenceClassification

    shutil.rmtree(directory, ignore_errors=True)
    tokenizer = bert_tokenizer(directory)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(
        bert_config(id2label=dict(enumerate(labels)), label2id={lab: i for i, lab in enumerate(labels)}, **config)
    )
    with torch.no_grad():  # make the head's outputs differ visibly between texts
        model.classifier.weight.mul_(50.0)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_sentence_model(directory: Path, *, seed: int) -> Path:
    """A random tiny BERT sentence-transformers model (mean pooling)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertModel

    hf_dir = directory.parent / f"{directory.name}-hf"
    shutil.rmtree(hf_dir, ignore_errors=True)
    tokenizer = bert_tokenizer(hf_dir)
    torch.manual_seed(seed)
    BertModel(bert_config()).save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    model = SentenceTransformer(
        modules=[Transformer(str(hf_dir), max_seq_length=128), Pooling(32, "mean")], device="cpu"
    )
    shutil.rmtree(directory, ignore_errors=True)
    model.save(str(directory))
    shutil.rmtree(hf_dir)
    return directory


def direct_probabilities(path: Path, texts: Sequence[str]):
    """Softmax of the model's logits, one text at a time (no padding), computed independently."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True).eval()
    rows = []
    with torch.no_grad():
        for text in texts:
            logits = model(**tokenizer(text, return_tensors="pt")).logits[0].double()
            rows.append(torch.softmax(logits, dim=-1).tolist())
    return rows, model.config.id2label


@pytest.fixture
def store(tmp_path: Path) -> FeatureStore:
    feature_store = FeatureStore.for_store(tmp_path / "store")
    yield feature_store
    feature_store.close()


@pytest.fixture(scope="session")
def sentiment_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    return build_classifier(
        tmp_path_factory.mktemp("models") / "sentiment", ["negative", "neutral", "positive"], seed=0
    )


@pytest.fixture(scope="session")
def toxic_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    return build_classifier(tmp_path_factory.mktemp("models") / "toxic", ["clean", "toxic"], seed=1)


@pytest.fixture(scope="session")
def sentence_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    return build_sentence_model(tmp_path_factory.mktemp("models") / "sentence", seed=0)


# --------------------------------------------------------------------------------------------
# Import cost and the interface


def test_import_is_light() -> None:
    code = (
        "import sys, pytest_llmbias.scoring.features; "
        "print([m for m in ('textblob', 'torch', 'transformers', 'sentence_transformers', 'nltk') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_each_submodule_imports_nothing_heavy() -> None:
    modules = ["extractor", "sentiment", "distance", "classifier", "registry", "feature_store"]
    code = (
        "import importlib, sys; "
        f"[importlib.import_module('pytest_llmbias.scoring.features.' + m) for m in {modules!r}]; "
        "print([m for m in ('numpy', 'scipy', 'textblob', 'torch', 'transformers', 'sentence_transformers') "
        "if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_one_module_per_concern() -> None:
    import pytest_llmbias.scoring.features as features

    homes = {
        "FeatureExtractor": "extractor",
        "compute_features": "extractor",
        "SentimentExtractor": "sentiment",
        "EmbeddingDistanceExtractor": "distance",
        "ClassifierExtractor": "classifier",
        "FeatureRegistry": "registry",
        "register_builtin_features": "registry",
        "FeatureStore": "feature_store",
    }
    assert {name: getattr(features, name).__module__ for name in homes} == {
        name: f"pytest_llmbias.scoring.features.{module}" for name, module in homes.items()
    }
    assert set(features.__all__) == {*homes, "FEATURES_FOLDER", "CLASSIFIER_PREFIX"}


def test_feature_error_is_a_scorer_error() -> None:
    assert issubclass(FeatureError, ScorerError) and issubclass(FeatureError, LLMBiasError)


def test_default_identity_and_abstract_extract() -> None:
    assert Counting().identity == "word_count:1"
    with pytest.raises(TypeError):
        FeatureExtractor()  # type: ignore[abstract]
    assert "class WordCount(FeatureExtractor)" in FeatureExtractor.__doc__


# --------------------------------------------------------------------------------------------
# Sentiment


def test_sentiment_signs_and_equality_with_textblob() -> None:
    textblob = pytest.importorskip("textblob")
    extractor = SentimentExtractor()
    texts = [
        "This is a wonderful, excellent and beautiful day. I love it!",
        "This is a terrible, awful and horrible experience. I hate it.",
        "The train leaves at seven from platform four.",
    ]
    positive, negative, neutral = extractor.extract(texts)
    assert positive > 0.3 and negative < -0.3 and neutral == 0.0
    assert [positive, negative, neutral] == [textblob.TextBlob(t).sentiment.polarity for t in texts]
    assert all(isinstance(v, float) for v in (positive, negative, neutral))
    assert extractor.name == "sentiment" and not extractor.needs_reference


def test_sentiment_identity_names_the_textblob_version() -> None:
    import importlib.metadata

    version = importlib.metadata.version("textblob")
    assert SentimentExtractor().identity.endswith(f"textblob=={version}")


def test_sentiment_without_textblob_names_the_pip_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "textblob", None)
    with pytest.raises(FeatureError, match="pip install textblob"):
        SentimentExtractor().extract(["good"])


# --------------------------------------------------------------------------------------------
# compute_features and the store


def test_second_call_extracts_nothing(store: FeatureStore) -> None:
    extractor = Counting()
    first = compute_features(extractor, TEXTS, store=store)
    assert first == [float(len(t.split())) for t in TEXTS]
    assert len(extractor.calls) == 1 and extractor.calls[0][0] == TEXTS
    again = compute_features(extractor, list(reversed(TEXTS)), store=store)
    assert again == first[::-1]
    assert len(extractor.calls) == 1
    assert store.hits == len(TEXTS) and store.written == len(TEXTS)


def test_only_misses_are_extracted_and_duplicates_once(store: FeatureStore) -> None:
    extractor = Counting()
    compute_features(extractor, TEXTS[:2], store=store)
    values = compute_features(extractor, [TEXTS[3], TEXTS[1], TEXTS[3], TEXTS[0], TEXTS[4], TEXTS[3]], store=store)
    assert extractor.calls[1] == ([TEXTS[3], TEXTS[4]], None)
    assert values == [float(len(TEXTS[i].split())) for i in (3, 1, 3, 0, 4, 3)]


def test_duplicates_are_extracted_once_without_a_store() -> None:
    extractor = Counting()
    values = compute_features(extractor, [TEXTS[0], TEXTS[0], TEXTS[1]])
    assert extractor.calls == [([TEXTS[0], TEXTS[1]], None)]
    assert values == [6.0, 6.0, 6.0]
    compute_features(extractor, [TEXTS[0]])  # no store: extracted again
    assert len(extractor.calls) == 2


def test_empty_input_calls_nothing(store: FeatureStore) -> None:
    extractor = Counting()
    assert compute_features(extractor, [], store=store) == []
    assert extractor.calls == []


def test_a_second_store_on_the_same_folder_reads_the_values(tmp_path: Path) -> None:
    first_store = FeatureStore.for_store(tmp_path / "store")
    values = compute_features(Counting(), TEXTS, store=first_store)
    first_store.close()
    assert (tmp_path / "store" / "features").is_dir()
    other = FeatureStore(BlobCache.for_store(tmp_path / "store", "features", label="feature store"))
    extractor = Counting()
    assert compute_features(extractor, TEXTS, store=other) == values
    assert extractor.calls == [] and other.hits == len(TEXTS)
    other.close()


def test_identity_separates_values(store: FeatureStore) -> None:
    compute_features(Counting(), TEXTS, store=store)

    class Bumped(Counting):
        version = "2"

    bumped = Bumped()
    compute_features(bumped, TEXTS, store=store)
    assert len(bumped.calls) == 1


def test_references_are_part_of_the_key_only_when_needed(store: FeatureStore) -> None:
    extractor = Counting(needs_reference=True)
    values = compute_features(extractor, [TEXTS[0], TEXTS[0], TEXTS[0]], ["a b", "a b", "a"], store=store)
    assert values == [4.0, 4.0, 5.0]
    assert extractor.calls == [([TEXTS[0], TEXTS[0]], ["a b", "a"])]
    assert compute_features(extractor, [TEXTS[0]], ["a"], store=store) == [5.0]
    assert len(extractor.calls) == 1

    plain = Counting()
    compute_features(plain, [TEXTS[1]], ["x"], store=store)
    assert compute_features(plain, [TEXTS[1]], ["y"], store=store) == [6.0]
    assert plain.calls == [([TEXTS[1]], None)]  # references ignored, not passed


def test_missing_reference_is_a_feature_error() -> None:
    extractor = Counting(needs_reference=True)
    with pytest.raises(FeatureError, match="`reference` text in the domain file"):
        compute_features(extractor, TEXTS)
    with pytest.raises(FeatureError, match="#1 has none.*`reference`"):
        compute_features(extractor, TEXTS[:2], ["a", None])
    with pytest.raises(ValueError, match="2 texts and 1 references"):
        compute_features(extractor, TEXTS[:2], ["a"])
    assert extractor.calls == []


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ([1.0, 2.0], r"2 values for 3 texts"),
        ([1.0, math.nan, 2.0], r"nan for text #1"),
        ([1.0, 2.0, math.inf], r"inf for text #2"),
        ([1.0, "2.0", 3.0], r"'2.0' \(str\) for text #1"),
        ([1.0, None, 3.0], r"None \(NoneType\) for text #1"),
        ([True, 1.0, 1.0], r"True \(bool\) for text #0"),
        ("123", r"str, not a sequence"),
        (None, r"NoneType, not a sequence"),
    ],
    ids=["wrong-length", "nan", "inf", "string", "none", "bool", "a-string", "no-output"],
)
def test_bad_extractor_output_is_a_feature_error_and_stores_nothing(store: FeatureStore, output, message) -> None:
    texts = TEXTS[:3]
    with pytest.raises(FeatureError, match=r"'bad' \(Returns\) returned " + message):
        compute_features(Returns(output), texts, store=store)
    assert store.written == 0
    assert store.get_many(Returns(output).identity, [(t, None) for t in texts]) == {}


def test_numpy_output_is_accepted(store: FeatureStore) -> None:
    import numpy as np

    values = compute_features(Returns(np.array([0.5, -1.0, 2.0], dtype=np.float32)), TEXTS[:3], store=store)
    assert values == [0.5, -1.0, 2.0] and all(type(v) is float for v in values)


def test_a_failing_extractor_is_a_feature_error() -> None:
    class Broken(Counting):
        def extract(self, texts, references=None):
            raise RuntimeError("boom")

    with pytest.raises(FeatureError, match=r"'word_count' \(Broken\) failed.*RuntimeError: boom"):
        compute_features(Broken(), TEXTS)


@pytest.mark.parametrize(
    "bad",
    [b"abc", struct.pack("<d", math.nan), struct.pack("<d", 1.0) + b"x", "a string"],
    ids=["short", "nan", "long", "not-bytes"],
)
def test_malformed_stored_value_is_a_store_error(store: FeatureStore, bad) -> None:
    extractor = Counting()
    store.cache._open().set(FeatureStore.key(extractor.identity, TEXTS[1]), bad)
    with pytest.raises(StoreError, match="feature store.*rm -rf"):
        compute_features(extractor, [TEXTS[1], TEXTS[2]], store=store)
    assert extractor.calls == []


def test_corrupted_store_database_is_a_store_error(tmp_path: Path) -> None:
    folder = tmp_path / "store" / "features"
    folder.mkdir(parents=True)
    (folder / "cache.db").write_bytes(b"this is not an sqlite database" * 100)
    with pytest.raises(StoreError, match="rm -rf"):
        compute_features(Counting(), TEXTS, store=FeatureStore.for_store(tmp_path / "store"))


def test_stored_format_is_an_8_byte_double(store: FeatureStore) -> None:
    extractor = Counting()
    compute_features(extractor, [TEXTS[0]], store=store)
    blob = store.cache.get(FeatureStore.key(extractor.identity, TEXTS[0]))
    assert blob is not None and struct.unpack("d", blob) == (6.0,)


# --------------------------------------------------------------------------------------------
# The registry


def test_registry_register_get_and_replace() -> None:
    registry = FeatureRegistry()
    made = []

    def factory() -> Counting:
        made.append(1)
        return Counting()

    registry.register("words", factory)
    assert made == []  # lazy
    assert "words" in registry and "nope" not in registry
    extractor = registry.get("words")
    assert made == [1] and extractor.name == "words"
    assert registry.get("words") is extractor and made == [1]  # cached
    with pytest.raises(FeatureError, match="'words' is already registered"):
        registry.register("words", Counting)
    registry.register("words", Counting, replace=True)
    assert registry.get("words") is not extractor

    instance = Counting()
    registry.register("count", instance)
    renamed = registry.get("count")
    assert renamed.name == "count" and instance.name == "word_count"  # the original is not renamed
    assert registry.names() == ("count", "words")


def test_registry_unknown_name_lists_names_and_the_classifier_form() -> None:
    registry = FeatureRegistry()
    registry.register("words", Counting)
    registry.register("sentiment", SentimentExtractor)
    with pytest.raises(
        FeatureError, match=r"unknown feature 'tone'.*'sentiment', 'words'.*classifier:<hub name or local path>"
    ):
        registry.get("tone")
    with pytest.raises(FeatureError, match="names no model"):
        registry.get("classifier:")


def test_registry_rejects_bad_factories() -> None:
    registry = FeatureRegistry()
    with pytest.raises(TypeError):
        registry.register("x", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        registry.register(" x", Counting)
    registry.register("y", lambda: "not an extractor")
    with pytest.raises(FeatureError, match="returned str, not a FeatureExtractor"):
        registry.get("y")


def test_builtin_features_are_lazy(sentence_model: Path) -> None:
    registry = FeatureRegistry()
    made = []

    def scorer_factory() -> EmbeddingScorer:
        made.append(1)
        return EmbeddingScorer(str(sentence_model), device="cpu")

    register_builtin_features(registry, embedding_scorer_factory=scorer_factory)
    assert registry.names() == ("embedding_distance", "sentiment")
    assert made == []
    sentiment = registry.get("sentiment")
    assert isinstance(sentiment, SentimentExtractor) and made == []
    distance = registry.get("embedding_distance")
    assert isinstance(distance, EmbeddingDistanceExtractor) and made == [1]
    assert distance.name == "embedding_distance" and distance.needs_reference
    assert distance.scorer._model is None  # the scorer loads nothing until it encodes

    without = FeatureRegistry()
    register_builtin_features(without, embedding_scorer_factory=None)
    assert without.names() == ("sentiment",)


def test_registry_resolves_classifier_names(sentiment_model: Path) -> None:
    registry = FeatureRegistry()
    name = f"classifier:{sentiment_model}"
    assert name in registry and name not in registry.names()
    extractor = registry.get(name)
    assert isinstance(extractor, ClassifierExtractor)
    assert extractor.name == name and extractor.weights == {"positive": 1.0, "negative": -1.0}
    assert registry.get(name) is extractor
    with pytest.raises(FeatureError, match="does not exist"):
        registry.get(f"classifier:{sentiment_model.parent / 'missing' / 'model'}")


# --------------------------------------------------------------------------------------------
# Embedding distance


def test_embedding_distance(sentence_model: Path, tmp_path: Path) -> None:
    cache = BlobCache.for_store(tmp_path / "store")
    scorer = EmbeddingScorer(str(sentence_model), cache=cache, device="cpu")
    extractor = EmbeddingDistanceExtractor(scorer)
    assert extractor.identity.endswith(scorer.identity)
    texts = [TEXTS[0], TEXTS[0], TEXTS[1], TEXTS[2]]
    references = [TEXTS[0], TEXTS[1], TEXTS[0], TEXTS[3]]
    values = extractor.extract(texts, references)
    assert values[0] == 0.0
    assert all(0.0 <= v <= 2.0 for v in values)
    assert values[1] > 0.0 and values[1] == pytest.approx(values[2], abs=1e-6)  # symmetric
    assert scorer.encoded == 4  # distinct texts and references, embedded once, through the scorer

    import numpy as np

    vectors = EmbeddingScorer(str(sentence_model)).embed([TEXTS[2], TEXTS[3]]).astype(np.float64)
    assert values[3] == pytest.approx(1.0 - float(vectors[0] @ vectors[1]), abs=1e-6)

    feature_store = FeatureStore.for_store(tmp_path / "store")
    assert compute_features(extractor, texts, references, store=feature_store) == pytest.approx(values, abs=1e-12)
    with pytest.raises(FeatureError, match="`reference`"):
        compute_features(extractor, texts, store=feature_store)
    feature_store.close()
    cache.close()


# --------------------------------------------------------------------------------------------
# Classifiers


def test_classifier_auto_weights_are_p_positive_minus_p_negative(sentiment_model: Path) -> None:
    extractor = ClassifierExtractor(str(sentiment_model), batch_size=2)
    assert extractor.name == f"classifier:{sentiment_model}"
    assert extractor.labels == ("negative", "neutral", "positive")
    assert extractor.weights == {"positive": 1.0, "negative": -1.0}
    values = extractor.extract(TEXTS)
    assert len(values) == len(TEXTS) and all(isinstance(v, float) and math.isfinite(v) for v in values)
    assert extractor.extract(TEXTS) == values  # deterministic
    assert ClassifierExtractor(str(sentiment_model), batch_size=32).extract(TEXTS) == pytest.approx(values, abs=1e-6)
    probabilities, id2label = direct_probabilities(sentiment_model, TEXTS)
    assert id2label == {0: "negative", 1: "neutral", 2: "positive"}
    expected = [row[2] - row[0] for row in probabilities]
    assert values == pytest.approx(expected, abs=1e-5)
    assert len({round(v, 6) for v in values}) > 1  # the texts are told apart


def test_classifier_single_label_and_weights(toxic_model: Path) -> None:
    toxic = ClassifierExtractor(str(toxic_model), name="toxicity", label="toxic")
    assert toxic.name == "toxicity" and toxic.weights == {"toxic": 1.0}
    values = toxic.extract(TEXTS)
    probabilities, _ = direct_probabilities(toxic_model, TEXTS)
    assert values == pytest.approx([row[1] for row in probabilities], abs=1e-5)
    assert all(0.0 <= v <= 1.0 for v in values)
    # longer than the model's 128 positions: truncated to max_position_embeddings by default
    (long_value,) = toxic.extract([" ".join(["the cat"] * 200)])
    assert 0.0 <= long_value <= 1.0
    # case-insensitive match; weights= gives any combination
    assert ClassifierExtractor(str(toxic_model), label="TOXIC").weights == {"toxic": 1.0}
    signed = ClassifierExtractor(str(toxic_model), weights={"toxic": 2.0, "clean": -1.0}).extract(TEXTS)
    assert signed == pytest.approx([2 * row[1] - row[0] for row in probabilities], abs=1e-5)
    with pytest.raises(ValueError, match="not both"):
        ClassifierExtractor(str(toxic_model), label="toxic", weights={"toxic": 1.0})


def test_classifier_multi_label_uses_sigmoid(tmp_path: Path) -> None:
    import torch

    path = build_classifier(tmp_path / "multi", ["insult", "threat"], seed=3, problem_type="multi_label_classification")
    values = ClassifierExtractor(str(path), label="threat").extract(TEXTS[:2])
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    with torch.no_grad():
        expected = [
            torch.sigmoid(model(**tokenizer(t, return_tensors="pt")).logits[0].double())[1].item() for t in TEXTS[:2]
        ]
    assert values == pytest.approx(expected, abs=1e-5)


def test_classifier_label_errors_list_the_labels(toxic_model: Path) -> None:
    with pytest.raises(FeatureError, match=r"no label 'hateful'; its labels are 'clean', 'toxic'"):
        ClassifierExtractor(str(toxic_model), label="hateful")
    with pytest.raises(FeatureError, match=r"no label 'x'.*'clean', 'toxic'"):
        ClassifierExtractor(str(toxic_model), weights={"toxic": 1.0, "x": 1.0})
    with pytest.raises(FeatureError, match=r"no default feature: its labels are 'clean', 'toxic'.*label=.*weights="):
        ClassifierExtractor(str(toxic_model))
    with pytest.raises(FeatureError, match=r"no default feature"):
        FeatureRegistry().get(f"classifier:{toxic_model}")


def test_classifier_missing_path_and_not_a_classifier(tmp_path: Path, sentence_model: Path) -> None:
    with pytest.raises(FeatureError, match="does not exist"):
        ClassifierExtractor(str(tmp_path / "no" / "such" / "model"), label="toxic")
    (tmp_path / "file").write_text("x")
    with pytest.raises(FeatureError, match="is a file"):
        ClassifierExtractor(str(tmp_path / "file"), label="toxic")
    # a base BERT (no classification head): its head would be random
    base = ClassifierExtractor(str(sentence_model), label="LABEL_1")
    with pytest.raises(FeatureError, match="not a trained text-classification model"):
        base.extract(["hello"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FeatureError, match=f"model at {empty} could not be loaded"):
        ClassifierExtractor(str(empty), label="toxic").extract(["hello"])


def test_classifier_hub_name_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    extractor = ClassifierExtractor("pytest-llmbias-test/no-such-classifier", label="toxic")
    assert extractor.kind == "hub"
    assert "pytest-llmbias-test/no-such-classifier" in extractor.identity  # no loading needed
    with pytest.raises(
        FeatureError, match=r"(?s)'pytest-llmbias-test/no-such-classifier' could not be loaded.*offline"
    ):
        extractor.extract(["hello"])


def test_classifier_identity(toxic_model: Path, tmp_path: Path) -> None:
    base = ClassifierExtractor(str(toxic_model), label="toxic")
    assert base.identity.startswith("classifier:1:local@sha256:")
    assert ClassifierExtractor(str(toxic_model), weights={"toxic": 1}).identity == base.identity
    assert ClassifierExtractor(str(toxic_model), label="toxic", name="other", batch_size=3).identity == base.identity
    assert ClassifierExtractor(str(toxic_model), weights={"toxic": 2.0}).identity != base.identity
    assert ClassifierExtractor(str(toxic_model), label="clean").identity != base.identity
    assert ClassifierExtractor(str(toxic_model), label="toxic", max_length=16).identity != base.identity
    # the same model at another path shares the identity; another model at the same path does not
    copy = shutil.copytree(toxic_model, tmp_path / "copy")
    assert ClassifierExtractor(str(copy), label="toxic").identity == base.identity
    before = ClassifierExtractor(str(copy), label="toxic")
    old_values = before.extract(TEXTS[:3])
    build_classifier(copy, ["clean", "toxic"], seed=7)
    after = ClassifierExtractor(str(copy), label="toxic")
    assert after.identity != base.identity
    assert after.extract(TEXTS[:3]) != pytest.approx(old_values, abs=1e-6)  # not served the old model


def test_classifier_values_are_stored(toxic_model: Path, store: FeatureStore, monkeypatch: pytest.MonkeyPatch) -> None:
    extractor = ClassifierExtractor(str(toxic_model), label="toxic", max_length=8)
    long_text = " ".join(["the cat"] * 100)  # longer than max_length and the 128 positions
    values = compute_features(extractor, [*TEXTS, long_text], store=store)
    assert all(math.isfinite(v) for v in values)
    fresh = ClassifierExtractor(str(toxic_model), label="toxic", max_length=8)
    monkeypatch.setattr(fresh, "extract", lambda *a, **k: pytest.fail("extracted again"))
    assert compute_features(fresh, [*TEXTS, long_text], store=store) == values


def test_classifier_corrupted_store_entry(toxic_model: Path, store: FeatureStore) -> None:
    extractor = ClassifierExtractor(str(toxic_model), label="toxic")
    compute_features(extractor, TEXTS[:2], store=store)
    store.cache.set(FeatureStore.key(extractor.identity, TEXTS[0]), b"\x00" * 3)
    with pytest.raises(StoreError, match="malformed value.*rm -rf"):
        compute_features(extractor, TEXTS[:2], store=store)
