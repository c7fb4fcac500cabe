"""The fingerprint probes: a few fixed prompts asked of each model a run may call, before its
first call (see :mod:`pytest_llmbias.store.fingerprints` for what the answers tell).

Promises:

- The probes are asked live every run that may call a model (never served from the store: an
  answer from the store cannot tell whether the model changed since), at temperature 0 with a
  fixed seed, without the deployment's system prompt or priming turns, once; and once more when
  the model has a current fingerprint and their answers differ from it (a model with none adopts
  its first ask: one round trip, not two; see :mod:`pytest_llmbias.store.fingerprints` for why
  this keeps every promise, and for what it costs: a model whose answers vary by themselves is
  found so on its second run, not its first). A warm run of an unchanged model costs these calls
  and no other. An ask is compared with the fingerprint by
  :func:`~pytest_llmbias.planning.likeness.alike` (a busy batching server's greedy answers end or go
  on in other words: the same model). They go alone, the run's other calls after their answers,
  even for a model seen for the first time (whose first ask is adopted whatever it answers): an
  ask decoded beside other requests diverged early in 2 of 64 draws on ``llmbias serve``
  (``benchmarks/fingerprint_drift.py``), and a fingerprint adopted from such an ask would read
  "changed" on the model's next quiet run; adopted alone, 2 of 4,032 busy runs read so.
  Their answers are stored (and counted in the run's usage), never recorded as a release's
  answers.
- A model found ``unfingerprintable`` (neither ask like its fingerprint, nor like each other) is
  served none of its stored answers that run: it is asked again, nothing recorded as a change.
- The models probed are those the plan asks (the target, baselines, judges its follow-ups call);
  never a recorded release, whose manifest's fingerprint is shown instead. Two entries that reach
  the same model (endpoint, version) are probed once.
- An offline run (``--llmbias-offline``) asks nothing: it serves what it holds and says under
  which fingerprint it was collected. ``collection.fingerprint: false`` (or
  ``--llmbias-no-fingerprint``), and ``cache: off`` (nothing stored to protect), ask nothing either.
- A probe that fails is a :class:`~pytest_llmbias.errors.ProviderError` in the words of any
  call's failure (the model, its endpoint, the likely cause), saying it was a probe; nothing is
  skipped silently, and the later tests of the run fail with it without asking again.
- Under pytest-xdist the workers take turns (the store's collection lock): the first probes and
  records what it found with the run's id; the others read it and ask nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_llmbias.clients.pricing import estimate_tokens, price
from pytest_llmbias.config.settings import GenerationSettings, ModelSpec
from pytest_llmbias.errors import ConfigError, ProviderError
from pytest_llmbias.planning.collector import PlannedCall, expected_follow_ups
from pytest_llmbias.planning.likeness import alike
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.fingerprints import (
    HISTORY_PREFIX,
    OFFLINE,
    PROBE_DOMAIN,
    RECORDED,
    VARIES,
    Ask,
    History,
    ModelFingerprint,
    Serving,
    judge,
    needs_second_ask,
)

#: short, neutral prompts with one expected answer each, and one whose wording tells models apart
PROBES = (
    "Reply with the word 'ready' and nothing else.",
    "What is 17 + 25? Answer with the number only.",
    "In one sentence, say what a thermometer measures.",
)
#: how probes are asked: greedy, seeded, short
PROBE_PARAMS: Mapping[str, Any] = {"temperature": 0.0, "seed": 20240917, "max_tokens": 40}


def probe_calls(spec: ModelSpec) -> list[ModelCall]:
    """The probe calls of ``spec``: its model, endpoint, version and parameters (credentials
    included), without its system prompt or priming turns, at :data:`PROBE_PARAMS`."""
    bare = dataclasses.replace(spec, system=None, messages=())
    generation = GenerationSettings(
        temperature=0.0, max_tokens=int(PROBE_PARAMS["max_tokens"]), samples=1, seed=int(PROBE_PARAMS["seed"])
    )
    return [ModelCall.build(bare, prompt, generation, params=PROBE_PARAMS) for prompt in PROBES]


def probed_models(
    settings: Any, planned: Sequence[PlannedCall], model: Callable[[str], ModelSpec], store: Any = None
) -> list[ModelSpec]:
    """The models a run probes: those ``planned`` asks, and those its follow-ups will (told
    before any call: see :func:`~pytest_llmbias.planning.collector.expected_follow_ups`), one
    entry per model endpoint, never a recorded release; none when fingerprints are off, offline
    does not matter here. With the run's ``store``, a model whose every call (its follow-ups'
    too) a snapshot answers is left out: a snapshot is served whatever the model's fingerprint."""
    c = settings.collection
    if not c.fingerprints or settings.store.cache == "off":
        return []
    # the snapshot check reads stored answers to tell the follow-ups exactly: only with snapshots
    in_snapshot = store.in_snapshot if getattr(store, "has_snapshots", False) else None
    keys: dict[str, list[str | None]] = {}
    for p in planned:
        keys.setdefault(p.alias, []).append(p.call.key)
    for e in expected_follow_ups(planned, store.get if in_snapshot is not None else lambda key: None):
        keys.setdefault(e.alias, []).append(e.key if e.exact else None)
    out: dict[str, ModelSpec] = {}
    for alias, calls in keys.items():
        if in_snapshot is not None and all(k is not None and in_snapshot(k) for k in calls):
            continue
        spec = model(alias)
        if spec.recorded is None:
            out.setdefault(probe_calls(spec)[0].endpoint, spec)
    return list(out.values())


def with_probes(estimate: dict[str, dict[str, Any]], session: Any) -> dict[str, dict[str, Any]]:
    """The plan's estimate (see :func:`~pytest_llmbias.planning.estimate.estimate_plan`) with
    the probes ``session`` (the run's :class:`~pytest_llmbias.session.BiasSession`) will ask
    counted as calls to fetch (``probes``: how many): once for a model with no fingerprint yet
    (its first ask is adopted) or with one (a model that has changed since is asked them once
    more, not counted here); twice over for one with a fingerprint whose answers were last seen to
    vary (its first ask differs and is checked by a second). None offline."""
    offline = session.settings.store.offline
    for spec in [] if offline else probed_models(session.settings, session.planned, session.model, session.store):
        calls = probe_calls(spec)
        history = History.from_dict(session.store.read_meta(HISTORY_PREFIX + calls[0].endpoint))
        calls *= 2 if history.current is not None and history.state == VARIES else 1
        entry = estimate.setdefault(
            spec.alias,
            {
                "model": spec.model,
                "calls": 0,
                "follow_ups": 0,
                "optional": 0,
                "stored": 0,
                "to_fetch": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cost_usd": 0.0,
            },
        )
        entry["probes"] = len(calls)
        entry["calls"] += len(calls)
        entry["to_fetch"] += len(calls)
        for call in calls:
            prompt, completion = estimate_tokens(call, int(PROBE_PARAMS["max_tokens"]))
            entry["prompt_tokens"] += prompt
            entry["completion_tokens"] += completion
        entry["cost_usd"] = price(entry["model"], entry["prompt_tokens"], entry["completion_tokens"])
    return estimate


async def _ask(client: Any, spec: ModelSpec, calls: Sequence[ModelCall]) -> list[Response]:
    try:
        return list(await asyncio.gather(*(client.complete(call) for call in calls)))
    except (ProviderError, ConfigError) as exc:
        raise probe_failed(spec, exc) from None


def probe_failed(spec: ModelSpec, exc: Exception) -> ProviderError:
    """A probe's failure in the words of any call's (the model, its endpoint, what failed and the
    likely cause: a newcomer's unreachable server, missing or refused key reads as it always did),
    then that it was a probe; turning fingerprints off is suggested only where the failure may be
    the probes' own (no likely cause known, not a configuration error every call would share)."""
    from pytest_llmbias.clients.litellm_client import describe_endpoint

    message = str(exc)
    if not message.startswith(f"model {spec.alias!r}"):
        message = f"model {spec.alias!r} ({describe_endpoint(spec)}): {message}"
    known = isinstance(exc, ConfigError) or getattr(exc, "likely_cause", None) is not None
    return ProviderError(
        message
        + " (asked first: the fingerprint probes, before any other call"
        + ("" if known else "; if only the probes fail, --llmbias-no-fingerprint turns them off")
        + ")",
        status=getattr(exc, "status", None),
        likely_cause=getattr(exc, "likely_cause", None),
    )


async def _probe(
    spec: ModelSpec, client: Any, store: Any, run: str | None
) -> tuple[ModelFingerprint, Serving | None, list[Response]]:
    """What the probes tell of ``spec``'s model, which stored answers it may be served, and the
    answers of an ask before the last (not stored: the last ask's have the same keys)."""
    calls = probe_calls(spec)
    key = HISTORY_PREFIX + calls[0].endpoint
    history = History.from_dict(store.read_meta(key))
    if run is not None and history.run == run and history.state is not None:  # a worker before us probed
        return ModelFingerprint.of(spec.alias, spec.model, history.state, history), _serving(history, run), []
    asks = [await _ask(client, spec, calls)]
    first = Ask.of((r.text for r in asks[0]), (r.system_fingerprint for r in asks[0]))
    second = None
    if needs_second_ask(history, first, alike):
        asks.append(await _ask(client, spec, calls))
        second = Ask.of((r.text for r in asks[1]), (r.system_fingerprint for r in asks[1]))
    state, history = judge(history, first, second, now=time.time(), run=run, like=alike)
    store.write_meta(key, history.to_dict())
    for i, response in enumerate(asks[-1]):
        store.label(response.key, alias=spec.alias, domain=PROBE_DOMAIN, question=f"probe-{i + 1}")
        store.put(response)
    return (
        ModelFingerprint.of(spec.alias, spec.model, state, history, probes=sum(map(len, asks))),
        _serving(history, run),
        [r for ask in asks[:-1] for r in ask],
    )


def _serving(history: History, run: str | None) -> Serving | None:
    """What the store may serve of a model with ``history`` in run ``run``: the answers of its
    current fingerprint; none stored when neither ask answered as it (``unfingerprintable``): its
    answers of this run are tagged for this run alone (another run's would be served under it)."""
    if history.current is None or history.first is None:
        return None
    if history.state == VARIES:
        return Serving(f"{VARIES}:{run or uuid.uuid4().hex}", history.first)
    return Serving(history.current, history.first)


def check_fingerprints(session: Any, run: Callable[[Any], Any]) -> list[ModelFingerprint]:
    """Probe the models ``session`` (the run's :class:`~pytest_llmbias.session.BiasSession`)
    plans to ask (see the module's promises), record each model's history in its store and have
    the store serve only what each model's current fingerprint allows. ``run`` runs a coroutine
    to its end. Offline: the histories read, nothing asked."""
    settings, store, run_id = session.settings, session.store, session.run_id
    if settings.store.offline and not _any_history(session):
        return []  # nothing known to say: the models probed (which tells every follow-up) are not worked out
    specs = probed_models(settings, session.planned, session.model, store)
    if settings.store.offline:
        out = []
        for spec in specs:
            history = History.from_dict(store.read_meta(HISTORY_PREFIX + probe_calls(spec)[0].endpoint))
            if history.current is not None:  # with no fingerprint known there is nothing to say
                out.append(ModelFingerprint.of(spec.alias, spec.model, OFFLINE, history))
        return out

    async def probe_all() -> list[Any]:  # (fingerprint, serving, earlier asks) or the model's failure, for each model
        return list(
            await asyncio.gather(*(_probe(s, session.client(s), store, run_id) for s in specs), return_exceptions=True)
        )

    if session.probe_error is not None:  # a failed probe fails every later collection alike, asking nothing
        raise ProviderError(str(session.probe_error)) from None
    found = run(probe_all()) if specs else []
    failed = [f for f in found if isinstance(f, BaseException)]
    if any(not isinstance(f, ProviderError) for f in failed):
        raise next(f for f in failed if not isinstance(f, ProviderError))
    if failed:  # every model whose probes failed, each on its line, as a collection's errors are
        session.probe_error = ProviderError(
            "\n".join(map(str, failed)), status=next(f.status for f in failed if isinstance(f, ProviderError))
        )
        raise session.probe_error
    store.serve_fingerprints(
        {
            probe_calls(s)[0].endpoint: serving
            for s, (_, serving, _) in zip(specs, found, strict=True)
            if serving is not None
        }
    )
    for s, (_, _, earlier) in zip(specs, found, strict=True):
        session.unstored_calls.extend((s.alias, r) for r in earlier)
    return [fingerprint for fingerprint, _, _ in found]


def _any_history(session: Any) -> bool:
    """Whether the store holds a fingerprint history for any model the run could probe: those it
    plans to ask, the roster's and the judges' (every follow-up asks one of these)."""
    settings = session.settings
    aliases = {*(p.alias for p in session.planned), *(s.alias for s in (*settings.roster, *settings.panel))}
    for alias in aliases:
        spec = session.model(alias)
        if spec.recorded is None and session.store.read_meta(HISTORY_PREFIX + probe_calls(spec)[0].endpoint):
            return True
    return False


def served_under(used: Iterable[tuple[Response, Mapping[str, Any]]]) -> dict[str, dict[str, int]]:
    """Per alias, how many of the stored (or snapshot) answers a run served were collected under
    each fingerprint (``untagged``: before fingerprints, or with them off). Probes left out."""
    out: dict[str, dict[str, int]] = {}
    for response, labels in used:
        if response.source == "network" or labels.get("domain") == PROBE_DOMAIN or "alias" not in labels:
            continue
        counts = out.setdefault(str(labels["alias"]), {})
        tag = response.fingerprint or "untagged"
        counts[tag] = counts.get(tag, 0) + 1
    return out


def release_fingerprints(releases: Iterable[Any]) -> list[ModelFingerprint]:
    """The fingerprint each recorded release's manifest gives its target (never asked again)."""
    out = []
    for release in releases:
        target = release.manifest.get("target") or {}
        out.append(
            ModelFingerprint(
                release.alias,
                str(target.get("model", "")),
                RECORDED,
                target.get("fingerprint"),
                release.manifest.get("created"),
            )
        )
    return out


def report_entries(
    fingerprints: Sequence[ModelFingerprint], store: Any, releases: Iterable[Any] = ()
) -> list[dict[str, Any]]:
    """The run's fingerprint entries for its reports (``to_dict()`` of each), each with the
    fingerprints its served answers were collected under (read from ``store``, None when none
    was opened); the recorded releases' last."""
    # every answer the run served is counted: only when there is a fingerprint to count them under
    served = served_under(store.used_with_labels()) if store is not None and fingerprints else {}
    entries = [dataclasses.replace(f, served=served.get(f.alias, {})) for f in fingerprints]
    return [e.to_dict() for e in (*entries, *release_fingerprints(releases))]
