"""``llmbias store batches [--cancel ID ...] [--cancel-all]``: the provider batches a store has open.

Each open batch is one the store's journal holds (see :mod:`pytest_llmbias.store.batch_journal`):
submitted in batch mode and not yet read back, because its run was killed or stopped waiting. The
next run in batch mode that asks its calls polls it; ``--cancel`` asks the provider to cancel it
(its lines not yet run are not charged) and forgets it, so that the next run sends those calls
again.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
from typing import Any, TextIO

OK, PROBLEMS = 0, 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cancel", action="append", default=[], metavar="ID", help="cancel this batch (its id; repeat)")
    p.add_argument("--cancel-all", action="store_true", help="cancel every open batch")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from pytest_llmbias.cli.project import Project
    from pytest_llmbias.store.batch_journal import BatchJournal
    from pytest_llmbias.store.response_store import ResponseStore

    project = Project.find()
    settings = project.settings
    url = args.store if args.store is not None and "://" in args.store else settings.store.url
    folder = project.store if args.store is None or "://" in args.store else args.store
    store = ResponseStore(folder, url=url)
    try:
        journal = BatchJournal(store)
        entries = journal.entries()
        if not entries:
            print(f"no open batch in {store.where}", file=out)
            return OK
        wanted = {e.batch_id for e in entries} if args.cancel_all else set(args.cancel)
        unknown = wanted - {e.batch_id for e in entries}
        for entry in entries:
            when = datetime.datetime.fromtimestamp(entry.submitted).isoformat(timespec="seconds")
            line = f"{entry.batch_id or '(not created)'}  {entry.alias}  {len(entry.keys)} calls  {when}"
            if entry.batch_id in wanted:
                status = asyncio.run(_cancel(entry, settings))
                journal.closed(entry)
                line += f"  cancelled ({status})"
            print(line + (f"  by {entry.owner}" if entry.owner else ""), file=out)
        for batch_id in sorted(unknown):
            print(f"llmbias: no open batch {batch_id!r} in {store.where}", file=out)
        return PROBLEMS if unknown else OK
    finally:
        store.close()


async def _cancel(entry: Any, settings: Any) -> str:
    """Ask the endpoint to cancel ``entry``'s batch with its model's key (Anthropic's headers for an
    ``anthropic/`` model); the status it answers."""
    import os

    from pytest_llmbias.clients.anthropic_batch_api import ANTHROPIC_KEY, ANTHROPIC_VERSION
    from pytest_llmbias.clients.batch_lines import batch_api
    from pytest_llmbias.errors import ProviderError

    if not entry.batch_id:
        return "never created"
    spec = next((s for s in (*settings.roster, *settings.panel) if s.alias == entry.alias), None)
    key = spec.api_key() if spec is not None else None
    headers: dict[str, str]
    if spec is not None and spec.model.startswith("anthropic/"):
        headers = {"anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json"}
        if key or os.environ.get(ANTHROPIC_KEY):
            headers["x-api-key"] = key or os.environ[ANTHROPIC_KEY]
    else:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
    api = batch_api(entry.base_url, headers)
    try:
        return str((await api.cancel(entry.batch_id)).get("status"))
    except ProviderError as exc:
        return f"the endpoint refused: {exc}"
    finally:
        await api.aclose()
