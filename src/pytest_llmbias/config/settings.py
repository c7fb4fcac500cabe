"""One frozen :class:`Settings`, resolved once per session (see
:mod:`pytest_llmbias.config.settings_sources` for where each value comes from and how it is checked). API
keys are only ever read from the environment, by name (``api_key_env``), at call time; they are
never stored.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmbias.choices import CacheMode, Choice, JudgeCombine
from pytest_llmbias.config.app_targets import HttpApp
from pytest_llmbias.config.benchmark_sources import DATASETS as BENCHMARK_DATASETS, PAIRED_LIMITS, BenchmarkSource
from pytest_llmbias.config.bounds import MAX_CALLS_DEFAULT
from pytest_llmbias.config.mlflow_settings import MlflowSettings
from pytest_llmbias.config.option_table import SETTINGS_OPTIONS
from pytest_llmbias.config.options import MIN_AGREEMENT_DEFAULT, RETEST_DEFAULT, Option
from pytest_llmbias.config.redaction import MASK, merge_credentials, split_credentials, strip_userinfo
from pytest_llmbias.errors import ConfigError

CONFIG_FILENAME = "llmbias.yaml"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class ModelSpec:
    """A model as litellm addresses it (or an application: ``python``, ``http``), plus how this
    project names it in reports.

    ``api_key_env`` names the environment variable that holds the key; the key itself is read at
    call time and never kept. ``params`` are extra completion parameters for this model only.
    """

    model: str
    alias: str
    api_base: str | None = None
    api_key_env: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    #: ``auto`` | ``litellm`` | ``openai``: how calls travel; never part of a call's identity, so
    #: an answer stored through one transport is served to the other
    transport: str = "auto"
    #: as a judge, ask for a JSON answer through ``response_format`` (a JSON schema): True, False,
    #: or None for auto (the 1-10 judge: yes at an ``api_base``, where OpenAI-compatible servers
    #: take a schema, elsewhere when litellm says the model supports one; the pair judge of
    #: ``bias_evenhanded``: no, it reads a letter's log-probabilities unless True)
    structured: bool | None = None
    #: as a judge, ask for log-probabilities (``logprobs``, ``top_logprobs``) and read its score
    #: as their expectation: True, False, or None for auto (see
    #: :func:`~pytest_llmbias.scoring.judge_calls.asks_logprobs`); False for a provider that rejects them
    logprobs: bool | None = None
    #: a deployment's system prompt, sent first with every call to this entry (part of the call's
    #: identity: a changed prompt asks again)
    system: str | None = None
    #: chat turns (role, content) placed after the system prompt, before every question
    messages: tuple[tuple[str, str], ...] = ()
    #: a recorded release's answers file: this entry's calls are served from it and never made
    recorded: str | None = None
    #: the alias the recorded target had: what seeded its calls then (say, the order of a
    #: preference trial), so that the same calls are built again
    recorded_as: str | None = None
    #: the entry's ``version``: part of every call's identity, so a new version is asked again
    #: and never served a predecessor's answers (None: the identity of an entry without one)
    version: str | None = None
    #: a Python target: ``package.module:function``, or the name of a callable registered
    #: through ``pytest_llmbias_add_models`` (``model`` is then ``python:`` and this)
    python: str | None = None
    #: an HTTP application (``model`` is then ``http:METHOD URL``)
    http: HttpApp | None = field(default=None, hash=False)

    @property
    def is_app(self) -> bool:
        """Whether this entry is an application (a Python target or an HTTP app), not a model
        that litellm or the OpenAI-compatible transport calls."""
        return self.python is not None or self.http is not None

    def app_secrets(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """The credential values of an HTTP application's headers (none for other entries)."""
        return self.http.secrets(environ) if self.http is not None else []

    @property
    def system_hash(self) -> str | None:
        """The first 12 hex digits of the system prompt's sha256, as reports name it."""
        if self.system is None:
            return None
        import hashlib

        return hashlib.sha256(self.system.encode("utf-8")).hexdigest()[:12]

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The API key from the environment, or None when no variable is named."""
        if self.api_key_env is None:
            return None
        env = os.environ if environ is None else environ
        value = env.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"model {self.alias!r} ({self.model}) reads its API key from ${self.api_key_env}, which is not set"
            )
        return value

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view without credentials: the URL's user info is dropped and
        credential params (and headers) read ``***``."""
        public, secret = split_credentials(self.params)
        masked = {k: ({h: MASK for h in v} if isinstance(v, Mapping) else MASK) for k, v in secret.items()}
        return {
            "model": self.model,
            "alias": self.alias,
            "api_base": strip_userinfo(self.api_base),
            "api_key_env": self.api_key_env,
            "params": merge_credentials(public, masked),
            "transport": self.transport,
            "structured": self.structured,
            "system": self.system,
            "system_hash": self.system_hash,
            "messages": [{"role": r, "content": c} for r, c in self.messages],
            # only when set: the view of an entry without them stays as it was
            **({"version": self.version} if self.version is not None else {}),
            **({"logprobs": self.logprobs} if self.logprobs is not None else {}),
            **({"python": self.python} if self.python is not None else {}),
            **({"http": self.http.to_dict()} if self.http is not None else {}),
        }


@dataclass(frozen=True)
class GenerationSettings:
    """Sampling parameters sent with every question. Sample ``i`` is sent with ``seed + i``."""

    temperature: float = 0.7
    max_tokens: int = 512
    samples: int = 1
    seed: int | None = 0


#: the share of a model's answers a gate may drop as unreadable, when neither marker nor run says
DEFAULT_MAX_UNPARSED = 0.1
#: a model none of whose first this many answers can be read does not follow its instruction: a
#: gate stops asking it (a judge) and is inconclusive
GIVE_UP_AFTER = 10


@dataclass(frozen=True)
class CollectionSettings:
    """How calls are made: ``concurrency`` calls in flight at most (each endpoint's adaptive limit
    starts there and backs off on 429/503), ``rpm`` starts per minute and ``tpm`` tokens per minute
    per endpoint, a model at an ``api_base`` (0: no cap, the default), ``timeout`` seconds a call,
    ``retries`` further tries on retryable errors.
    ``lock_timeout``: seconds a process waiting for the store's collection lock tolerates no sign
    of life from its holder before it fails (see :mod:`pytest_llmbias.store.lock`). ``max_cost``: a
    budget in USD (see :mod:`pytest_llmbias.clients.pricing`); ``max_unparsed``: the share of a
    model's answers that may stay unreadable (a gate drops them, above it is inconclusive);
    ``plan``: plan and stop, calling nothing. ``looks`` and ``spending``: the group-sequential
    design of every gate whose marker sets none (1: ask everything, then decide). ``max_samples``:
    the most samples of each item an underpowered comparison may ask (see
    :mod:`pytest_llmbias.engine.extension`; 5 by default, chosen in ``benchmarks/sampling_budget.py``;
    1: none beyond its own). ``fingerprint``: ask each model
    a few fixed probes first and serve no answer of a predecessor (see
    :mod:`pytest_llmbias.store.fingerprints`); ``no_fingerprint`` (the command line's way) turns it off.
    ``batch``: calls go through the provider's Batch API (see :mod:`pytest_llmbias.clients.batching`),
    each batch polled for at most ``batch_wait`` seconds (None: until it ends)."""

    concurrency: int = 32
    rpm: int = 0
    tpm: int = 0
    timeout: float = 60.0
    retries: int = 5
    lock_timeout: float = 120.0
    max_cost: float | None = None
    max_unparsed: float = DEFAULT_MAX_UNPARSED
    plan: bool = False
    looks: int = 1
    spending: str = "obrien-fleming"
    max_samples: int = 5
    fingerprint: bool = True
    no_fingerprint: bool = False
    #: the most calls one request (a marker's models x questions x samples) may plan: more is
    #: refused before the plan is built (see :mod:`pytest_llmbias.config.bounds`)
    max_calls: int = MAX_CALLS_DEFAULT
    batch: bool = False
    batch_wait: float | None = None

    @property
    def fingerprints(self) -> bool:
        """Whether the models are fingerprinted before a run that may call them."""
        return self.fingerprint and not self.no_fingerprint


@dataclass(frozen=True)
class StoreSettings:
    """Where responses live. ``cache``: use | refresh | off. ``offline`` never calls a model.
    ``snapshots`` are JSONL files replayed read-only beneath the store; ``export`` writes the
    responses the session used to a JSONL file."""

    dir: Path = Path(".llmbias")
    cache: CacheMode = CacheMode.USE
    offline: bool = False
    snapshots: tuple[Path, ...] = ()
    export: Path | None = None
    #: a team store: ``redis://HOST:PORT/DB`` (``rediss://`` for TLS) keeps the responses in Redis,
    #: shared by every process and machine that names it (see :mod:`pytest_llmbias.store.redis_store`);
    #: ``dir`` then holds only what this machine keeps for itself (embeddings, and answers received
    #: while Redis was unreachable, uploaded on the next run)
    url: str | None = None
    #: the environment variable holding the Redis password (else the URL's own, if any)
    password_env: str | None = None

    @property
    def domain_cache(self) -> Path | None:
        """The folder where domain files' parsed YAML is kept between runs (``<dir>/domains``);
        None when the store writes nothing (offline, or ``cache: off``)."""
        return None if self.offline or self.cache == CacheMode.OFF else Path(self.dir) / "domains"


@dataclass(frozen=True)
class ReportSettings:
    """Reports written at the end of a run: ``json``, the versioned JSON document of every gate's
    result (see :mod:`pytest_llmbias.report.json_report`), and ``html``, the page rendered from
    that document (:mod:`pytest_llmbias.report.html`)."""

    json: Path | None = None
    html: Path | None = None
    #: the run in Markdown for a pull request (see :mod:`pytest_llmbias.report.markdown`)
    markdown: Path | None = None
    #: the run history's SQLite file (relative to the rootdir), None for ``<store.dir>/history.sqlite``,
    #: ``"off"`` for none (see :mod:`pytest_llmbias.report.history`)
    history: str | None = None


@dataclass(frozen=True)
class ReleaseSettings:
    """Releases (see :mod:`pytest_llmbias.releases.release`): ``record`` writes the target's answers of this
    run as release NAME under ``dir`` (``force``: over an existing one); ``against`` (a name under
    ``dir``, or a release folder's path) compares the target with that recorded release instead of
    the baselines; ``anchor`` (a name or a path too) is the pinned release that every comparison
    with a release is decided against as well, so that a chain of small regressions, each passed
    against the one before it, still fails once it has drifted from the anchor by a margin (see
    :mod:`pytest_llmbias.engine.anchored`)."""

    record: str | None = None
    against: str | None = None
    anchor: str | None = None
    dir: Path = Path("bias_releases")
    force: bool = False


@dataclass(frozen=True)
class SuiteSettings:
    """The session as a family of gates: ``alpha``, the chance that a release as good as its
    comparator fails any gate of the run, shared out among the gates (Holm's step-down; None: each
    gate at its own rate); ``power``, the chance that a release worse by a gate's margin fails that
    gate (every comparison's TOST is at 1 − power); ``strict``: a pass that rests on a violation
    not shown, by a check with less than 80 % power, fails."""

    alpha: float | None = 0.05
    power: float = 0.8
    strict: bool = False

    def __post_init__(self) -> None:
        a = self.alpha
        if a is not None and (isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 < a < 1):
            raise ConfigError(f"suite.alpha must lie strictly between 0 and 1, got {a!r}")
        p = self.power
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.5 < p < 1:
            raise ConfigError(f"suite.power must lie strictly between 0.5 and 1, got {p!r}")


@dataclass(frozen=True)
class JudgingSettings:
    """How the judge is trusted: ``rubric``, the rubric file for domains that name none (None: the
    built-in); ``combine``, how several judges' scores of one answer are combined (None: mean; set
    only with two judges or more); ``retest``, answers per gate each judge rates twice (0: none);
    ``min_agreement``, the least test-retest agreement (Krippendorff's alpha) accepted."""

    rubric: Path | None = None
    combine: JudgeCombine | None = None
    retest: int = RETEST_DEFAULT
    min_agreement: float = MIN_AGREEMENT_DEFAULT


@dataclass(frozen=True)
class EmbeddingSettings:
    """The sentence-transformers model (hub name or local path) and an instruction override."""

    model: str = DEFAULT_EMBEDDING_MODEL
    instruction: str | None = None
    batch_size: int = 64


@dataclass(frozen=True)
class DomainSettings:
    """Folders (or files) searched for domain YAML before the built-in domains (``paths``), and
    where the public benchmarks' data are (``bbq``, ``discrim_eval``, ``evenhandedness``: see
    :mod:`pytest_llmbias.config.benchmark_sources`)."""

    paths: tuple[Path, ...] = ()
    bbq: BenchmarkSource | None = None
    discrim_eval: BenchmarkSource | None = None
    evenhandedness: BenchmarkSource | None = None

    def benchmark(self, dataset: str) -> BenchmarkSource | None:
        """The configured source of ``dataset`` (``bbq`` or ``discrim_eval``), or None."""
        return getattr(self, dataset, None) if dataset in BENCHMARK_DATASETS else None

    def paired(self, name: str) -> BenchmarkSource | None:
        """The configured published paired-prompt file that is the domain ``name``
        (``evenhandedness``), or None."""
        return getattr(self, name, None) if name in PAIRED_LIMITS else None


@dataclass(frozen=True)
class FeatureSettings:
    """A named feature from a Hugging Face text-classification model (the ``features`` section).

    The feature value of a text is ``Σ weights[label] · P(label)``; ``label: X`` is short for
    ``weights: {X: 1}``. With neither, a model whose labels include positive and negative gives
    P(positive) − P(negative)."""

    name: str
    classifier: str
    label: str | None = None
    weights: Mapping[str, float] | None = field(default=None, hash=False)
    batch_size: int = 32
    max_length: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "classifier": self.classifier,
            "label": self.label,
            "weights": dict(self.weights) if self.weights is not None else None,
            "batch_size": self.batch_size,
            "max_length": self.max_length,
        }


@dataclass(frozen=True)
class Settings:
    """Everything the plugin reads from configuration, resolved once."""

    target: ModelSpec | None = None
    baselines: tuple[ModelSpec, ...] = ()
    judge: ModelSpec | None = None
    #: several judges (``judges:``); ``judge`` is then the first of them
    judges: tuple[ModelSpec, ...] = ()
    judging: JudgingSettings = JudgingSettings()
    generation: GenerationSettings = GenerationSettings()
    collection: CollectionSettings = CollectionSettings()
    store: StoreSettings = StoreSettings()
    report: ReportSettings = ReportSettings()
    mlflow: MlflowSettings = MlflowSettings()
    release: ReleaseSettings = ReleaseSettings()
    suite: SuiteSettings = SuiteSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    domains: DomainSettings = DomainSettings()
    features: tuple[FeatureSettings, ...] = ()
    #: gate kind -> its default margin, a number or one per method (``margins:``; see
    #: :mod:`pytest_llmbias.config.margins`)
    margins: Mapping[str, Any] = field(default_factory=dict, hash=False)
    source: Path | None = None

    @property
    def roster(self) -> tuple[ModelSpec, ...]:
        """The target followed by the baselines."""
        return ((self.target,) if self.target else ()) + self.baselines

    @property
    def panel(self) -> tuple[ModelSpec, ...]:
        """Every judge: ``judges``, else ``judge`` alone, else none."""
        return self.judges or ((self.judge,) if self.judge else ())

    @property
    def comparators(self) -> tuple[ModelSpec, ...]:
        """What the target is compared with: the recorded release of ``release.against`` (which
        :func:`pytest_llmbias.releases.release.apply_release` puts first among the baselines), else the
        baselines."""
        return self.baselines[:1] if self.release.against else self.baselines

    @property
    def context(self) -> tuple[ModelSpec, ...]:
        """The configured baselines shown beside a recorded release (none without one)."""
        return self.baselines[1:] if self.release.against else ()

    def model(self, alias: str) -> ModelSpec:
        for spec in (*self.roster, *self.panel):
            if spec.alias == alias:
                return spec
        known = ", ".join(s.alias for s in self.roster) or "none"
        raise ConfigError(f"no model with alias {alias!r} (known: {known})")

    def require_roster(self, min_baselines: int = 1) -> None:
        """Raise :class:`ConfigError` unless a target and ``min_baselines`` baselines are configured."""
        where = f" in {self.source}" if self.source else ""
        if self.target is None:
            target = OPTION_BY_KEY["target"]
            raise ConfigError(
                f"no target model configured{where}: set 'target' in {CONFIG_FILENAME}, "
                f"pass {target.flag} MODEL, or set {target.env} (or the ini option {target.ini})"
            )
        if len(self.baselines) < min_baselines:
            baselines = OPTION_BY_KEY["baselines"]
            raise ConfigError(
                f"{len(self.baselines)} baseline model(s) configured{where}, at least {min_baselines} "
                f"needed: list them under 'baselines' in {CONFIG_FILENAME} or pass "
                f"{baselines.flag} MODEL once per model"
            )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view, with no secrets (API keys are never held)."""

        def convert(value: Any) -> Any:
            if isinstance(value, (Path, Choice)):
                return str(value)
            if isinstance(value, (ModelSpec, FeatureSettings, BenchmarkSource)):
                return value.to_dict()
            if dataclasses.is_dataclass(value):
                return {f.name: convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
            if isinstance(value, (tuple, list)):
                return [convert(v) for v in value]
            return value

        return convert(self)


#: settings key ("store.offline") -> the option that also sets it outside the file
OPTION_BY_KEY: dict[str, Option] = {o.key: o for o in SETTINGS_OPTIONS}
