"""The core object behind a pytest session: the plan of calls, the store, the clients, the loop.

The plugin registers each marked test's spec here at collection time, asks for the batch to run
once before the first marked test, and reads each test's responses from here. Nothing here
imports pytest.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmbias.aio import LoopThread
from pytest_llmbias.calls import ModelCall, Response
from pytest_llmbias.collector import CollectionReport, PlannedCall, Progress, collect
from pytest_llmbias.domains import Domain, load_domain
from pytest_llmbias.errors import ConfigError, MissingResponsesError
from pytest_llmbias.gates.judging import MAX_REASKS, JudgeItem, JudgeOutcome, resolve_judgements
from pytest_llmbias.markers import EquivalentSpec, ImpactRatioSpec, ResponsesSpec
from pytest_llmbias.models.client import ModelClient
from pytest_llmbias.models.ratelimit import RateLimiter
from pytest_llmbias.models.retry import RetryPolicy
from pytest_llmbias.responses import (
    ResponseSet,
    check_domain_selection,
    describe_missing,
    plan_responses,
    select_models,
)
from pytest_llmbias.settings import ModelSpec, Settings
from pytest_llmbias.store.responses import ResponseStore
from pytest_llmbias.store.snapshot import export_part_path

if TYPE_CHECKING:
    from pytest_llmbias.gates.equivalent import EquivalentResult
    from pytest_llmbias.gates.impact import ImpactRatioGateResult
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
    ) -> None:
        self.settings = settings
        self.add_features = add_features
        self.on_progress = on_progress
        self.worker_id = worker_id
        self.run_id = run_id
        self.planned: list[PlannedCall] = []
        self.reports: list[CollectionReport] = []
        self.errors: dict[str, str] = {}
        self._domains: dict[str, Domain] = {}
        self._store: ResponseStore | None = None
        self._clients: dict[str, ModelClient] = {}
        self._limiters: dict[str, RateLimiter] = {}
        self._loop = LoopThread()
        self._collected = False
        self._judge_gates: list[EquivalentSpec] = []
        self._scorers: dict[str, Any] = {}
        self._features: FeatureRegistry | None = None
        self._feature_store: FeatureStore | None = None

    # -- configuration ---------------------------------------------------------------------

    def domain(self, name: str) -> Domain:
        """Load a domain once per session (configured paths, then built-ins, or a file path)."""
        if name not in self._domains:
            self._domains[name] = load_domain(name, self.settings.domains.paths)
        return self._domains[name]

    @property
    def store(self) -> ResponseStore:
        if self._store is None:
            s = self.settings.store
            self._store = ResponseStore(s.dir, mode=s.cache, snapshots=s.snapshots, run_id=self.run_id)
        return self._store

    @property
    def features(self) -> FeatureRegistry:
        """The feature extractors: the built-ins, the ``features`` of the settings file, then
        whatever ``add_features`` (the plugin's ``pytest_llmbias_add_features`` hook) registers."""
        if self._features is None:
            from pytest_llmbias.scoring.features import ClassifierExtractor, FeatureRegistry, register_builtin_features

            registry = FeatureRegistry()
            register_builtin_features(registry, embedding_scorer_factory=self.embedding_scorer)
            for f in self.settings.features:
                registry.register(
                    f.name,
                    lambda f=f: ClassifierExtractor(
                        f.classifier,
                        name=f.name,
                        label=f.label,
                        weights=f.weights,
                        batch_size=f.batch_size,
                        max_length=f.max_length,
                    ),
                    replace=True,
                )
            if self.add_features is not None:
                self.add_features(registry)
            self._features = registry
        return self._features

    @property
    def feature_store(self) -> FeatureStore:
        """Feature values, stored like embeddings under ``<store dir>/features``."""
        if self._feature_store is None:
            from pytest_llmbias.scoring.features import FeatureStore

            off = self.settings.store.cache == "off"
            self._feature_store = FeatureStore() if off else FeatureStore.for_store(self.settings.store.dir)
        return self._feature_store

    def embedding_scorer(self) -> EmbeddingScorer:
        """The configured embedding model, loaded once per session, with its on-disk cache."""
        from pytest_llmbias.scoring.embedding import EmbeddingScorer
        from pytest_llmbias.store.blobs import BlobCache

        e = self.settings.embedding
        if e.model not in self._scorers:
            cache = None if self.settings.store.cache == "off" else BlobCache.for_store(self.settings.store.dir)
            self._scorers[e.model] = EmbeddingScorer(e.model, cache=cache, batch_size=e.batch_size)
        return self._scorers[e.model]

    def client(self, spec: ModelSpec) -> ModelClient:
        if spec.alias not in self._clients:
            c = self.settings.collection
            limiter = self._limiters.setdefault(spec.model, RateLimiter(c.rpm))
            self._clients[spec.alias] = ModelClient(
                spec, timeout=c.timeout, policy=RetryPolicy(retries=c.retries), limiter=limiter
            )
        return self._clients[spec.alias]

    # -- planning and collection -------------------------------------------------------------

    def plan(self, spec: ResponsesSpec | EquivalentSpec | ImpactRatioSpec) -> list[PlannedCall]:
        """Validate ``spec`` against the roster and domain, and add its calls to the batch.

        A gate that uses the judge also has its judge calls made, in further batches, once the
        responses they rate are in."""
        if isinstance(spec, ImpactRatioSpec):
            return self.plan(self._impact_responses(spec))
        if isinstance(spec, EquivalentSpec):
            self.settings.require_roster(min_baselines=2)
            if "judge" in spec.methods:
                if self.settings.judge is None:
                    raise ConfigError(
                        "the judge method needs a judge model: set 'judge' in llmbias.yaml or pass --llmbias-judge MODEL"
                    )
                self._judge_gates.append(spec)
            return self.plan(spec.responses())
        domain = self.domain(spec.domain)
        check_domain_selection(spec, domain)
        calls = plan_responses(spec, self.settings, domain)
        self.planned.extend(calls)
        self._collected = False
        return calls

    @property
    def pending(self) -> bool:
        """Whether planned calls are waiting for :meth:`ensure_collected`."""
        return bool(self.planned) and not self._collected

    def ensure_collected(self) -> CollectionReport | None:
        """Run the planned batch once (later calls return at once). Under pytest-xdist the workers
        take turns on a lock in the store folder, so whichever runs first makes the calls and the
        others read them from the store."""
        if not self.pending:
            return None
        report = self.collect(self.planned)
        for _ in range(MAX_REASKS + 1):
            pending = [call for spec in self._judge_gates for call in self._judge_outcome(spec).pending]
            if not pending or self.settings.store.offline:
                break
            judged = self.collect(pending)
            report = _merge_reports(report, judged)
            if judged.fetched == 0:
                break
        self._collected = True
        return report

    def collect(self, planned: Sequence[PlannedCall]) -> CollectionReport:
        """Make sure every call in ``planned`` has a response (or a recorded error)."""
        clients = {alias: self.client(self.settings.model(alias)) for alias in {p.alias for p in planned}}
        s = self.settings
        with self._collection_lock():
            report = self._loop.run(
                collect(
                    planned,
                    store=self.store,
                    clients=clients,
                    concurrency=s.collection.concurrency,
                    offline=s.store.offline,
                    on_progress=self.on_progress,
                )
            )
        self.errors.update(report.errors)
        self.reports.append(report)
        return report

    @contextlib.contextmanager
    def _collection_lock(self) -> Iterator[None]:
        if self.settings.store.offline or self.settings.store.cache == "off":
            yield
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: workers may duplicate calls
            yield
            return
        directory = self.settings.store.dir
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / "collect.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- reading -----------------------------------------------------------------------------

    def response_set(self, spec: ResponsesSpec) -> ResponseSet:
        """The responses ``spec`` asked for. Raises :class:`MissingResponsesError` naming every
        model and question id without a response (offline miss or failed call)."""
        self.ensure_collected()
        domain = self.domain(spec.domain)
        questions = domain.select(spec.categories)
        models = select_models(self.settings, spec.models)
        samples = spec.samples or self.settings.generation.samples
        found: dict[tuple[str, str, int], Response] = {}
        missing: dict[str, list[str]] = {}
        errors: dict[str, str] = {}
        for model in models:
            for q in questions:
                for s in range(samples):
                    call = ModelCall.build(model, q.text, self.settings.generation, sample=s)
                    response = self.store.get(call.key)
                    if response is None:
                        label = q.id if samples == 1 else f"{q.id}#{s}"
                        missing.setdefault(model.alias, []).append(label)
                        if call.key in self.errors:
                            errors[call.key] = self.errors[call.key]
                    else:
                        found[(model.alias, q.id, s)] = response
        if missing:
            n = sum(len(v) for v in missing.values())
            if errors:
                why = f"{len(errors)} call(s) failed"
            elif self.settings.store.offline:
                why = "offline mode, and they are neither in the store nor in a snapshot"
            else:
                why = "they were not collected"
            raise MissingResponsesError(
                f"{n} response(s) for domain {domain.name!r} are missing ({why}):\n"
                + describe_missing(missing, errors)
            )
        target = self.settings.target.alias if self.settings.target else None
        aliases = tuple(m.alias for m in models)
        return ResponseSet(
            domain=domain,
            questions=questions,
            aliases=aliases,
            target=target if target in aliases else None,
            baselines=tuple(b.alias for b in self.settings.baselines if b.alias in aliases),
            samples=samples,
            responses=found,
        )

    # -- gates -----------------------------------------------------------------------------------

    def _judge_items(self, spec: EquivalentSpec, responses: ResponseSet | None = None) -> list[JudgeItem]:
        domain = self.domain(spec.domain)
        samples = spec.samples or self.settings.generation.samples
        items = []
        for model in self.settings.roster:
            for q in domain.select(spec.categories):
                for s in range(samples):
                    if responses is not None:
                        text = responses.text(model.alias, q.id, s)
                    else:
                        found = self.store.get(ModelCall.build(model, q.text, self.settings.generation, sample=s).key)
                        if found is None:
                            continue
                        text = found.text
                    items.append(JudgeItem(model.alias, q.id, q.text, s, text))
        return items

    def _judge_outcome(self, spec: EquivalentSpec, responses: ResponseSet | None = None) -> JudgeOutcome:
        assert self.settings.judge is not None
        domain = self.domain(spec.domain)
        return resolve_judgements(
            self._judge_items(spec, responses),
            focus=domain.focus,
            judge=self.settings.judge,
            store=self.store,
            domain=domain.name,
        )

    def judge_scores(self, spec: EquivalentSpec, responses: ResponseSet) -> dict[str, dict[str, float]]:
        """Alias -> question id -> the judge's score (mean over samples). Raises
        :class:`MissingResponsesError` when a judge answer is missing or never parsed."""
        import statistics

        self.ensure_collected()
        outcome = self._judge_outcome(spec, responses)
        if outcome.pending or outcome.failures:
            missing: dict[str, list[str]] = {}
            for call in outcome.pending:
                missing.setdefault(call.alias, []).append(call.question or call.call.key[:12])
            errors = {c.call.key: self.errors[c.call.key] for c in outcome.pending if c.call.key in self.errors}
            if errors:
                why = "judge calls failed"
            elif outcome.pending:
                why = "offline mode" if self.settings.store.offline else "judge calls were not made"
            else:
                why = "unparsable judge answers"
            errors.update({f"parse:{i}": msg for i, msg in enumerate(outcome.failures.values())})
            raise MissingResponsesError(
                f"{len(outcome.pending) + len(outcome.failures)} judge score(s) for domain {spec.domain!r} "
                f"are missing ({why}):\n" + describe_missing(missing, errors)
            )
        by: dict[str, dict[str, list[int]]] = {}
        for item, score in outcome.scores.items():
            by.setdefault(item.alias, {}).setdefault(item.question_id, []).append(score)
        return {a: {q: float(statistics.fmean(v)) for q, v in qs.items()} for a, qs in by.items()}

    def embedding_scores(self, spec: EquivalentSpec, responses: ResponseSet) -> dict[str, dict[str, float]]:
        """Alias -> question id -> mean cosine deviation from the other models (eq. 1)."""
        from pytest_llmbias.scoring.embedding import embedding_deviations

        scorer = self.embedding_scorer()
        texts = {
            (alias, q.id): [responses.text(alias, q.id, s) for s in range(responses.samples)]
            for alias in responses.aliases
            for q in responses.questions
        }
        instruction = self.settings.embedding.instruction or responses.domain.instruction
        return embedding_deviations(scorer, texts, instruction)

    def _impact_responses(self, spec: ImpactRatioSpec) -> ResponsesSpec:
        """Check an impact-ratio gate against the roster, the domain and the features; the
        responses it needs (the target's, and the baselines' when there are any)."""
        self.settings.require_roster(min_baselines=1 if spec.calibrate == "baselines" else 0)
        if spec.feature not in self.features:
            from pytest_llmbias.scoring.features import FeatureError

            try:
                self.features.get(spec.feature)
            except FeatureError as exc:  # an unknown name: the message lists the known ones
                raise ConfigError(str(exc)) from None
        domain = self.domain(spec.domain)
        prompts = domain.counterfactual_prompts(spec.categories)
        if not prompts:
            raise ConfigError(
                f"domain {domain.name!r} has no counterfactual prompts"
                + (f" in categories {', '.join(spec.categories)}" if spec.categories else "")
                + ": bias_impact_ratio needs a 'counterfactual' section (templates or branches over concepts)"
            )
        groups = {_group_of(q, spec.group_by) for q in prompts}
        if len(groups) < 2:
            raise ConfigError(
                f"domain {domain.name!r} has a single {spec.group_by} ({next(iter(groups))!r}) among its "
                f"counterfactual prompts; group_by={spec.group_by!r} needs at least two to compare"
            )
        return spec.responses("all" if self.settings.baselines else "target")

    def gate(self, spec: EquivalentSpec | ImpactRatioSpec) -> EquivalentResult | ImpactRatioGateResult:
        """The result of one gate marker."""
        if isinstance(spec, ImpactRatioSpec):
            return self.impact_ratio(spec)
        return self.equivalent(spec)

    def feature_values(
        self, feature: str, texts: Sequence[str], references: Sequence[str | None] | None = None
    ) -> list[float]:
        """The feature's value of each text, through the feature store."""
        from pytest_llmbias.scoring.features import compute_features

        extractor = self.features.get(feature)
        return compute_features(extractor, texts, references, store=self.feature_store)

    def impact_ratio(self, spec: ImpactRatioSpec) -> ImpactRatioGateResult:
        """Extract, calibrate, group and test one ``bias_impact_ratio`` gate."""
        from pytest_llmbias.gates.impact import calibrate, evaluate_gate
        from pytest_llmbias.scoring.features import FeatureError

        responses = self.response_set(self._impact_responses(spec))
        target = responses.target
        assert target is not None
        prompts = [q for q in responses.questions if q.concept is not None]
        extractor = self.features.get(spec.feature)
        needs_reference = bool(getattr(extractor, "needs_reference", False))
        if needs_reference or spec.calibrate == "reference":
            lacking = [q.id for q in prompts if not q.reference]
            if lacking:
                why = f"feature {spec.feature!r}" if needs_reference else "calibrate='reference'"
                raise FeatureError(
                    f"{why} needs a reference text for every prompt, and {len(lacking)} prompt(s) of domain "
                    f"{spec.domain!r} have none (e.g. {', '.join(lacking[:3])}): add 'reference' to their "
                    "templates or branches in the domain file"
                )
        keys = [(a, q, s) for a in responses.aliases for q in prompts for s in range(responses.samples)]
        texts = [responses.text(a, q.id, s) for a, q, s in keys]
        refs = [q.reference for _, q, _ in keys] if needs_reference else None
        values = self.feature_values(spec.feature, texts, refs)
        raw: dict[str, dict[tuple[str, int], float]] = {}
        for (a, q, s), v in zip(keys, values):
            raw.setdefault(a, {})[(q.id, s)] = v
        references = None
        if spec.calibrate == "reference":
            ref_texts = [q.reference or "" for q in prompts]
            ref_values = self.feature_values(spec.feature, ref_texts, ref_texts if needs_reference else None)
            references = {q.id: v for q, v in zip(prompts, ref_values)}
        calibrated = calibrate(raw, spec.calibrate, baselines=responses.baselines, references=references)
        return evaluate_gate(
            spec,
            calibrated,
            {q.id: _group_of(q, spec.group_by) for q in prompts},
            domain=responses.domain.name,
            target=target,
            baselines=responses.baselines,
            samples=responses.samples,
        )

    def equivalent(self, spec: EquivalentSpec) -> EquivalentResult:
        """Score, test and judge one ``bias_equivalent`` gate."""
        from pytest_llmbias.gates.equivalent import EquivalentResult, evaluate_method, stability_warnings
        from pytest_llmbias.scoring.judge import relative_judge_deviation

        responses = self.response_set(spec.responses())
        target = responses.target
        assert target is not None
        categories = {q.id: q.category for q in responses.questions}
        methods = []
        warnings: list[str] = []
        for method in spec.methods:
            if method == "embedding":
                scores = self.embedding_scores(spec, responses)
                deviation = None
            else:
                scores = self.judge_scores(spec, responses)
                deviation = relative_judge_deviation(scores)
                judge = self.settings.judge
                if judge is not None and any(m.model == judge.model for m in self.settings.roster):
                    warnings.append(
                        f"judge: the judge {judge.model} is also in the roster; a judge may favour its own answers"
                    )
            methods.append(
                evaluate_method(
                    method,
                    scores,
                    target=target,
                    baselines=responses.baselines,
                    question_categories=categories,
                    spec=spec,
                    deviation=deviation,
                )
            )
        warnings = stability_warnings(methods) + warnings
        return EquivalentResult(
            domain=responses.domain.name,
            target=target,
            baselines=responses.baselines,
            n_questions=responses.n_questions,
            samples=responses.samples,
            k=spec.k,
            alpha=spec.alpha,
            methods=tuple(methods),
            warnings=tuple(warnings),
        )

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

    def run(self, coro: Any) -> Any:
        return self._loop.run(coro)

    async def run_async(self, coro: Any) -> Any:
        return await self._loop.run_async(coro)

    # -- end ---------------------------------------------------------------------------------

    def export(self, path: Path) -> int:
        """Write the responses this session used to ``path`` (a worker writes its own part file,
        which :func:`~pytest_llmbias.store.snapshot.merge_export_parts` joins). Returns the number
        of lines written."""
        if self._store is None:
            return 0
        if self.worker_id:
            path = export_part_path(path, self.worker_id)
        return self._store.export(path)

    def close(self) -> None:
        try:
            if self.settings.store.export is not None:
                self.export(self.settings.store.export)
        finally:
            self._loop.close()
            if self._store is not None:
                self._store.close()
            for scorer in self._scorers.values():
                if scorer.cache is not None:
                    scorer.cache.close()
            if self._feature_store is not None:
                self._feature_store.close()


def _group_of(question: Any, group_by: str) -> str:
    """The group a counterfactual prompt belongs to: its concept, or its concept group."""
    value = question.concept if group_by == "concept" else question.group
    return value if value is not None else "-"


def _merge_reports(a: CollectionReport, b: CollectionReport) -> CollectionReport:
    return CollectionReport(
        total=a.total + b.total,
        from_store=a.from_store + b.from_store,
        fetched=a.fetched + b.fetched,
        errors={**a.errors, **b.errors},
        missing=a.missing + b.missing,
        elapsed_s=a.elapsed_s + b.elapsed_s,
    )

