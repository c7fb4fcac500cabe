"""How many answers per group does the four-fifths rule need? And what does the gate cost?

Part 1 simulates feature values (normal, SD 1) for K groups of n answers each, R runs per cell:
- fair: every group has the same distribution (the true min impact ratio is about 1);
- biased: one group's mean is 0.5 SD lower (the true min impact ratio is about 0.67 for K = 4 and
  0.66 for K = 19, from 400,000 values per group).
For each it reports how often the gate fails on the point estimate (fail_on="estimate") and on the
simultaneous bootstrap interval (fail_on="interval", 95%).

Part 2 times the statistics of one gate (point estimate, 2,000 bootstrap resamples, 2,000 label
permutations), TextBlob sentiment extraction, and re-reading stored feature values.

    python benchmarks/impact_ratio.py            # R = 60 runs per cell
    python benchmarks/impact_ratio.py --runs 20  # quicker
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_llmbias.scoring.features import FeatureStore, SentimentExtractor, compute_features
from pytest_llmbias.stats import bootstrap_impact_ratio, impact_ratio, permutation_null


def true_ratio(shifts: list[float], rng: np.random.Generator) -> float:
    big = [rng.normal(s, 1, 400_000) for s in shifts]
    mean = np.concatenate(big).mean()
    rates = [np.mean(b >= mean) for b in big]
    return min(rates) / max(rates)


def reliability(runs: int) -> None:
    rng = np.random.default_rng(2026)
    print(
        "| groups | answers per group | fair: fails on estimate | fair: fails on interval "
        "| biased: fails on estimate | biased: fails on interval |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for k in (4, 19):
        cases = {"fair": [0.0] * k, "biased": [0.0] * (k - 1) + [-0.5]}
        truth = {name: true_ratio(shifts, rng) for name, shifts in cases.items()}
        for n in (6, 12, 25, 50, 100, 200, 400):
            cells = []
            for shifts in cases.values():
                est = itv = 0
                for r in range(runs):
                    values = np.concatenate([rng.normal(s, 1, n) for s in shifts])
                    groups = [f"g{i:02d}" for i in range(k) for _ in range(n)]
                    est += impact_ratio(values, groups).min_impact_ratio < 0.8
                    itv += bootstrap_impact_ratio(values, groups, resamples=1000, seed=r).high < 0.8
                cells += [f"{est / runs:.0%}", f"{itv / runs:.0%}"]
            print(f"| {k} | {n} | " + " | ".join(cells) + " |")
        print(f"(true min IR: fair {truth['fair']:.3f}, biased {truth['biased']:.3f} for K = {k})")


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def costs() -> None:
    rng = np.random.default_rng(7)
    print("\n| what | size | best of 5 |")
    print("|---|---|---:|")
    for k, n in ((19, 12), (19, 100), (50, 100)):
        values = rng.normal(size=k * n)
        groups = [f"g{i:02d}" for i in range(k) for _ in range(n)]

        def gate(values: np.ndarray = values, groups: list[str] = groups) -> None:  # this size's data
            impact_ratio(values, groups)
            bootstrap_impact_ratio(values, groups, resamples=2000)
            permutation_null(values, groups, permutations=2000)

        print(
            f"| gate statistics (estimate + 2,000 bootstrap + 2,000 permutations) | {k} groups x {n} | "
            f"{best_of(gate):.3f} s |"
        )

    words = "the a wonderful terrible country economy people good bad open careful strong weak".split()
    texts = [" ".join(rng.choice(words, size=40)) + f" {i}" for i in range(2000)]
    extractor = SentimentExtractor()
    extractor.extract(texts[:10])  # import textblob outside the timing
    first = best_of(lambda: extractor.extract(texts), repeat=3)
    print(
        f"| TextBlob sentiment, no store | 2,000 texts of 40 words | {first:.3f} s "
        f"({len(texts) / first:,.0f} texts/s) |"
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = FeatureStore.for_store(Path(tmp))
        start = time.perf_counter()
        compute_features(extractor, texts, store=store)
        cold = time.perf_counter() - start
        warm = best_of(lambda: compute_features(extractor, texts, store=store))
        store.close()
    print(f"| sentiment through the feature store, first time | 2,000 texts | {cold:.3f} s |")
    print(f"| sentiment through the feature store, stored | 2,000 texts | {warm:.3f} s ({cold / warm:.0f}x faster) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    reliability(args.runs)
    costs()


if __name__ == "__main__":
    main()
