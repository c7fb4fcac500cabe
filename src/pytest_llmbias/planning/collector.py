"""Run planned calls: store first, then concurrent, bounded, retried model calls, pipelined.

Every response is written to the store the moment it arrives (to the store's journal, and to its
database a batch at a time: :mod:`pytest_llmbias.store.journal`), so an interrupted batch resumes
with only the missing calls. Failed calls are reported, never stored.

A planned call may carry *follow-ups*: functions that, given the call's response, return further
calls (the judge's rating of an answer, a re-ask of an unreadable rating) or hand the response to
scoring that needs no network (embeddings). A follow-up runs as soon as its response is stored, or
at once when it was already stored, and the calls it returns join the same pool under the same
concurrency limit: nothing waits for a whole batch to finish. Before any call, a follow-up also
tells which calls it will make (:meth:`FollowUp.expect`), so that a plan can be priced whole
(:func:`expected_follow_ups`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import heapq
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pytest_llmbias.clients.faults import FaultLog
from pytest_llmbias.errors import ConfigError, ProviderError, StoreError
from pytest_llmbias.planning.progress import CollectionReport, Progress, merge_worker_reports
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.response_store import ResponseStore

__all__ = ["CollectionReport", "Progress", "merge_worker_reports"]  # imported from here too


class Client(Protocol):
    async def complete(self, call: ModelCall) -> Response: ...


@dataclass(frozen=True)
class PlannedCall:
    """A call a test needs: the model's alias, the call, reader-facing labels, and the follow-ups
    to run on its response."""

    alias: str
    call: ModelCall
    domain: str | None = None
    question: str | None = None
    then: tuple[FollowUp, ...] = field(default=(), compare=False, repr=False)


class FollowUp(Protocol):
    """What runs on a planned call's response: the further calls it needs, and, before any call,
    which calls those will be."""

    def __call__(self, item: PlannedCall, response: Response, /) -> Iterable[PlannedCall]:
        """Given a planned call and its response, the further calls it needs (possibly none)."""
        ...

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> Iterable[ExpectedCall]:
        """The calls this follow-up will make after ``planned``, told before any call; ``get``
        reads the store (a key's response, or None) and nothing else is asked.

        A call whose prompt can be built from stored responses is told exactly
        (``ExpectedCall(planned, what)``, with its own follow-ups); one whose prompt depends on a
        response not yet stored is sketched (:meth:`ExpectedCall.sketch`). A call that only
        happens on some answers (the re-ask of an unreadable rating) is told once that answer is
        stored, never guessed. A follow-up that makes one set of calls per group of planned calls
        (a question's rounds, a topic's articles) tells them after the group's first call only. A
        follow-up that makes no model call tells nothing."""
        ...


@dataclass(frozen=True)
class ExpectedCall:
    """A call a follow-up will make, told before it is made (see :meth:`FollowUp.expect`).

    ``exact``: ``planned`` is the call itself, with its own follow-ups, and ``key`` its key (so the
    store may already hold it). Otherwise ``planned`` is a sketch: the right model, parameters and
    wording, with each part that depends on a response not yet stored replaced by a stand-in text
    as long as that response may be (:func:`~pytest_llmbias.clients.pricing.stand_in_text`), so
    its token estimate is an upper bound like every other; ``key`` then names the call by what it
    is built from, so that two tests expecting the same call count it once. ``what`` names the
    kind of call in the plural ("judge ratings"); ``optional``: see the field."""

    planned: PlannedCall
    what: str
    exact: bool = True
    stand_in_key: str = ""
    #: a call the follow-up makes only if the answers so far leave its question open (a later
    #: look of a group-sequential gate): counted in a plan's maximum, not required of a store
    optional: bool = False

    @property
    def key(self) -> str:
        return self.planned.call.key if self.exact else self.stand_in_key

    @property
    def alias(self) -> str:
        return self.planned.alias

    @classmethod
    def sketch(cls, planned: PlannedCall, what: str, inputs: Sequence[str]) -> ExpectedCall:
        """A call not yet buildable: ``planned`` its sketch, ``inputs`` the keys of the calls whose
        responses it will be built from."""
        blob = "\x1f".join((what, planned.call.key, *inputs))
        return cls(planned, what, exact=False, stand_in_key="sketch:" + hashlib.sha256(blob.encode()).hexdigest())


def expected_follow_ups(
    planned: Iterable[PlannedCall] | Mapping[str, PlannedCall],
    get: Callable[[str], Response | None],
    parents: dict[str, str] | None = None,
) -> list[ExpectedCall]:
    """Every call the follow-ups of ``planned`` (or of a mapping :func:`deduplicate` gave) will
    lead to, told before any call: each
    follow-up's :meth:`~FollowUp.expect`, then the follow-ups of each exact call it tells, and so
    on. One entry per key, in the order first told; a call that is itself in ``planned`` is left
    out (it is counted there); a call told after an optional one is optional too. ``parents``,
    when given, is filled with each told call's key -> the key of the call whose follow-up told it."""
    unique = planned if isinstance(planned, Mapping) else deduplicate(list(planned))
    seen = set(unique)
    out: list[ExpectedCall] = []

    def visit(item: PlannedCall, optional: bool) -> None:
        for then in item.then:
            for expected in then.expect(item, get):
                if expected.key in seen:
                    continue
                seen.add(expected.key)
                if parents is not None:
                    parents[expected.key] = item.call.key
                if optional and not expected.optional:  # what an optional call leads to is optional too
                    expected = dataclasses.replace(expected, optional=True)
                out.append(expected)
                if expected.exact:
                    visit(expected.planned, expected.optional)

    for item in unique.values():
        if item.then:
            visit(item, False)
    return out


#: how often a process looks for the answers of calls another process has claimed, in seconds
WAIT_POLL_S = 0.25


@dataclass(frozen=True)
class AsPlanned:
    """A duplicate's follow-up, told of the planned call it came with: the same call asked for
    another domain or question (two domains that share a question's text) is made once, and each
    follow-up still reads its own domain and question id (a judge's retest sample is chosen by them)."""

    follow: FollowUp
    item: PlannedCall

    def __call__(self, item: PlannedCall, response: Response) -> Iterable[PlannedCall]:
        return self.follow(self.item, response)

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> Iterable[ExpectedCall]:
        return self.follow.expect(self.item, get)


def deduplicate(planned: Sequence[PlannedCall]) -> dict[str, PlannedCall]:
    """One planned call per key, the first one kept, carrying the follow-ups of every duplicate
    (each called with its own planned call where the domain or question differs: :class:`AsPlanned`)."""
    unique: dict[str, PlannedCall] = {}
    for item in planned:
        first = unique.get(item.call.key)
        if first is None:
            unique[item.call.key] = item
        elif item.then:
            own = (item.domain, item.question) != (first.domain, first.question)
            extra = tuple(AsPlanned(f, item) if own else f for f in item.then if f not in first.then)
            extra = tuple(f for f in extra if f not in first.then)
            if extra:
                unique[item.call.key] = PlannedCall(
                    first.alias, first.call, first.domain, first.question, first.then + extra
                )
    return unique


async def collect(
    planned: Sequence[PlannedCall],
    *,
    store: ResponseStore,
    client: Callable[[str], Client],
    concurrency: int,
    offline: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    claim_ttl: float = 120.0,
    faults: FaultLog | None = None,
) -> CollectionReport:
    """Make sure every planned call, and every call its follow-ups lead to, has a response in
    ``store`` (or a recorded error).

    ``client(alias)`` gives the client of a model (asked only when a call must be made). Store hits
    are served at once (read from the store in batches); in ``offline`` mode misses are only
    counted. The rest run at most ``concurrency`` at a time: follow-ups first (deepest first), then
    in the order calls became known. ``on_progress`` is called after each call completes; its
    ``total`` grows as follow-ups add calls. A follow-up that raises is recorded as that call's
    error (its response stays stored). ``faults``: the run's failed attempts; the first of each
    kind calls ``on_progress`` at once (the terminal prints it then), and each call that fails for
    good is counted by the kind of its last attempt on the progress line.

    With a team store (``store.team``), each call is claimed before it is made (see
    :mod:`pytest_llmbias.store.redis_store`): a call another process has claimed is set aside
    while this one makes the others, then its answer is read once it is stored — or, when the
    claim lapses (``claim_ttl`` seconds without its holder's heartbeat), the call is claimed and
    made here. A store lost mid-run stops new calls; the calls in flight finish (their answers go
    to the spool), and the :class:`~pytest_llmbias.errors.StoreError` is raised at the end.
    """
    unique = deduplicate(planned)
    # what the store holds of the plan, read in batches; a call found absent is not read again one by one
    found = store.fetch_many(list(unique), {key: item.call for key, item in unique.items()})
    absent = {key for key in unique if key not in found}

    def get(key: str) -> Response | None:
        return None if key in absent else store.get(key)

    # the follow-ups told in advance, so that the progress line counts the calls really made (a
    # judge's ratings too), not only the answers; an optional call (a later look's batch) is left
    # out: it is asked, if ever, by a later collection, and counted there
    told = expected_follow_ups(unique, get)
    progress = Progress(total=0, expected=len(unique) + sum(not e.optional for e in told), faults=faults)
    if faults is not None and on_progress is not None:
        faults.listener = lambda _fault: on_progress(progress)
    seen: dict[str, PlannedCall] = {}
    errors: dict[str, str] = {}
    missing: list[str] = []
    # Calls waiting for a slot, deepest follow-up first, then in the order they became known: a
    # chain (answer -> rating -> re-ask) finishes early instead of queueing behind every answer.
    queue: list[tuple[int, int, str]] = []
    depth: dict[str, int] = {}
    wake = asyncio.Event()
    in_flight = 0
    team = store.team
    owner = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    mine: set[str] = set()  # the claims this process holds
    waiting: dict[str, None] = {}  # calls another process has claimed, in order
    stopped: list[StoreError] = []

    def follow(item: PlannedCall, response: Response) -> None:
        for then in item.then:
            try:
                more = list(then(item, response))
            except Exception as exc:  # a broken follow-up must not stop the batch
                errors.setdefault(item.call.key, f"{type(exc).__name__}: {exc}")
                progress.failed("follow-up")
                continue
            for extra in more:
                submit(extra, depth.get(item.call.key, 0) + 1)

    def submit(item: PlannedCall, level: int = 0) -> None:
        key = item.call.key
        known = seen.get(key)
        if known is not None:
            new = tuple(f for f in item.then if f not in known.then)
            if new:
                seen[key] = PlannedCall(known.alias, known.call, known.domain, known.question, known.then + new)
                response = store.get(key)
                if response is not None:
                    follow(PlannedCall(item.alias, item.call, item.domain, item.question, new), response)
            return
        seen[key] = item
        depth[key] = level
        progress.total += 1
        store.label(key, alias=item.alias, domain=item.domain, question=item.question)
        response = get(key)
        absent.discard(key)  # once submitted, its answer may be stored: read through from now on
        if response is not None:
            progress.from_store += 1
            progress.done += 1
            if item.then:
                follow(item, response)
        elif offline:
            missing.append(key)
            progress.missing += 1
            progress.done += 1
        else:
            heapq.heappush(queue, (-level, len(seen), key))
            wake.set()

    def served(key: str, response: Response) -> None:
        """Another process's answer, read from the team store."""
        progress.from_store += 1
        progress.done += 1
        follow(seen[key], response)
        if on_progress:
            on_progress(progress)

    async def fetch(key: str) -> None:
        item = seen[key]
        if team is not None:
            if not team.claim(key, owner, claim_ttl):
                waiting[key] = None
                return
            mine.add(key)
            stored = store.get(key)  # answered between our look and our claim
            if stored is not None:
                team.release(key, owner)
                mine.discard(key)
                served(key, stored)
                return
        response: Response | None
        try:
            fetched = await client(item.alias).complete(item.call)
        except (ProviderError, ConfigError) as exc:  # ConfigError: e.g. the API key variable is unset
            errors[key] = str(exc)
            progress.failed(exc.kind if isinstance(exc, ProviderError) else "config")
            response = None
        else:
            response = fetched
            try:
                store.put(fetched, later=True)
            finally:
                progress.fetched += 1
        if key in mine:
            mine.discard(key)
            team.release(key, owner)  # type: ignore[union-attr]
        progress.done += 1
        if response is not None:
            follow(seen[key], response)  # seen[key]: follow-ups added while the call was in flight too
        if on_progress:
            on_progress(progress)

    async def look_again() -> None:
        """Read the answers of the calls set aside; put back in the queue those whose claim lapsed."""
        await asyncio.sleep(WAIT_POLL_S)
        keys = list(waiting)
        found = store.fetch_many(keys)
        lapsed = set(keys) - set(found) - team.claimed([k for k in keys if k not in found])  # type: ignore[union-attr]
        for key in keys:
            if key in found:
                del waiting[key]
                served(key, found[key])
            elif key in lapsed:
                del waiting[key]
                heapq.heappush(queue, (-depth[key], len(seen), key))

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(max(0.2, claim_ttl / 3))
            if mine:
                try:
                    team.renew(list(mine), owner, claim_ttl)  # type: ignore[union-attr]
                except StoreError as exc:
                    stopped.append(exc)
                    wake.set()
                    return

    looking = False

    async def worker() -> None:
        nonlocal in_flight, looking
        while True:
            while not queue or stopped:
                if stopped or (in_flight == 0 and not waiting):
                    wake.set()  # nothing queued, nothing in flight or set aside: let every worker finish
                    return
                if waiting and not looking:
                    looking = True
                    try:
                        await look_again()
                    except StoreError as exc:
                        stopped.append(exc)
                    finally:
                        looking = False
                        wake.set()
                    continue
                wake.clear()
                await wake.wait()
            _, _, key = heapq.heappop(queue)
            in_flight += 1
            try:
                await fetch(key)
            except StoreError as exc:  # the store was lost: no new call; those in flight finish
                stopped.append(exc)
            finally:
                in_flight -= 1
                wake.set()

    for item in unique.values():
        submit(item)
    if on_progress:
        on_progress(progress)
    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, min(concurrency, len(queue) or 1)))]
    beat = asyncio.ensure_future(heartbeat()) if team is not None else None
    try:
        await asyncio.gather(*workers)
    finally:
        if faults is not None:
            faults.listener = None  # this batch's progress is over
        for task in workers if beat is None else [*workers, beat]:
            task.cancel()
        try:
            store.flush()  # the journal's last answers, into the database before the lock is let go
        except StoreError as exc:
            stopped.append(exc)
    if stopped:
        raise stopped[0]
    return CollectionReport(
        total=progress.total,
        from_store=progress.from_store,
        fetched=progress.fetched,
        errors=errors,
        missing=tuple(missing),
        elapsed_s=progress.elapsed,
    )
