"""The service behind a pytest session: roster, clients, store, domains, the plan, collection,
response sets, scorers and export. It knows no gate by name.

The plugin has each marked test's gate (or ``bias_responses`` request) plan its calls here at
collection time, asks for the plan to run once before the first marked test, and has each gate
read its responses from here. Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmbias.clients.aio import LoopThread
from pytest_llmbias.clients.batching import batch_runner
from pytest_llmbias.clients.litellm_client import ModelClient
from pytest_llmbias.clients.openai_transport import OpenAITransport
from pytest_llmbias.clients.pricing import Budget
from pytest_llmbias.clients.retry import RetryPolicy
from pytest_llmbias.clients.shared_limits import EndpointLimits
from pytest_llmbias.config.redaction import LogMask, Redactor
from pytest_llmbias.config.settings import ModelSpec, Settings
from pytest_llmbias.domains import Domain, load_domain
from pytest_llmbias.errors import MissingResponsesError, StoreError
from pytest_llmbias.planning.collector import CollectionReport, FollowUp, PlannedCall, Progress, collect
from pytest_llmbias.planning.garbage import fewer_collections
from pytest_llmbias.planning.request import ResponseRequest, plan_calls, read_responses
from pytest_llmbias.planning.response_set import ResponseSet
from pytest_llmbias.scoring.session_scorers import SessionScorers
from pytest_llmbias.stats.shelf import keep_between_runs
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.lock import CollectionLock
from pytest_llmbias.store.response_store import ResponseStore
from pytest_llmbias.store.result_shelf import ResultShelf
from pytest_llmbias.store.snapshot import export_part_path

if TYPE_CHECKING:
    from pytest_llmbias.clients.python_target import ModelRegistry
    from pytest_llmbias.releases.release import Release
    from pytest_llmbias.releases.view import ReleaseView
    from pytest_llmbias.scoring.embedding import EmbeddingScorer
    from pytest_llmbias.scoring.features import FeatureRegistry, FeatureStore


class BiasSession:
    """Plans, collects and serves the responses of one pytest session (or one xdist worker)."""

    def __init__(
        self,
        settings: Settings,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        worker_id: str | None = None,
        run_id: str | None = None,
        add_features: Callable[[FeatureRegistry], None] | None = None,
        add_models: Callable[[ModelRegistry], None] | None = None,
    ) -> None:
        self.settings = settings
        self.add_features, self.add_models, self.on_progress = add_features, add_models, on_progress
        self._model_registry: ModelRegistry | None = None
        self.worker_id, self.run_id = worker_id, run_id
        self.planned: list[PlannedCall] = []
        self._rounds: list[Callable[[], None]] = []
        self._shares: dict[int, tuple[Any, Any]] = {}
        self.reports: list[CollectionReport] = []
        self.errors: dict[str, str] = {}
        self._domains: dict[str, Domain] = {}
        self._loaded: dict[str, Domain] = {}  # by name, whole (before any cut to a release's items)
        self._releases: dict[str, Release] = {}  # the releases compared against, each read once
        self._views: dict[str, ReleaseView] = {}  # per release a marker names with against=
        self._models: dict[str, ModelSpec] = {}  # the models of those releases, by alias
        self._changed: dict[str, str] = {}  # domain-and-release key -> how the domain changed since
        self._store: ResponseStore | None = None
        self._clients: dict[str, ModelClient] = {}
        #: what the fingerprint probes found of each model (store.fingerprints.ModelFingerprint), once the first
        #: collection began; the error of a probe that failed (each later collection raises it, asking nothing)
        self.fingerprints: list[Any] | None = None
        self.probe_error: Exception | None = None
        #: (alias, answer) of calls made but not stored: a probe ask before the last, whose keys the
        #: last ask's answers took (see :mod:`pytest_llmbias.planning.probes`); counted in :meth:`usage`
        self.unstored_calls: list[tuple[str, Response]] = []
        #: per endpoint (model, api_base): its adaptive limit and caps, shared by the aliases that call it
        self.limits = EndpointLimits(settings.collection.concurrency, settings.collection.rpm, settings.collection.tpm)
        self._direct: OpenAITransport | None = None  # one pooled HTTP session for direct calls
        self._loop = LoopThread()
        self._collected = False
        self.scorers = SessionScorers(settings, add_features)
        self._redactor: Redactor | None = None
        self._log_mask: LogMask | None = None
        self.budget = Budget(settings.collection.max_cost)
        #: the snapshot (or, in a pytest-xdist worker, the part file) written at close
        self.exported: Path | None = None
        #: the release's answers file (or a worker's part of it) written at close
        self.recorded: Path | None = None
        #: where the statistics keep their resamplings between runs (none with ``cache: off``)
        self._shelf = None if settings.store.cache == "off" else ResultShelf(Path(settings.store.dir) / "resampled")
        self._shelf_before = keep_between_runs(self._shelf) if self._shelf is not None else None

    # -- configuration ---------------------------------------------------------------------

    def domain(self, name: str, *, against: str | None = None) -> Domain:
        """Load a domain once per session (configured paths, then built-ins, or a file path); when
        compared with a release (``against``, else the run's), the items it was asked, unchanged."""
        release_ref = against or self.settings.release.against
        key = self._domain_key(name, release_ref)
        if key not in self._domains:
            domain = load_domain(name, (s := self.settings).domains.paths, s.domains, cache=s.store.domain_cache)
            self._loaded[name] = domain
            if release_ref:
                from pytest_llmbias.releases.release import Release, shared_domain

                if release_ref not in self._releases:
                    self._releases[release_ref] = Release.load(release_ref, self.settings.release.dir)
                domain, note = shared_domain(domain, self._releases[release_ref])
                if note is not None:
                    self._changed[key] = note
            self._domains[key] = domain
        return self._domains[key]

    def loaded_domains(self) -> dict[str, Domain]:
        """The domains this session loaded, by name, whole (not cut to a release's items)."""
        return dict(self._loaded)

    @staticmethod
    def _domain_key(name: str, release: str | None) -> str:
        """A domain as loaded for a comparison with ``release`` (or none)."""
        return f"{name}\0{release or ''}"

    def inconclusive(self, exc: Exception, domain: str, *, against: str | None = None) -> Exception:
        """``exc``, the error that stopped a gate on ``domain``; when that domain changed since the
        release compared against, a :class:`StatisticsError` that says so: too few questions
        left unchanged make the comparison inconclusive, and the reader should know why."""
        note = self._changed.get(self._domain_key(domain, against or self.settings.release.against))
        if note is None:
            return exc
        from pytest_llmbias.errors import StatisticsError

        return StatisticsError(f"inconclusive against the release: {exc} ({note})")

    def against(self, release: str | None) -> BiasSession | ReleaseView:
        """The session as a marker sees it: itself, or with ``release`` (a marker's ``against=``)
        a :class:`~pytest_llmbias.releases.view.ReleaseView` comparing the target with that
        recorded release. ConfigError when it cannot be read (see
        :func:`~pytest_llmbias.releases.release.settings_against`)."""
        if release is None or release == self.settings.release.against:
            return self
        if release not in self._views:
            from pytest_llmbias.releases.release import settings_against
            from pytest_llmbias.releases.view import ReleaseView

            settings = settings_against(self.settings, release)
            self.store.add_snapshots(settings.store.snapshots)
            self._models[settings.comparators[0].alias] = settings.comparators[0]
            self._views[release] = ReleaseView(self, settings)
        return self._views[release]

    def model(self, alias: str) -> ModelSpec:
        """The model entry of ``alias``: the roster's, the judge's, or a release a marker named."""
        return self._models[alias] if alias in self._models else self.settings.model(alias)

    @property
    def store(self) -> ResponseStore:
        if self._store is None:
            from pytest_llmbias.store.redis_store import password_of

            s = self.settings.store
            self._store = ResponseStore(
                s.dir,
                mode=s.cache,
                snapshots=s.snapshots,
                run_id=self.run_id,
                read_only=s.offline,
                url=s.url,
                password=password_of(s.password_env) if s.url else None,
            )
        return self._store

    def open_team_store(self) -> None:
        """Connect to the team store now, if there is one: an unreachable or misconfigured Redis
        is a :class:`ConfigError` (a usage error) before any test runs, not an error in each."""
        from pytest_llmbias.errors import ConfigError, StoreError

        try:
            team = self.store.team
            if team is not None:
                team.client  # noqa: B018 - connects
        except StoreError as exc:
            raise ConfigError(str(exc)) from None

    # -- scorers (see :class:`~pytest_llmbias.scoring.session_scorers.SessionScorers`) ---------------

    @property
    def features(self) -> FeatureRegistry:
        return self.scorers.features

    @property
    def feature_store(self) -> FeatureStore:
        return self.scorers.feature_store

    def embedding_scorer(self) -> EmbeddingScorer:
        return self.scorers.embedding_scorer()

    def prefetch_embeddings(self, instruction: str | None) -> FollowUp:
        return self.scorers.prefetch_embeddings(instruction)

    def feature_values(
        self, feature: str, texts: Sequence[str], references: Sequence[str | None] | None = None
    ) -> list[float]:
        return self.scorers.feature_values(feature, texts, references)

    @property
    def redact(self) -> Redactor:
        """Masks the credentials of every configured model (keys read from the environment now).
        From its first use to :meth:`close`, every log record of the process is masked too."""
        if self._redactor is None:
            s = self.settings
            secrets = Redactor.for_models([*s.roster, *s.panel]).secrets
            if s.store.url:
                import os

                from pytest_llmbias.store.redis_store import url_secrets

                secrets += (*url_secrets(s.store.url), os.environ.get(s.store.password_env or "", ""))
            self._redactor = Redactor(secrets)
            if self._redactor.secrets:
                self._log_mask = LogMask(self._redactor).install()
        return self._redactor

    def check_applications(self) -> ModelRegistry:
        """The callables ``{python: NAME}`` entries name (``add_models``, the plugin's
        ``pytest_llmbias_add_models`` hook, asked once), each Python target checked against them
        before any call (see :func:`~pytest_llmbias.clients.python_target.check_callables`)."""
        if self._model_registry is None:
            from pytest_llmbias.clients.python_target import check_callables

            self._model_registry = check_callables((*self.settings.roster, *self.settings.panel), self.add_models)
        return self._model_registry

    def client(self, spec: ModelSpec) -> ModelClient:
        if spec.recorded is not None:
            from pytest_llmbias.clients.recorded import RecordedClient

            return RecordedClient(spec)  # type: ignore[return-value]
        if spec.alias not in self._clients:
            c = self.settings.collection
            adaptive, limiter, tokens = self.limits.of(spec.model, spec.api_base, self.store.team)
            if self._direct is None:
                self._direct = OpenAITransport()
            self._clients[spec.alias] = ModelClient(
                spec,
                timeout=c.timeout,
                policy=RetryPolicy(retries=c.retries),
                limiter=limiter,
                redact=self.redact,
                budget=self.budget,
                direct=self._direct,
                adaptive=adaptive,
                tokens=tokens,
                registry=self.check_applications() if spec.python is not None else None,
                faults=self.limits.faults,
            )
        return self._clients[spec.alias]

    def backoff_note(self) -> str | None:
        """What the adaptive limits have backed off to and why, for the progress line ("rate
        limited: openai/m at 6 of 32 in flight"); None while every endpoint runs at the configured
        concurrency."""
        return self.limits.note()

    # -- planning and collection -------------------------------------------------------------

    def plan(self, request: ResponseRequest, then: Sequence[FollowUp] = ()) -> list[PlannedCall]:
        """Validate ``request`` against the roster and its domain, and add its calls, each with the
        follow-ups ``then``, to the plan."""
        with fewer_collections():  # thousands of calls that live to the run's end
            calls = plan_calls(request, self.settings, self.domain(request.domain), then)
        self.planned.extend(calls)
        self._collected = False
        return calls

    def plan_calls(self, calls: Sequence[PlannedCall]) -> None:
        """Add calls a gate built itself to the plan."""
        self.planned.extend(calls)
        self._collected = False

    def estimate(self) -> dict[str, dict[str, Any]]:
        """Per alias, what the plan needs before any call
        (see :func:`~pytest_llmbias.planning.estimate.estimate_plan`)."""
        from pytest_llmbias.planning.estimate import estimate_plan
        from pytest_llmbias.planning.probes import with_probes

        return with_probes(
            estimate_plan(self.planned, self.store.has, self.store.get, self.settings.generation.max_tokens), self
        )

    @property
    def settings_origin(self) -> Path:
        """Where a notice about the store or the domains points: the settings file (where both are
        configured), else the store's folder."""
        return self.settings.source or self.settings.store.dir

    @property
    def notices(self) -> list[str]:
        """What the user should know: about the store (say, that it was found emptied), and about
        domains that changed since the release compared against."""
        return (self._store.notices if self._store is not None else []) + list(self._changed.values())

    @property
    def pending(self) -> bool:
        """Whether planned calls are waiting for :meth:`ensure_collected`."""
        return bool(self.planned) and not self._collected

    def ensure_collected(self) -> CollectionReport | None:
        """Run the plan once (later calls return at once): every planned call and every call its
        follow-ups lead to, pipelined; then wait for background scoring. Under pytest-xdist the
        workers take turns on a lock in the store folder (:mod:`pytest_llmbias.store.lock`), so
        whichever runs first makes the calls and the others read them from the store."""
        if not self.pending:
            return None
        with fewer_collections():
            return self._collect_rounds()

    def _collect_rounds(self) -> CollectionReport:
        report, done = self.collect(self.planned), len(self.planned)
        while True:  # the rounds of group-sequential gates: each asks its next batch while its verdict is open
            self.scorers.drain()
            self._collected = True
            for advance in self._rounds:
                advance()
            if len(self.planned) == done:
                return report
            later = self.collect(self.planned[done:])
            self.reports[-1] = dataclasses.replace(later, later=later.total)  # asked after the first look
            report, done = report.merged(later), len(self.planned)

    def add_round(self, advance: Callable[[], None]) -> None:
        """Call ``advance`` after each collection; the calls it plans are collected next (see
        :mod:`pytest_llmbias.engine.sequential_gate`)."""
        self._rounds.append(advance)

    def share_specs(self, pairs: Sequence[tuple[Any, Any]]) -> None:
        """Each gate's spec as its marker gave it, with the spec at its part of ``suite.alpha``
        (see :mod:`pytest_llmbias.engine.suite_levels`), for :meth:`at_share`."""
        self._shares = {id(given): (given, shared) for given, shared in pairs}

    def at_share(self, spec: Any) -> Any:
        """``spec`` (as its marker gave it) at its part of ``suite.alpha`` before Holm's step-down
        (the level it cannot go below), or ``spec`` itself when the run shares none."""
        given, shared = self._shares.get(id(spec), (None, spec))
        return shared if given is spec else spec

    def collect(self, planned: Sequence[PlannedCall]) -> CollectionReport:
        """Make sure every call in ``planned`` (and its follow-ups) has a response or a recorded error."""
        s = self.settings
        with self._collection_lock() as lock:
            if self.fingerprints is None:  # the probes first, before any answer is served
                from pytest_llmbias.planning.probes import check_fingerprints

                self.fingerprints = check_fingerprints(self, lambda c: self._loop.run(lock.beating(c) if lock else c))
            batches = batch_runner(self.store, s) if s.collection.batch and not s.store.offline else None
            work = collect(
                planned,
                store=self.store,
                client=(batches.wrap if batches else lambda f: f)(lambda alias: self.client(self.model(alias))),
                concurrency=batches.concurrency if batches else s.collection.concurrency,
                offline=s.store.offline,
                on_progress=self.on_progress,
                claim_ttl=s.collection.lock_timeout,
                faults=self.limits.faults,
            )
            work = batches.closing(work) if batches else work
            report = self._loop.run(lock.beating(work) if lock is not None else work)
        self.errors.update(report.errors)
        self.reports.append(report)
        return report

    def _collection_lock(self) -> contextlib.AbstractContextManager[CollectionLock | None]:
        """The store's collection lock (see :mod:`pytest_llmbias.store.lock`); none when nothing
        is written (offline, or ``cache: off``)."""
        if self.settings.store.offline or self.settings.store.cache == "off" or self.settings.store.url:
            return contextlib.nullcontext()  # a team store: each call is claimed instead
        return CollectionLock(self.settings.store.dir, stale_after=self.settings.collection.lock_timeout)

    # -- reading -----------------------------------------------------------------------------

    def responses(self, request: ResponseRequest) -> ResponseSet:
        """The responses ``request`` asked for, collected first if need be. Raises
        :class:`MissingResponsesError` naming every model and question id without a response
        (offline miss or failed call)."""
        self.ensure_collected()
        with fewer_collections():
            return read_responses(request, self.settings, self.domain(request.domain), self.store.get, self.errors)

    def read_calls(self, calls: Sequence[tuple[str, str, ModelCall]], what: str) -> dict[str, Response]:
        """The response of each (alias, label, call) a gate built itself, by call key, collected
        first if need be. Raises :class:`MissingResponsesError` naming every alias and label
        without one, in the wording of :func:`~pytest_llmbias.planning.request.missing_error`."""
        from pytest_llmbias.planning.request import read_calls

        self.ensure_collected()
        with fewer_collections():
            return read_calls(calls, what, self.store.get, self.errors, offline=self.settings.store.offline)

    # -- direct calls (fixtures) -------------------------------------------------------------

    async def complete(self, spec: ModelSpec, call: ModelCall, *, question: str | None = None) -> Response:
        """One call through the store: a stored response if there is one, else the model (unless
        offline). Runs on the session loop."""
        store = self.store
        store.label(call.key, alias=spec.alias, question=question)
        cached = store.get(call.key)
        if cached is not None:
            return cached
        if self.settings.store.offline:
            raise MissingResponsesError(
                f"offline mode: no stored response of {spec.alias!r} ({spec.model}) to "
                f"{call.prompt_excerpt!r} (sample {call.sample}); run once online, or add a snapshot"
            )
        response = await self.client(spec).complete(call)
        store.put(response)
        return response

    def fingerprint_entries(self) -> list[dict[str, Any]]:
        """The run's fingerprints for its reports (see :func:`~pytest_llmbias.planning.probes.report_entries`)."""
        from pytest_llmbias.planning.probes import report_entries

        return report_entries(self.fingerprints or [], self._store, self._releases.values())

    def usage(self) -> dict[str, dict[str, Any]]:
        """Per alias, the calls this session made over the network (not those served by the store)
        and their tokens: ``{alias: {"model", "calls", "prompt_tokens", "completion_tokens"}}``."""
        out: dict[str, dict[str, Any]] = {}
        if self._store is None:
            return out
        store = self._store
        asked = [
            (store.labels_of(k).get("alias", r.call.model), r) for k, r in store.used.items() if r.source == "network"
        ]
        for alias, response in (*asked, *self.unstored_calls):
            if response.source != "network":
                continue
            entry = out.setdefault(
                alias, {"model": response.call.model, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
            )
            entry["calls"] += 1
            entry["prompt_tokens"] += int(response.prompt_tokens or 0)
            entry["completion_tokens"] += int(response.completion_tokens or 0)
        return out

    def run(self, coro: Any) -> Any:
        return self._loop.run(coro)

    async def run_async(self, coro: Any) -> Any:
        return await self._loop.run_async(coro)

    # -- end ---------------------------------------------------------------------------------

    def export(self, path: Path) -> Path | None:
        """Write the responses this session used to ``path`` (a worker writes its own part file,
        which :func:`~pytest_llmbias.store.snapshot.merge_export_parts` joins). Returns the file
        written, or None when no store was opened (nothing was asked of a model)."""
        if self._store is None:
            return None
        asked, path = path, export_part_path(path, self.worker_id, self.run_id) if self.worker_id else path
        models = (*self.settings.roster, *self.settings.panel)
        try:
            self._store.export(path, {m.alias: m.system_hash for m in models if m.system_hash is not None})
        except OSError as exc:  # the file asked for named, not a worker's part of it
            raise StoreError(f"--llmbias-export: {asked} cannot be written ({type(exc).__name__}: {exc})") from None
        return path

    def close(self) -> None:
        try:
            if self.settings.store.export is not None:
                self.exported = self.export(self.settings.store.export)
            if self.settings.release.record and self._store is not None:
                from pytest_llmbias.releases.record import write_release_answers

                self.recorded = write_release_answers(self._store, self.settings, self.worker_id, self.run_id)
        finally:
            if self._log_mask is not None:
                self._log_mask.uninstall()
            self.scorers.stop_prefetching()
            if self._direct is not None and self._direct.open:
                with contextlib.suppress(Exception):
                    self._loop.run(self._direct.aclose())
            self._loop.close(last=[self._store.release_thread] if self._store is not None else [])
            if self._store is not None:
                self._store.close()
            self.scorers.close()
            if self._shelf is not None:
                self._shelf.prune()
                keep_between_runs(self._shelf_before)
