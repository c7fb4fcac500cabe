"""``llmbias store stats|verify|export|import|clear``: the project's response store (``store.dir``
of its settings, or ``--store``) and its snapshots (``store.snapshots``, or ``--snapshot``).

``stats`` and ``verify`` read the store and the snapshots; either may be missing, not both.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from pytest_llmbias.cli_project import Project, epilog

OK, PROBLEMS, USAGE = 0, 1, 2


def add_commands(commands: Any) -> None:
    store = commands.add_parser("store", help="inspect, verify, export or clear the response store").add_subparsers(
        title="store")
    for name, run, help_ in (("stats", _stats, "entries per model and size on disk, of the store and its snapshots"),
                             ("verify", _verify, "re-hash every entry and snapshot line; list what is wrong"),
                             ("export", _export, "write every stored response to a JSONL snapshot"),
                             ("import", _import, "write the responses of snapshots into the store"),
                             ("clear", _clear, "delete the store folder")):
        p = store.add_parser(name, help=help_, description=help_, epilog=epilog(f"store {name}"),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--store", type=Path, default=None,
                       help="the store folder (default: store.dir of the project's llmbias.yaml, else .llmbias)")
        if name in ("stats", "verify"):
            p.add_argument("--snapshot", action="append", default=[], type=Path,
                           help="a snapshot to read too (repeat; default: the project's store.snapshots)")
        if name == "export":
            p.add_argument("out", type=Path)
        if name == "import":
            p.add_argument("snapshots", nargs="+", type=Path)
        if name == "clear":
            p.add_argument("--yes", action="store_true", help="really delete it")
        p.set_defaults(run=run)


def _store(args: argparse.Namespace) -> Path:
    return args.store if args.store is not None else Project.find().store


def _store_and_snapshots(args: argparse.Namespace) -> tuple[Path, list[Path]]:
    """The store folder and the snapshots to read, the project's where not given (read once)."""
    project = None if args.store is not None and args.snapshot else Project.find()
    store = args.store if args.store is not None else project.store  # type: ignore[union-attr]
    return store, list(args.snapshot) or list(project.snapshots)  # type: ignore[union-attr]


def _has_store(directory: Path) -> bool:
    return (directory / "responses" / "cache.db").is_file()


def _entries(directory: Path) -> Iterator[tuple[str, Any]]:
    """(key, record) of every response entry of the store, read straight from diskcache."""
    import json

    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.store.disk import open_cache

    db = directory / "responses" / "cache.db"
    if not db.is_file():
        raise StoreError(f"no response store at {directory} (no {db})")
    cache = open_cache(directory / "responses", timeout=60.0)
    try:
        for key in list(cache.iterkeys()):
            if str(key).startswith("response:"):
                raw = cache.get(key)
                try:
                    record = json.loads(raw)
                except (TypeError, ValueError):
                    record = None
                yield str(key)[len("response:"):], record
    finally:
        cache.close()


def _nothing(store: Path) -> Exception:
    from pytest_llmbias.errors import StoreError

    return StoreError(f"no response store at {store} and no snapshot: give --store DIR or --snapshot FILE, or run in "
                      "a project whose llmbias.yaml names them")


def _stats(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.store.snapshot import SnapshotLayer

    store, snapshots = _store_and_snapshots(args)
    if not _has_store(store) and not snapshots:
        raise _nothing(store)
    if _has_store(store):
        by_model: Counter[str] = Counter()
        tokens = 0
        for _, record in _entries(store):
            if isinstance(record, dict):
                by_model[str(record.get("model"))] += 1
                usage = record.get("usage") or {}
                tokens += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
        print(f"{sum(by_model.values())} responses, {tokens:,} tokens, {size / 1e6:.1f} MB in {store}", file=out)
        for model, n in by_model.most_common():
            print(f"  {model}: {n}", file=out)
    else:
        print(f"no response store at {store}", file=out)
    for snapshot in snapshots:
        responses = SnapshotLayer().add(snapshot).responses
        models = Counter(r.call.model for r in responses.values())
        print(f"{len(responses)} responses, {snapshot.stat().st_size / 1e6:.1f} MB in snapshot {snapshot}", file=out)
        for model, n in models.most_common():
            print(f"  {model}: {n}", file=out)
    return OK


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.calls import Response
    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.store.snapshot import SnapshotLayer

    store, snapshots = _store_and_snapshots(args)
    if not _has_store(store) and not snapshots:
        raise _nothing(store)
    problems = checked = 0
    if _has_store(store):
        for key, record in _entries(store):
            checked += 1
            try:
                if not isinstance(record, dict):
                    raise ValueError("not a JSON response record")
                response = Response.from_dict(record, source="store")
                if response.key != key or record.get("key") != key:
                    raise ValueError("its request fields hash to another key")
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                problems += 1
                print(f"bad entry {key}: {exc}", file=out)
    else:
        print(f"no response store at {store}: the snapshots only", file=out)
    for snapshot in snapshots:
        try:
            checked += len(SnapshotLayer().add(snapshot).responses)
        except StoreError as exc:
            problems += 1
            print(f"bad snapshot: {exc}", file=out)
    print(f"{checked} checked, {problems} problem(s)", file=out)
    return PROBLEMS if problems else OK


def _export(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.calls import Response
    from pytest_llmbias.store.snapshot import write_snapshot

    responses = [Response.from_dict(r, source="store") for _, r in _entries(_store(args)) if isinstance(r, dict)]
    n = write_snapshot(args.out, responses)
    print(f"{n} responses written to {args.out}", file=out)
    return OK


def _import(args: argparse.Namespace, out: TextIO) -> int:
    """Every response of the snapshots (checked line by line, as a run reads them) into the store;
    a call the store already answers differently is reported and left as it is."""
    from pytest_llmbias.store import ResponseStore
    from pytest_llmbias.store.snapshot import SnapshotLayer

    layer = SnapshotLayer()
    for snapshot in args.snapshots:
        layer.add(snapshot)
    directory = _store(args)
    store = ResponseStore(directory)
    added = same = conflicts = 0
    try:
        for key, response in layer.responses.items():
            known = store.get(key)
            if known is None:
                store.put(response)
                added += 1
            elif known.text == response.text:
                same += 1
            else:
                conflicts += 1
                print(f"conflict {key}: the store answers this call differently; kept the store's", file=out)
    finally:
        store.close()
    print(f"{added} imported, {same} already stored, {conflicts} conflict(s) into {directory}", file=out)
    return PROBLEMS if conflicts else OK


def _clear(args: argparse.Namespace, out: TextIO) -> int:
    store = _store(args)
    if not args.yes:
        print(f"llmbias: this deletes {store}; pass --yes to do it", file=sys.stderr)
        return USAGE
    if store.exists():
        shutil.rmtree(store)
    print(f"deleted {store}", file=out)
    return OK
