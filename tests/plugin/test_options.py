"""Options, markers and usage errors, end to end through pytester."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

MARKED = """
import pytest

@pytest.mark.bias_responses("china_sensitive", categories=["tibet"]{extra})
def test_marked(bias_responses):
    assert bias_responses.n_questions == 10
    assert bias_responses.text("tgt", "cn-tib-01") == "tgt on cn-tib-01"
"""


def test_markers_and_options_are_documented(pytester: pytest.Pytester, run_pytest_once):
    markers = run_pytest_once("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.bias_responses(domain, *, models='all'*"])
    helptext = run_pytest_once("--help")
    for option in (
        "--llmbias-target=MODEL",
        "--llmbias-baseline=MODEL",
        "--llmbias-judge=MODEL",
        "--llmbias-store=DIR",
        "--llmbias-concurrency=N",
        "--llmbias-cache=*",
        "--llmbias-offline",
        "--llmbias-snapshot=PATH",
        "--llmbias-export=PATH",
        "--llmbias-config=PATH",
    ):
        helptext.stdout.fnmatch_lines([f"*{option}*"])


def test_offline_run_from_a_snapshot_passes_and_calls_nothing(offline_project: pytest.Pytester, run_pytest_once):
    offline_project.makepyfile(MARKED.format(extra=""))
    result = run_pytest_once("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*llmbias: 30 calls: 30 from store, 0 fetched, 0 failed, 0 missing*"])
    assert not (offline_project.path / ".llmbias").exists()  # offline, with no store yet: none is created


def test_offline_miss_fails_naming_the_models_and_question_ids(
    offline_project: pytest.Pytester, answer_snapshot, run_pytest_once
):
    answer_snapshot(skip={("b2", "cn-tib-03"), ("tgt", "cn-tib-07")})
    offline_project.makepyfile(MARKED.format(extra=""))
    result = run_pytest_once("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*2 response(s) for domain 'china_sensitive' are missing (offline mode*",
            "*tgt: cn-tib-07*",
            "*b2: cn-tib-03*",
        ]
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (", bogus=1", "*unknown argument 'bogus'; accepted: domain, models, categories, samples*"),
        (", samples=0", "*'samples' must be a positive integer, got 0*"),
        (", models='everyone'", "*'models' must be one of all, target, baselines*"),
        (", models=['nobody']", "*no model with alias 'nobody' (known: tgt, b1, b2)*"),
    ],
)
def test_bad_marker_arguments_are_usage_errors(offline_project: pytest.Pytester, run_pytest_once, extra, message):
    offline_project.makepyfile(MARKED.format(extra=extra))
    result = run_pytest_once("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_unknown_category_lists_the_known_ones(offline_project: pytest.Pytester, run_pytest_once):
    offline_project.makepyfile(
        "import pytest\n@pytest.mark.bias_responses('us_politics', categories=['nowhere'])\n"
        "def test_x(bias_responses):\n    pass\n"
    )
    result = run_pytest_once()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*has no category 'nowhere'; known: gun_policy, immigration*"])


def test_unknown_domain_lists_the_known_ones(offline_project: pytest.Pytester, run_pytest_once):
    offline_project.makepyfile(
        "import pytest\n@pytest.mark.bias_responses('atlantis')\ndef test_x(bias_responses):\n    pass\n"
    )
    result = run_pytest_once()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*unknown domain 'atlantis'; known domains: ai_companies, bias_dimensions, binary_opinions, "
            "china_sensitive, countries, economic_topics, first_names, political_topics, us_politics*"
        ]
    )


def test_a_bad_settings_file_names_key_file_and_line(pytester: pytest.Pytester, run_pytest):
    """Under pytest-xdist too: the same message and exit code, no INTERNALERROR."""
    pytester.makefile(".yaml", llmbias="target: openai/x\nbaselines: [openai/y]\ncollection:\n  concurency: 4\n")
    pytester.makepyfile(MARKED.format(extra=""))
    result = run_pytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: pytest-llmbias: *llmbias.yaml:4: unknown key 'collection.concurency'; accepted keys: concurrency, "
            "rpm*"
        ]
    )
    assert "INTERNALERROR" not in str(result.stdout) + str(result.stderr)


def test_a_missing_roster_is_a_usage_error(pytester: pytest.Pytester, run_pytest_once):
    pytester.makepyfile(MARKED.format(extra=""))
    result = run_pytest_once()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no target model configured*--llmbias-target MODEL*"])
    assert not (pytester.path / ".llmbias").exists()


def test_too_few_baselines_is_a_usage_error(pytester: pytest.Pytester, run_pytest_once):
    pytester.makepyfile(MARKED.format(extra=""))
    result = run_pytest_once("--llmbias-target=openai/tgt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*0 baseline model(s) configured, at least 1 needed*"])


def test_command_line_roster_overrides_the_file(offline_project: pytest.Pytester, run_pytest_once):
    """--llmbias-target/--llmbias-baseline replace the file's roster (here: a target absent from the snapshot)."""
    offline_project.makepyfile(MARKED.format(extra=""))
    result = run_pytest_once(
        "--llmbias-offline",
        "--llmbias-snapshot=snap.jsonl",
        "--llmbias-target=openai/other",
        "--llmbias-baseline=openai/b1",
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*other: cn-tib-01, *"])
    result.stdout.no_fnmatch_line("*b2:*")


def test_the_fixture_without_its_marker_fails_clearly(offline_project: pytest.Pytester, run_pytest_once):
    offline_project.makepyfile("def test_x(bias_responses):\n    pass\n")
    result = run_pytest_once()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the bias_responses fixture needs @pytest.mark.bias_responses(domain=...)*"])


def test_collect_only_calls_no_model_and_writes_nothing(offline_project: pytest.Pytester, run_pytest_once):
    # The roster's models have no reachable endpoint: any call would fail the run.
    offline_project.makepyfile(MARKED.format(extra=""))
    result = run_pytest_once("--collect-only")
    assert result.ret == pytest.ExitCode.OK
    assert not (offline_project.path / ".llmbias").exists()


def test_a_corrupted_store_offline_is_left_as_found_and_says_how_to_heal_it(
    offline_project: pytest.Pytester, run_pytest_once
):
    offline_project.makepyfile(MARKED.format(extra=""))
    run_pytest_once("--llmbias-snapshot=snap.jsonl").assert_outcomes(passed=1)  # creates the store
    db = offline_project.path / ".llmbias" / "responses" / "cache.db"
    assert db.is_file()
    garbage = b"this is not an sqlite database" * 100
    db.write_bytes(garbage)
    result = run_pytest_once("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
    result.assert_outcomes(passed=1, warnings=1)  # the snapshot serves the run; the user is told
    result.stdout.fnmatch_lines(
        [
            "*LLMBiasWarning: the store's database*cache.db cannot be read*offline, nothing is served from it "
            "and nothing is changed*llmbias store check*llmbias store repair*"
        ]
    )
    assert db.read_bytes() == garbage  # offline, the damaged file is left as found
    assert "rm -rf" not in result.stdout.str()  # never advice to delete answers that still read
    assert "diskcache" not in result.stdout.str()


def test_an_emptied_store_is_reported(offline_project: pytest.Pytester, run_pytest_once):
    offline_project.makepyfile(MARKED.format(extra=""))
    run_pytest_once("--llmbias-snapshot=snap.jsonl").assert_outcomes(passed=1)
    db = offline_project.path / ".llmbias" / "responses" / "cache.db"
    db.write_bytes(b"")
    result = run_pytest_once("--llmbias-offline", "--llmbias-snapshot=snap.jsonl")
    result.assert_outcomes(passed=1, warnings=1)  # served by the snapshot, but the user is told
    result.stdout.fnmatch_lines(
        ["*LLMBiasWarning: the store at*responses was emptied or reset (its cache.db is empty (0 bytes))*"]
    )
    # pointed at the settings that configure the store, not at a module of the plugin
    result.stdout.fnmatch_lines(["*llmbias.yaml:0: LLMBiasWarning: the store at*"])
    assert "pytest_llmbias/plugin/" not in result.stdout.str()


def test_export_writes_the_responses_used(offline_project: pytest.Pytester, run_pytest_once):
    offline_project.makepyfile(
        MARKED.format(extra=", models='baselines'").replace(
            'assert bias_responses.text("tgt", "cn-tib-01") == "tgt on cn-tib-01"', "pass"
        )
    )
    result = run_pytest_once("--llmbias-offline", "--llmbias-snapshot=snap.jsonl", "--llmbias-export=out/used.jsonl")
    result.assert_outcomes(passed=1)
    lines = (offline_project.path / "out" / "used.jsonl").read_text().splitlines()
    assert len(lines) == 20
    assert all('"alias": "b' in line for line in lines)


EXAMPLE = Path(__file__).resolve().parents[2] / "example_suite"


@pytest.mark.xdist_group("example")
def test_example_suite_passes_offline(example_run):
    example_run.result.assert_outcomes(passed=9, xfailed=8)
    example_run.result.stdout.fnmatch_lines(["*llmbias: 13 gates: a good release fails any at most *"])


def test_example_snapshot_matches_its_illustrative_sources(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_snapshot", EXAMPLE / "build_snapshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "demo.jsonl"
    # 800 US + China answers and ratings (and 40 second ratings: the retest; 8 anchors), 4 models x 228 prompts x
    # 5 samples, 4 x 90 bias_dimensions answers, 4 x 24 x 3 x 5 x 2 stance answers, 2 x 4 x 10 x (10 articles + 5
    # picks) preference answers, 4 x 80 BBQ answers (with their letters' log-probabilities)
    assert module.build(out, root=tmp_path) == 10168
    assert out.read_bytes() == (EXAMPLE / "snapshots" / "demo.jsonl").read_bytes(), (
        "example_suite/snapshots/demo.jsonl is stale: run python example_suite/build_snapshot.py"
    )
    assert (tmp_path / "data" / "bbq_example.jsonl").read_bytes() == (
        EXAMPLE / "data" / "bbq_example.jsonl"
    ).read_bytes()


# -- ini options ------------------------------------------------------------------------------

#: the roster of offline_project, whose models answer on a closed local port: were a call made by
#: mistake, it would fail at once instead of reaching the internet
LOCAL_ROSTER = """\
target: {model: openai/tgt, alias: tgt, api_base: "http://127.0.0.1:9/v1"}
baselines:
  - {model: openai/b1, alias: b1, api_base: "http://127.0.0.1:9/v1"}
  - {model: openai/b2, alias: b2, api_base: "http://127.0.0.1:9/v1"}
collection: {retries: 0, timeout: 5}
"""


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pytest.ini", "[pytest]\nllmbias_offline = true\nllmbias_snapshots =\n    snap.jsonl\n"),
        ("pyproject.toml", '[tool.pytest.ini_options]\nllmbias_offline = true\nllmbias_snapshots = ["snap.jsonl"]\n'),
    ],
    ids=["pytest.ini", "pyproject.toml"],
)
def test_ini_options_set_offline_mode_and_snapshots(
    pytester: pytest.Pytester, answer_snapshot, run_pytest_once, name: str, text: str
):
    pytester.makefile(".yaml", llmbias=LOCAL_ROSTER)
    answer_snapshot(skip={("b2", "cn-tib-03")})
    (pytester.path / name).write_text(text)
    pytester.makepyfile(MARKED.format(extra=""))
    result = run_pytest_once()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*1 response(s) for domain 'china_sensitive' are missing (offline mode*", "*b2: cn-tib-03*"]
    )
    result.stdout.fnmatch_lines(["*llmbias: 30 calls: 29 from store, 0 fetched, 0 failed, 1 missing*"])


def test_a_bad_ini_value_names_the_ini_key_and_the_accepted_values(pytester: pytest.Pytester, run_pytest_once):
    pytester.makefile(".yaml", llmbias=LOCAL_ROSTER)
    pytester.makeini("[pytest]\nllmbias_cache = sometimes\n")
    pytester.makepyfile(MARKED.format(extra=""))
    result = run_pytest_once()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ini option llmbias_cache (*tox.ini): 'store.cache' must be one of use | refresh | off, got 'sometimes'*"]
    )


def test_ini_options_do_not_stop_a_run_without_the_plugin(pytester: pytest.Pytester, run_pytest_once):
    """Unlike `addopts = --llmbias-offline`, which `-p no:llmbias` turns into an unrecognized argument."""
    pytester.makeini("[pytest]\nllmbias_offline = true\nllmbias_cache = use\nllmbias_snapshots =\n    a.jsonl\n")
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = run_pytest_once("-p", "no:llmbias")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK


# -- export under pytest-xdist ----------------------------------------------------------------

ONLY = """
import pytest

@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models={models!r})
def test_{models}(bias_responses):
    assert len(bias_responses) == {n}
"""


@pytest.mark.parametrize("given_in", ["command line", "llmbias.yaml", "environment"])
def test_xdist_exports_exactly_what_the_run_used(
    pytester: pytest.Pytester, answer_snapshot, run_pytest_once, monkeypatch: pytest.MonkeyPatch, given_in: str
):
    """However the export is asked for, under -n 2 it holds this run's 30 responses: the workers'
    parts are merged and removed, and parts that an earlier, killed run with more workers left
    behind are neither read nor touched."""
    pytest.importorskip("xdist")
    project = pytester.path
    export = ", export: out/used.jsonl" if given_in == "llmbias.yaml" else ""
    pytester.makefile(".yaml", llmbias=LOCAL_ROSTER + f"store: {{offline: true, snapshots: [snap.jsonl]{export}}}\n")
    answer_snapshot()
    if given_in == "environment":
        monkeypatch.setenv("LLMBIAS_EXPORT", "out/used.jsonl")
    flag = ["--llmbias-export=out/used.jsonl"] if given_in == "command line" else []
    (project / "out").mkdir()
    other = answer_snapshot(category="taiwan_status", name="other.jsonl")  # 30 responses this run does not use
    stale = ["used.jsonl.gw0.part", "used.jsonl.0badc0de.gw5.part"]
    for name in stale:
        shutil.copy(other, project / "out" / name)
    (project / "test_target.py").write_text(ONLY.format(models="target", n=10))
    (project / "test_baselines.py").write_text(ONLY.format(models="baselines", n=20))

    result = run_pytest_once("-n", "2", "-v", *flag)

    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random(["*gw0*PASSED*", "*gw1*PASSED*"])  # one test on each worker
    assert sorted(p.name for p in (project / "out").iterdir()) == sorted(["used.jsonl", *stale])
    assert all((project / "out" / name).read_bytes() == other.read_bytes() for name in stale)
    lines = (project / "out" / "used.jsonl").read_text().splitlines()
    assert len(lines) == 30
    result.stdout.fnmatch_lines([f"*llmbias: responses used are exported to {project / 'out' / 'used.jsonl'}*"])
