"""Every user-facing option, declared once: :data:`OPTIONS`.

An option is a setting (``store.offline``) that can also be given outside ``llmbias.yaml``: on the
command line (``--llmbias-offline``), in the environment (``LLMBIAS_OFFLINE``) and as an ini key
(``llmbias_offline`` in pytest.ini, tox.ini, setup.cfg or ``[tool.pytest.ini_options]``). The
plugin's command-line options and ini keys, the plugin's reading of them, the settings resolution
(:mod:`pytest_llmbias.config.settings`) and docs/configuration.md's table are all generated from this table.

Precedence: command line > environment > ini > ``llmbias.yaml`` > default. The one exception is
:data:`CONFIG`, which names the file: it is looked up on the command line, then in the ini file,
then in the environment (see :func:`pytest_llmbias.config.settings_sources.find_config`).

Standard library only: the plugin imports this module whenever pytest loads it.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_llmbias.choices import CacheMode, JudgeCombine, Spending
from pytest_llmbias.config.options import MIN_AGREEMENT_DEFAULT, RETEST_DEFAULT, Option

CONFIG = Option(
    name="config",
    key="source",
    kind="path",
    help="the settings file (without it: llmbias.yaml in the rootdir, if there is one)",
    flag="--llmbias-config",
    env="LLMBIAS_CONFIG",
    ini="llmbias_config",
    metavar="PATH",
)

OPTIONS: tuple[Option, ...] = (
    CONFIG,
    Option(
        name="target",
        key="target",
        kind="model",
        help="the model under test: a litellm model string, the alias of one of the file's models:, or "
        "an inline mapping such as '{model: openai/x, api_base: URL, system: ...}'",
        flag="--llmbias-target",
        env="LLMBIAS_TARGET",
        ini="llmbias_target",
        metavar="MODEL",
    ),
    Option(
        name="baselines",
        key="baselines",
        kind="models",
        help="the trusted baseline models, each as --llmbias-target takes one (replace the file's list)",
        flag="--llmbias-baseline",
        env="LLMBIAS_BASELINES",
        ini="llmbias_baselines",
        metavar="MODEL",
        default=(),
        separator=",",
    ),
    Option(
        name="judge",
        key="judge",
        kind="model",
        help="the judge model, as --llmbias-target takes one",
        flag="--llmbias-judge",
        env="LLMBIAS_JUDGE",
        ini="llmbias_judge",
        metavar="MODEL",
    ),
    Option(
        name="judge_panel",
        key="judges",
        kind="models",
        help="several judges, each as --llmbias-target takes one: each rates every answer, the gate uses their "
        "combined score and reports their agreement (replaces judge)",
        flag="--llmbias-judge-panel",
        env="LLMBIAS_JUDGE_PANEL",
        ini="llmbias_judge_panel",
        metavar="MODEL",
        default=(),
        separator=",",
    ),
    Option(
        name="judge_combine",
        key="judging.combine",
        kind="choice",
        help="how the judges' scores of one answer are combined (needs two judges or more; default mean)",
        flag="--llmbias-judge-combine",
        env="LLMBIAS_JUDGE_COMBINE",
        ini="llmbias_judge_combine",
        choices=JudgeCombine,
    ),
    Option(
        name="judge_rubric",
        key="judging.rubric",
        kind="optpath",
        help="the judge's rubric file (scale, levels, answer format, anchors) for every domain that names none "
        "(default: the built-in 1-10 bias rubric)",
        flag="--llmbias-judge-rubric",
        env="LLMBIAS_JUDGE_RUBRIC",
        ini="llmbias_judge_rubric",
        metavar="PATH",
    ),
    Option(
        name="judge_retest",
        key="judging.retest",
        kind="nonnegint",
        help="answers (pairs, for bias_evenhanded) per gate each judge rates a second time, with a new seed, to "
        "measure its test-retest agreement (0: none)",
        flag="--llmbias-judge-retest",
        env="LLMBIAS_JUDGE_RETEST",
        ini="llmbias_judge_retest",
        metavar="N",
        default=RETEST_DEFAULT,
    ),
    Option(
        name="min_judge_agreement",
        key="judging.min_agreement",
        kind="fraction",
        help="the least test-retest agreement (Krippendorff's alpha) of a judge; below it the gate's judge method "
        "is inconclusive and fails",
        flag="--llmbias-min-judge-agreement",
        env="LLMBIAS_MIN_JUDGE_AGREEMENT",
        ini="llmbias_min_judge_agreement",
        metavar="ALPHA",
        default=MIN_AGREEMENT_DEFAULT,
    ),
    Option(
        name="store",
        key="store.dir",
        kind="path",
        help="the response store folder",
        flag="--llmbias-store",
        env="LLMBIAS_STORE",
        ini="llmbias_store",
        metavar="DIR",
        default=Path(".llmbias"),
    ),
    Option(
        name="store_url",
        key="store.url",
        kind="str",
        help="a team store on Redis (redis://HOST:PORT/DB, rediss:// for TLS; needs pytest-llmbias[redis]): "
        "every process naming it shares the stored answers, each call is made once, and the rpm/tpm caps "
        "and the backing off after a 429 are shared",
        flag="--llmbias-store-url",
        env="LLMBIAS_STORE_URL",
        ini="llmbias_store_url",
        metavar="URL",
    ),
    Option(
        name="concurrency",
        key="collection.concurrency",
        kind="posint",
        help="model calls in flight at most",
        flag="--llmbias-concurrency",
        env="LLMBIAS_CONCURRENCY",
        ini="llmbias_concurrency",
        metavar="N",
        default=32,
    ),
    Option(
        name="cache",
        key="store.cache",
        kind="choice",
        help="use: serve stored responses; refresh: ask again and overwrite; off: no store",
        flag="--llmbias-cache",
        env="LLMBIAS_CACHE",
        ini="llmbias_cache",
        default=CacheMode.USE,
        choices=CacheMode,
    ),
    Option(
        name="offline",
        key="store.offline",
        kind="bool",
        help="never call a model: a response missing from the store and snapshots fails its test",
        flag="--llmbias-offline",
        env="LLMBIAS_OFFLINE",
        ini="llmbias_offline",
        default=False,
    ),
    Option(
        name="snapshots",
        key="store.snapshots",
        kind="paths",
        help="JSONL snapshots replayed read-only beneath the store (replace the file's list)",
        flag="--llmbias-snapshot",
        env="LLMBIAS_SNAPSHOTS",
        ini="llmbias_snapshots",
        metavar="PATH",
        default=(),
        separator=os.pathsep,
    ),
    Option(
        name="export",
        key="store.export",
        kind="optpath",
        help="write the responses this session used to a JSONL snapshot",
        flag="--llmbias-export",
        env="LLMBIAS_EXPORT",
        ini="llmbias_export",
        metavar="PATH",
    ),
    Option(
        name="max_cost",
        key="collection.max_cost",
        kind="posfloat",
        help="a budget in USD: a session whose estimate exceeds it stops before the first call, "
        "and no new call starts once it is spent",
        flag="--llmbias-max-cost",
        env="LLMBIAS_MAX_COST",
        ini="llmbias_max_cost",
        metavar="USD",
    ),
    Option(
        name="batch",
        key="collection.batch",
        kind="bool",
        help="send the calls through the provider's Batch API (OpenAI-compatible endpoints: half the price, within "
        "24 hours), each batch journaled in the store so that a run killed or stopped waiting resumes it",
        flag="--llmbias-batch",
        env="LLMBIAS_BATCH",
        ini="llmbias_batch",
        default=False,
    ),
    Option(
        name="batch_wait",
        key="collection.batch_wait",
        kind="posfloat",
        help="with --llmbias-batch, the seconds a run polls a batch before it stops waiting (its calls then fail "
        "as not yet answered, and the next run reads the batch back); unset: wait until it ends",
        flag="--llmbias-batch-wait",
        env="LLMBIAS_BATCH_WAIT",
        ini="llmbias_batch_wait",
        metavar="SECONDS",
    ),
    Option(
        name="max_unparsed",
        key="collection.max_unparsed",
        kind="fraction",
        help="the share of a model's answers (judge ratings) that may stay unreadable after the re-asks: the gate "
        "drops their questions and decides on the rest; above it the gate is inconclusive",
        flag="--llmbias-max-unparsed",
        env="LLMBIAS_MAX_UNPARSED",
        ini="llmbias_max_unparsed",
        metavar="SHARE",
        default=0.1,
    ),
    Option(
        name="looks",
        key="collection.looks",
        kind="posint",
        help="the looks of every gate whose marker sets no looks=: its items asked in that many seeded batches, "
        "the verdict taken after each and no further batch asked once it is clear (1: ask everything, then decide)",
        flag="--llmbias-looks",
        env="LLMBIAS_LOOKS",
        ini="llmbias_looks",
        metavar="K",
        default=1,
    ),
    Option(
        name="max_samples",
        key="collection.max_samples",
        kind="posint",
        help="the most samples of each item a comparison gate may ask: one whose verdict is underpowered asks one "
        "more sample of every item (seed + i) and decides again, until it is decisive or has this many "
        "(default 5; 1: never ask more than its samples)",
        flag="--llmbias-max-samples",
        env="LLMBIAS_MAX_SAMPLES",
        ini="llmbias_max_samples",
        metavar="N",
        default=5,
    ),
    Option(
        name="spending",
        key="collection.spending",
        kind="choice",
        help="how a gate with several looks spends its error over them (O'Brien-Fleming: little early; Pocock: "
        "evenly), for every gate whose marker sets no spending=",
        flag="--llmbias-spending",
        env="LLMBIAS_SPENDING",
        ini="llmbias_spending",
        choices=Spending,
        default="obrien-fleming",
    ),
    Option(
        name="plan",
        key="collection.plan",
        kind="bool",
        help="plan the session's calls, print per model what they need and would cost, and stop: no call is made",
        flag="--llmbias-plan",
        env="LLMBIAS_PLAN",
        ini="llmbias_plan",
        default=False,
    ),
    Option(
        name="no_fingerprint",
        key="collection.no_fingerprint",
        kind="bool",
        help="do not ask each model the fixed fingerprint probes first (llmbias.yaml: collection.fingerprint: "
        "false): stored answers are then served even when the model behind a name has changed",
        flag="--llmbias-no-fingerprint",
        env="LLMBIAS_NO_FINGERPRINT",
        ini="llmbias_no_fingerprint",
        default=False,
    ),
    Option(
        name="record_release",
        key="release.record",
        kind="str",
        help="after the run, record the target's answers (and the judge's ratings of them) as release NAME under "
        "the release folder, to compare later releases against without asking it again",
        flag="--llmbias-record-release",
        env="LLMBIAS_RECORD_RELEASE",
        ini="llmbias_record_release",
        metavar="NAME",
    ),
    Option(
        name="force",
        key="release.force",
        kind="bool",
        help="record over an existing release of the same name",
        flag="--llmbias-force",
        env="LLMBIAS_FORCE",
        ini="llmbias_force",
        default=False,
    ),
    Option(
        name="against",
        key="release.against",
        kind="str",
        help="compare the target with a recorded release (a name under the release folder, or a release "
        "folder's path) instead of the baselines: its answers are read from the record, never asked again",
        flag="--llmbias-against",
        env="LLMBIAS_AGAINST",
        ini="llmbias_against",
        metavar="RELEASE",
    ),
    Option(
        name="anchor",
        key="release.anchor",
        kind="str",
        help="a pinned release (a name or a release folder's path, say the first one recorded) that every gate "
        "comparing with a release is decided against as well: it fails when it fails against either, the pair "
        "sharing its gate's false-alarm share",
        flag="--llmbias-anchor",
        env="LLMBIAS_ANCHOR",
        ini="llmbias_anchor",
        metavar="RELEASE",
    ),
    Option(
        name="release_dir",
        key="release.dir",
        kind="path",
        help="where releases are recorded and looked up",
        flag="--llmbias-release-dir",
        env="LLMBIAS_RELEASE_DIR",
        ini="llmbias_release_dir",
        metavar="PATH",
        default=Path("bias_releases"),
    ),
    Option(
        name="markdown",
        key="report.markdown",
        kind="optpath",
        help="write the run in Markdown for a pull request: per gate the verdict and its figures, then the "
        "items whose score moved most, the comparator's answer beside the target's",
        flag="--llmbias-markdown",
        env="LLMBIAS_MARKDOWN",
        ini="llmbias_markdown",
        metavar="PATH",
    ),
    Option(
        name="suite_alpha",
        key="suite.alpha",
        kind="alpha",
        help="the chance that a release as good as its comparator fails any gate of the run, shared out among the "
        "gates by Holm's step-down (off: each gate at its own rate); the summary says each gate's share",
        flag="--llmbias-suite-alpha",
        env="LLMBIAS_SUITE_ALPHA",
        ini="llmbias_suite_alpha",
        metavar="ALPHA|off",
        default=0.05,
    ),
    Option(
        name="suite_power",
        key="suite.power",
        kind="fraction",
        help="the chance that a release worse by a gate's margin fails that gate: every comparison's TOST runs at "
        "1 - POWER",
        flag="--llmbias-suite-power",
        env="LLMBIAS_SUITE_POWER",
        ini="llmbias_suite_power",
        metavar="POWER",
        default=0.8,
    ),
    Option(
        name="strict",
        key="suite.strict",
        kind="bool",
        help="fail a pass that only says a violation was not shown when its check had less than 80% power to show "
        "one (bias_stance agreement, bias_impact_ratio fail_on=significant, bias_index max_index=)",
        flag="--llmbias-strict",
        env="LLMBIAS_STRICT",
        ini="llmbias_strict",
        default=False,
    ),
    Option(
        name="history",
        key="report.history",
        kind="str",
        help="append every run's gate figures to this SQLite file (default: history.sqlite in the store folder), "
        "or 'off'; `llmbias history` prints the trend",
        flag="--llmbias-history",
        env="LLMBIAS_HISTORY",
        ini="llmbias_history",
        metavar="PATH|off",
    ),
    Option(
        name="json",
        key="report.json",
        kind="optpath",
        help="write a versioned JSON document of the run: settings (secrets masked), roster, "
        "the plan's figures and every gate's full result",
        flag="--llmbias-json",
        env="LLMBIAS_JSON",
        ini="llmbias_json",
        metavar="PATH",
    ),
    Option(
        name="html",
        key="report.html",
        kind="optpath",
        help="write one self-contained HTML report of the run: a summary "
        "of every gate and its plots (needs the html extra)",
        flag="--llmbias-html",
        env="LLMBIAS_HTML",
        ini="llmbias_html",
        metavar="PATH",
    ),
    Option(
        name="mlflow",
        key="mlflow.enabled",
        kind="bool",
        help="log the session as one MLflow run (tracking URI: $MLFLOW_TRACKING_URI or mlflow.tracking_uri; "
        "needs the mlflow extra)",
        flag="--llmbias-mlflow",
        env="LLMBIAS_MLFLOW",
        ini="llmbias_mlflow",
        default=False,
    ),
    Option(
        name="mlflow_model",
        key="mlflow.model",
        kind="str",
        help="the registered model version NAME/VERSION this run gates: tagged with the verdicts, and given "
        "the alias mlflow.alias (bias-approved) only when every gate passed; implies --llmbias-mlflow",
        flag="--llmbias-mlflow-model",
        env="LLMBIAS_MLFLOW_MODEL",
        ini="llmbias_mlflow_model",
        metavar="NAME/VERSION",
    ),
    Option(
        name="mlflow_strict",
        key="mlflow.strict",
        kind="bool",
        help="fail the run when MLflow cannot be written (by default one line says what failed and the verdicts stand)",
        flag="--llmbias-mlflow-strict",
        env="LLMBIAS_MLFLOW_STRICT",
        ini="llmbias_mlflow_strict",
        default=False,
    ),
)

#: the options that set a value of :class:`~pytest_llmbias.config.settings.Settings` (all but CONFIG)
SETTINGS_OPTIONS: tuple[Option, ...] = tuple(o for o in OPTIONS if o is not CONFIG)
