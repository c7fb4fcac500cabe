"""How much of a damaged store a run still serves, and whether it ever serves a changed answer.

    HF_HUB_OFFLINE=1 python benchmarks/store_damage.py [--answers 400] [--runs 20] [--json out.json]

For each kind of damage, ``--runs`` times: a fresh disk store of ``--answers`` answers is written
and closed (its write-ahead log folded into ``cache.db``), the file is damaged (truncated at a
random length; its first 100 bytes replaced; all of it random bytes; 1, 16 or 1,024 bytes at random
places changed to other values), and a new ResponseStore reads every answer back the way a run
does (``fetch_many`` with the calls), which heals what it finds (see docs/store.md). Reported per
kind: the answers kept (median, min, max), the answers served with a text other than the one
stored (changed bytes that still read as text and JSON: no checksum can tell them), and the runs
that raised (target 0).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.store import ResponseStore
from pytest_llmbias.store.calls import ModelCall, Response

GEN = GenerationSettings(temperature=0.5, max_tokens=100, samples=1, seed=0)
SPEC = ModelSpec(model="openai/m", alias="m")


def changed(data: bytes, count: int, seed: int) -> bytes:
    """``data`` with ``count`` bytes at random places each changed to another value."""
    out = bytearray(data)
    rng = random.Random(seed)
    for spot in rng.sample(range(len(data)), count):
        out[spot] ^= rng.randrange(1, 256)
    return bytes(out)


KINDS: dict[str, Callable[[bytes, int], bytes]] = {
    "truncated at a random length": lambda b, s: b[: random.Random(s).randrange(len(b))],
    "first 100 bytes replaced": lambda b, s: random.Random(s).randbytes(100) + b[100:],
    "random bytes": lambda b, s: random.Random(s).randbytes(len(b)),
    "1 byte changed": lambda b, s: changed(b, 1, s),
    "16 bytes changed": lambda b, s: changed(b, 16, s),
    "1,024 bytes changed": lambda b, s: changed(b, 1024, s),
}


def written(directory: Path, answers: list[Response]) -> Path:
    store = ResponseStore(directory)
    for r in answers:
        store.put(r)
    store.close()
    db = directory / "responses" / "cache.db"
    con = sqlite3.connect(str(db))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for extra in db.parent.glob("cache.db-*"):
        extra.unlink()
    return db


def measure(n: int, runs: int) -> dict[str, dict[str, float]]:
    answers = [
        Response(call=ModelCall.build(SPEC, f"Question {i}?", GEN), text=f"answer {i} " + "words " * 30)
        for i in range(n)
    ]
    by_key = {r.key: r for r in answers}
    out = {}
    for name, damage in KINDS.items():
        kept, wrong, errors = [], 0, 0
        for seed in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                db = written(Path(tmp), answers)
                db.write_bytes(damage(db.read_bytes(), seed))
                try:
                    store = ResponseStore(Path(tmp))
                    got = store.fetch_many(list(by_key), {k: r.call for k, r in by_key.items()})
                    _ = store.notices
                    store.close()
                except Exception as exc:  # counted: the target is none
                    errors += 1
                    print(f"  {name}, seed {seed}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
            wrong += sum(got[k].text != by_key[k].text for k in got)
            kept.append(len(got))
        out[name] = {
            "kept_median": statistics.median(kept) if kept else 0,
            "kept_min": min(kept, default=0),
            "kept_max": max(kept, default=0),
            "looked_up": n * runs,
            "served_changed": wrong,
            "errors": errors,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=400)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    figures = measure(args.answers, args.runs)
    for name, f in figures.items():
        print(
            f"{name}: kept {f['kept_median']:g} of {args.answers} (min {f['kept_min']}, max {f['kept_max']}); "
            f"served changed {f['served_changed']} of {f['looked_up']}; errors {f['errors']}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 1 if any(f["errors"] for f in figures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
