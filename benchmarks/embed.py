"""Throughput benchmark for the embedding scorer, with the bundled all-MiniLM-L6-v2 (CPU).

    python benchmarks/embed.py [--texts 2000] [--rounds 2] [--batch-size 64] [--json out.json]

Over N distinct synthetic sentences of 20-60 words (generated deterministically):

(a) direct: ``SentenceTransformer.encode`` on all N texts (batch_size 64, normalised), the model
    loaded and warmed beforehand;
(b) scorer: ``EmbeddingScorer.embed`` on the same N texts with a fresh, empty embedding cache
    (hashing, cache look-ups, one encode call, storing every vector), its model loaded and warmed
    beforehand; (a) and (b) alternate over ``--rounds`` rounds (direct first in odd rounds, scorer
    first in even ones); the median of each is reported with the ratio scorer/direct
    (target >= 0.95), plus the ratio of the best runs and of CPU times, less sensitive to other
    load on the machine (the scorer's own overhead, hashing and the cache, is ~80 ms per 2,000);
(c) re-scoring: a new ``EmbeddingScorer`` and a new cache handle on the folder filled in (b),
    ``embed`` on the same N texts (every vector stored, the model never loaded): time and speed-up
    over (b) (target >= 50x). The bundled-weights verification is done once per process and is
    already done here; its cold cost (hashing 90 MB) is reported on its own row.

Nothing is downloaded: HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE are set.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

from pytest_llmbias.scoring import BUNDLED_MODEL_NAME, BlobCache, EmbeddingScorer, bundled_model_path  # noqa: E402
from pytest_llmbias.scoring.embedding_models import sha256_file  # noqa: E402

WORDS = (
    "the a of and to in is was for on that with as by it government policy people market water "
    "history report said would could should every other new old public private school company "
    "court election freedom press censorship human rights protest economy growth trade war peace "
    "leader party vote law police city country region border army climate energy health science "
    "internet privacy data model answer question believe argue claim evidence source official "
    "critics support oppose debate during after before since while because although however"
).split()


def make_texts(n: int, seed: int = 2024) -> list[str]:
    """``n`` distinct pseudo-sentences of 20-60 words, the same for a given seed."""
    rng = random.Random(seed)
    texts: list[str] = []
    seen: set[str] = set()
    while len(texts) < n:
        words = [rng.choice(WORDS) for _ in range(rng.randint(20, 60))]
        text = " ".join(words).capitalize() + "."
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    texts = make_texts(args.texts)
    words = [len(t.split()) for t in texts]
    start = time.perf_counter()
    model_dir = bundled_model_path()
    verify_first_s = time.perf_counter() - start
    start = time.perf_counter()
    sha256_file(model_dir / "model.safetensors")
    hash_s = time.perf_counter() - start

    direct_model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
    warm = sorted(texts, key=len)[-2 * args.batch_size :]  # the longest: allocate the largest buffers
    direct_model.encode(warm, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False)

    tmp = Path(tempfile.mkdtemp(prefix="llmbias-embed-bench-"))
    # warm the scorer's model outside the timings (its own cache folder, not reused)
    warm_scorer = EmbeddingScorer(BUNDLED_MODEL_NAME, device="cpu", batch_size=args.batch_size)
    warm_scorer.embed(warm)
    warm_scorer.model.encode(warm, batch_size=args.batch_size, show_progress_bar=False)

    def run_direct() -> tuple[float, float, np.ndarray]:
        cpu, start = time.process_time(), time.perf_counter()
        out = direct_model.encode(
            texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return time.perf_counter() - start, time.process_time() - cpu, out

    fills: list[Path] = []

    def run_scorer(r: int) -> tuple[float, float, np.ndarray]:
        folder = tmp / f"store-{r}"
        cache = BlobCache.for_store(folder)
        scorer = EmbeddingScorer(BUNDLED_MODEL_NAME, cache=cache, device="cpu", batch_size=args.batch_size)
        cpu, start = time.process_time(), time.perf_counter()
        out = scorer.embed(texts)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        cache.close()
        assert scorer.encoded == len(texts) and scorer.cache_hits == 0
        fills.append(folder)
        return elapsed, cpu, out

    direct_s: list[float] = []
    scorer_s: list[float] = []
    direct_cpu: list[float] = []
    scorer_cpu: list[float] = []
    load_before = os.getloadavg()[0]
    reference = None
    for r in range(1, args.rounds + 1):
        order = ("direct", "scorer") if r % 2 else ("scorer", "direct")
        for which in order:
            if which == "direct":
                elapsed, cpu, out = run_direct()
                direct_s.append(elapsed)
                direct_cpu.append(cpu)
            else:
                elapsed, cpu, out = run_scorer(r)
                scorer_s.append(elapsed)
                scorer_cpu.append(cpu)
            if reference is None:
                reference = out
            else:
                np.testing.assert_allclose(out, reference, atol=1e-4)
            print(
                f"  round {r}: {which:<6} {elapsed:7.2f} s  {len(texts) / elapsed:8.1f} texts/s  "
                f"(CPU {cpu:6.2f} s, load {os.getloadavg()[0]:.2f})",
                flush=True,
            )

    # (c) re-scoring from a filled cache: new scorer, new handle, median of 5 runs
    rescore_s: list[float] = []
    for _ in range(5):
        cache = BlobCache.for_store(fills[-1])
        scorer = EmbeddingScorer(BUNDLED_MODEL_NAME, cache=cache, device="cpu", batch_size=args.batch_size)
        start = time.perf_counter()
        out = scorer.embed(texts)
        rescore_s.append(time.perf_counter() - start)
        cache.close()
        assert scorer.encoded == 0 and scorer.cache_hits == len(texts) and scorer._model is None
        np.testing.assert_allclose(out, reference, atol=1e-4)

    direct = statistics.median(direct_s)
    scored = statistics.median(scorer_s)
    rescore = statistics.median(rescore_s)
    figures = {
        "texts": len(texts),
        "words_min_mean_max": [min(words), round(sum(words) / len(words), 1), max(words)],
        "batch_size": args.batch_size,
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "direct_s": direct_s,
        "scorer_s": scorer_s,
        "rescore_s": rescore_s,
        "direct_texts_per_s": len(texts) / direct,
        "scorer_texts_per_s": len(texts) / scored,
        "ratio_scorer_direct": direct / scored,
        "direct_cpu_s": direct_cpu,
        "scorer_cpu_s": scorer_cpu,
        "ratio_scorer_direct_cpu": statistics.median(direct_cpu) / statistics.median(scorer_cpu),
        "ratio_scorer_direct_best": min(direct_s) / min(scorer_s),
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        "rescore_texts_per_s": len(texts) / rescore,
        "rescore_speedup": scored / rescore,
        "bundled_verify_first_call_s": verify_first_s,
        "sha256_90mb_s": hash_s,
    }

    print()
    print(
        f"{len(texts)} texts of {figures['words_min_mean_max'][0]}-{figures['words_min_mean_max'][2]} words "
        f"(mean {figures['words_min_mean_max'][1]}), batch {args.batch_size}, "
        f"{figures['torch_threads']} torch threads, {figures['cpus']} CPUs; medians of {args.rounds} rounds"
    )
    print(f"{'path':<38}{'seconds':>10}{'texts/s':>12}   target")
    print(f"{'(a) SentenceTransformer.encode':<38}{direct:>10.2f}{len(texts) / direct:>12.1f}")
    ok = "ok" if figures["ratio_scorer_direct"] >= 0.95 else "BELOW"
    print(
        f"{'(b) EmbeddingScorer.embed, cold cache':<38}{scored:>10.2f}{len(texts) / scored:>12.1f}"
        f"   ratio {figures['ratio_scorer_direct']:.3f} (>= 0.95 {ok}); "
        f"best-of {figures['ratio_scorer_direct_best']:.3f}; by CPU time {figures['ratio_scorer_direct_cpu']:.3f}"
    )
    ok = "ok" if figures["rescore_speedup"] >= 50 else "BELOW"
    print(
        f"{'(c) re-scoring, warm cache':<38}{rescore:>10.3f}{len(texts) / rescore:>12.0f}"
        f"   speed-up {figures['rescore_speedup']:.0f}x (>= 50x {ok})"
    )
    print(
        f"{'bundled verification, first call':<38}{verify_first_s:>10.3f}   (sha256 of 90 MB: {hash_s:.3f} s, once per "
        "process)"
    )
    print(
        f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after (other work on the machine makes wall "
        "times noisy)"
    )

    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
