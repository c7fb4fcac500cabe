"""``llmbias store stats|verify|check|repair|export|import|migrate|clear|batches``: the project's response store (its
settings' team store ``store.url`` or folder ``store.dir``, or ``--store DIR|URL``) and its
snapshots (``store.snapshots``, or ``--snapshot``).

``stats`` and ``verify`` read the store and the snapshots; either may be missing, not both.
``check`` examines a disk store without changing anything (exit status 1 when it is damaged);
``repair`` heals it as a run would, keeping every answer that can be read (see
:mod:`pytest_llmbias.store.checkup`). ``migrate --to DIR|URL`` copies every record of the store
into another (a folder into Redis, or back), keeping what the other already holds. ``batches``
lists (and cancels) the provider batches of batch mode the store has open
(:mod:`pytest_llmbias.cli.store_batches`).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from pytest_llmbias.cli.project import Project, epilog
from pytest_llmbias.store.locations import StoreLocation, is_url

OK, PROBLEMS, USAGE = 0, 1, 2


def add_commands(commands: Any) -> None:
    store = commands.add_parser("store", help="inspect, verify, export or clear the response store").add_subparsers(
        title="store"
    )
    for name, run, help_ in (
        ("stats", _stats, "entries per model and size on disk, of the store and its snapshots"),
        ("verify", _verify, "re-hash every entry and snapshot line; list what is wrong"),
        ("check", _check, "examine a disk store for damage without changing anything (exit 1 when damaged)"),
        ("repair", _repair, "heal a damaged disk store, keeping every answer that can still be read"),
        ("export", _export, "write every stored response to a JSONL snapshot"),
        ("import", _import, "write the responses of snapshots into the store"),
        ("migrate", _migrate, "copy every stored response into another store (a folder into Redis, or back)"),
        ("clear", _clear, "delete the store folder, or the team store's records"),
        ("batches", _batches, "list the provider batches the store has open (batch mode), or cancel them"),
    ):
        p = store.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=epilog(f"store {name}"),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument(
            "--store",
            default=None,
            metavar="DIR|URL",
            help="the store: a folder, or a team store's redis:// URL (default: the project's store.url, "
            "else its store.dir, else .llmbias)",
        )
        if name in ("stats", "verify"):
            p.add_argument(
                "--snapshot",
                action="append",
                default=[],
                type=Path,
                help="a snapshot to read too (repeat; default: the project's store.snapshots)",
            )
        if name == "export":
            p.add_argument("out", type=Path)
        if name == "import":
            p.add_argument("snapshots", nargs="+", type=Path)
        if name == "migrate":
            p.add_argument("--to", required=True, metavar="DIR|URL", help="the store to copy into")
        if name == "clear":
            p.add_argument("--yes", action="store_true", help="really delete it")
        if name == "batches":
            from pytest_llmbias.cli import store_batches

            store_batches.add_arguments(p)
        p.set_defaults(run=run)


def _location(given: str | None, project: Project | None = None) -> StoreLocation:
    """The store named on the command line (a folder or a URL), else the project's."""
    if given is not None and not is_url(given):
        return StoreLocation(Path(given))
    project = project or Project.find()
    s = project.settings.store
    url = given if given is not None else s.url
    return StoreLocation(project.store, url, s.password_env if url == s.url else None)


def _store_and_snapshots(args: argparse.Namespace) -> tuple[StoreLocation, list[Path]]:
    """The store and the snapshots to read, the project's where not given (read once)."""
    project = None if args.store is not None and args.snapshot and not is_url(args.store) else Project.find()
    return _location(args.store, project), list(args.snapshot) or list(project.snapshots)  # type: ignore[union-attr]


def _nothing(store: StoreLocation) -> Exception:
    from pytest_llmbias.errors import StoreError

    return StoreError(
        f"no response store at {store.where} and no snapshot: give --store DIR or --snapshot FILE, or run in "
        "a project whose llmbias.yaml names them"
    )


def _stats(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.store.snapshot import SnapshotLayer

    store, snapshots = _store_and_snapshots(args)
    if not store.exists() and not snapshots:
        raise _nothing(store)
    if store.exists():
        by_model: Counter[str] = Counter()
        tokens = 0
        for _, record in store.entries():
            if isinstance(record, dict):
                by_model[str(record.get("model"))] += 1
                usage = record.get("usage") or {}
                tokens += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        size = store.size_bytes()
        print(f"{sum(by_model.values())} responses, {tokens:,} tokens, {size / 1e6:.1f} MB in {store.where}", file=out)
        for model, n in by_model.most_common():
            print(f"  {model}: {n}", file=out)
    else:
        print(f"no response store at {store.where}", file=out)
    for snapshot in snapshots:
        responses = SnapshotLayer().add(snapshot).responses
        models = Counter(r.call.model for r in responses.values())
        print(f"{len(responses)} responses, {snapshot.stat().st_size / 1e6:.1f} MB in snapshot {snapshot}", file=out)
        for model, n in models.most_common():
            print(f"  {model}: {n}", file=out)
    return OK


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.errors import StoreError
    from pytest_llmbias.store.calls import Response
    from pytest_llmbias.store.snapshot import SnapshotLayer

    store, snapshots = _store_and_snapshots(args)
    if not store.exists() and not snapshots:
        raise _nothing(store)
    problems = checked = 0
    if store.exists():
        for key, record in store.entries():
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
        print(f"no response store at {store.where}: the snapshots only", file=out)
    for snapshot in snapshots:
        try:
            checked += len(SnapshotLayer().add(snapshot).responses)
        except StoreError as exc:
            problems += 1
            print(f"bad snapshot: {exc}", file=out)
    print(f"{checked} checked, {problems} problem(s)", file=out)
    return PROBLEMS if problems else OK


def _disk_store(args: argparse.Namespace) -> StoreLocation:
    store = _location(args.store)
    if store.url is not None:
        from pytest_llmbias.errors import StoreError

        raise StoreError(f"check and repair examine a disk store; {store.where} is a team store (see `store verify`)")
    return store


def _check(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.store.checkup import check

    found = check(_disk_store(args).directory)
    _print_checkup(found, out)
    return PROBLEMS if found.damaged else OK


def _print_checkup(found: Any, out: TextIO) -> None:
    for note in found.notes:
        print(f"note: {note}", file=out)
    for problem in found.problems:
        print(f"damage: {problem}", file=out)
    verdict = f"{len(found.problems)} problem(s)" if found.damaged else "no damage"
    print(f"{found.answers} answers read, {verdict} in {found.directory}", file=out)


def _repair(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.store.checkup import repair_store

    done = repair_store(_disk_store(args).directory)
    for notice in done.notices:
        print(f"found: {notice}", file=out)
    if done.rebuilt is not None:
        print(f"rebuilt: {done.rebuilt.message()}", file=out)
    elif done.recovered:
        print(f"recovered: {done.recovered} answer(s) of interrupted runs taken in from their journals", file=out)
    if done.moved_out:
        print(
            f"moved out: {done.moved_out} answer(s) that cannot be read, kept as stored in {done.unreadable_file} "
            "(the next run asks them again)",
            file=out,
        )
    if done.rebuilt is None and not done.moved_out and not done.notices and not done.recovered:
        print("nothing to repair", file=out)
    _print_checkup(done.after, out)
    return PROBLEMS if done.after.damaged else OK


def _export(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.store.calls import Response
    from pytest_llmbias.store.snapshot import write_snapshot

    responses = [
        Response.from_dict(r, source="store") for _, r in _location(args.store).entries() if isinstance(r, dict)
    ]
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
    where = _location(args.store)
    from pytest_llmbias.store.redis_store import password_of

    store = ResponseStore(where.directory, url=where.url, password=password_of(where.password_env))
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
    print(f"{added} imported, {same} already stored, {conflicts} conflict(s) into {where.where}", file=out)
    return PROBLEMS if conflicts else OK


def _migrate(args: argparse.Namespace, out: TextIO) -> int:
    """Every record of the store into the store ``--to`` names, byte for byte as a run wrote it;
    a key the other store holds already keeps its record there."""
    source = _location(args.store)
    target = _location(args.to)
    if (source.url, source.directory if source.url is None else None) == (
        target.url,
        target.directory if target.url is None else None,
    ):
        raise ValueError(f"--to names the store itself ({target.where})")
    records = {key: record for key, record in source.entries() if isinstance(record, dict)}
    written = target.write(records)
    print(
        f"{written} responses copied from {source.where} to {target.where} ({len(records) - written} already there)",
        file=out,
    )
    return OK


def _batches(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.cli import store_batches

    return store_batches.run(args, out)


def _clear(args: argparse.Namespace, out: TextIO) -> int:
    store = _location(args.store)
    if not args.yes:
        print(f"llmbias: this deletes {store.where}; pass --yes to do it", file=sys.stderr)
        return USAGE
    store.clear()
    print(f"deleted {store.where}", file=out)
    return OK
