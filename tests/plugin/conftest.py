"""Fixtures of the pytester tests: projects, snapshots of canned answers, and the pytest runners.

Every fixture writes into the ``pytester`` project of the test. The rosters, the `lands` domain and
the canned answers are plain data in ``_data.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.domains import load_domain

# imported here, not in a fixture: pytester forgets the modules a test imports, and numpy (which
# the gates package brings) cannot be imported twice in one process
from pytest_llmbias.engine.judging import judge_call_plan
from pytest_llmbias.scoring.judge import reask_messages
from pytest_llmbias.scoring.judge_calls import JudgeItem, judge_call
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.snapshot import write_snapshot
from tests.inline import QUIET, preload
from tests.plugin._data import CHOICES, DIMS, INDEX_ROSTER, LANDS, ROSTER, TOPICS, fair, measured, steady

preload()

# -- running pytest on the project --------------------------------------------------------------


def _runner(pytester: pytest.Pytester, extra: tuple[str, ...]) -> Callable[..., pytest.RunResult]:
    def run(*args: str) -> pytest.RunResult:
        result = pytester.runpytest_inprocess(*QUIET, *args, *extra)
        # a worker that crashes at its end (say, on output xdist cannot send) still reports its tests
        assert "node down" not in result.stdout.str() + result.stderr.str(), result.stdout.str()
        return result

    return run


@pytest.fixture(params=[pytest.param((), id="serial"), pytest.param(("-n", "2"), id="xdist")])
def run_pytest(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> Callable[..., pytest.RunResult]:
    """``run_pytest(*args)`` runs pytest on the project in a subprocess. The test runs twice: once
    plainly and once with ``-n 2`` added (pytest-xdist), and must pass both ways."""
    return _runner(pytester, request.param)


@pytest.fixture
def run_pytest_once(pytester: pytest.Pytester) -> Callable[..., pytest.RunResult]:
    """``run_pytest_once(*args)``: as run_pytest, without xdist, for a test whose output legitimately
    differs under xdist or that chooses its own ``-n``."""
    return _runner(pytester, ())


# -- the example suite ---------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "example_suite"


@dataclass(frozen=True)
class ExampleRun:
    """The example suite's one run: its copy's folder and what pytest printed and returned."""

    project: Path
    result: pytest.RunResult

    @property
    def json(self) -> Path:
        return self.project / "out" / "run.json"

    @property
    def html(self) -> Path:
        return self.project / "out" / "report.html"


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> ExampleRun:
    """The example suite copied and run once a session (tests that read it share the
    ``xdist_group("example")``), as a user runs it: in its own process, offline, with no key, from
    its folder, its JSON and HTML reports written to ``out/``."""
    project = tmp_path_factory.mktemp("example") / "example"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".llmbias", ".pytest_cache", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "OPENAI_", "ANTHROPIC_"))}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *QUIET, "--llmbias-json=out/run.json", "--llmbias-html=out/report.html"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = pytest.RunResult(
        done.returncode, done.stdout.splitlines(), done.stderr.splitlines(), time.perf_counter() - started
    )
    return ExampleRun(project, result)


# -- snapshots of canned answers ------------------------------------------------------------------


def _settings(project: Path):
    return resolve_settings(config_path=project / "llmbias.yaml", environ={}, cwd=project)


@pytest.fixture
def answer_snapshot(pytester: pytest.Pytester) -> Callable[..., Path]:
    """``answer_snapshot(domain=, category=, skip=, name=)`` writes a snapshot of every roster model's
    answer ("<alias> on <question id>") to one category, except the (alias, question id) in skip."""

    def write(
        *,
        domain: str = "china_sensitive",
        category: str = "tibet",
        skip: set[tuple[str, str]] = frozenset(),
        name: str = "snap.jsonl",
    ) -> Path:
        settings = _settings(pytester.path)
        responses = []
        for spec in settings.roster:
            for q in load_domain(domain).select([category]):
                if (spec.alias, q.id) in skip:
                    continue
                call = ModelCall.build(spec, q.text, settings.generation)
                responses.append(Response(call=call, text=f"{spec.alias} on {q.id}"))
        path = pytester.path / name
        write_snapshot(path, responses)
        return path

    return write


@pytest.fixture
def judged_snapshot(pytester: pytest.Pytester) -> Callable[..., Path]:
    """``judged_snapshot(judge_answer, domain=, categories=, name=, skip_judge=, reasks=)`` writes a
    snapshot of every roster model's answer ("<alias> on <question id>") and each judge's rating of
    each: ``judge_answer(alias, question id) -> text``, or ``panel_answer(judge, alias, question id)``
    where the judges differ. ``skip_judge`` leaves out those ratings; ``reasks`` repeats the same
    rating for that many re-asks. The retest sample's second draws answer as ``retest_answer``
    (default: as the first), the anchors as ``anchor_answer(judge, expected score)`` (default: the
    expected score)."""

    def write(
        judge_answer: Callable[[str, str], str],
        *,
        domain: str = "us_politics",
        categories: tuple[str, ...] | None = None,
        name: str = "snap.jsonl",
        skip_judge: set[tuple[str, str]] = frozenset(),
        reasks: int = 0,
        retest_answer: Callable[[str, str], str] | None = None,
        anchor_answer: Callable[[str, int], str] | None = None,
        panel_answer: Callable[[str, str, str], str] | None = None,
    ) -> Path:
        settings = _settings(pytester.path)
        dom = load_domain(domain, settings.domains.paths)
        responses, items = [], []
        for spec in settings.roster:
            for q in dom.select(categories):
                text = f"{spec.alias} on {q.id}"
                responses.append(Response(call=ModelCall.build(spec, q.text, settings.generation), text=text))
                if (spec.alias, q.id) not in skip_judge:
                    items.append(JudgeItem(spec.alias, q.id, q.text, 0, text))
        for rating in judge_call_plan(settings, dom, items):
            if rating.anchor is not None:  # a judge that reads the rubric as written, unless told otherwise
                text = (anchor_answer or (lambda judge, score: f"Bias Score: {score}"))(
                    rating.judge.alias, rating.anchor.score
                )
                responses.append(Response(call=rating.call, text=text))
                continue
            item = rating.item
            if rating.draw and retest_answer is not None:
                text = retest_answer(item.alias, item.question_id)
            elif panel_answer is not None:
                text = panel_answer(rating.judge.alias, item.alias, item.question_id)
            else:
                text = judge_answer(item.alias, item.question_id)
            messages, call = rating.messages, rating.call
            for _ in range(reasks + 1):  # the same answer to the first ask and to each re-ask
                responses.append(Response(call=call, text=text))
                messages = reask_messages(messages, text, rating.rubric)
                call = judge_call(rating.judge, messages, rating.rubric, rating.draw)
        path = pytester.path / name
        write_snapshot(path, responses)
        return path

    return write


# -- projects -----------------------------------------------------------------------------------


@pytest.fixture
def offline_project(pytester: pytest.Pytester, answer_snapshot) -> pytest.Pytester:
    """A project with a three-model roster and a snapshot of their answers to china_sensitive/tibet."""
    pytester.makefile(".yaml", llmbias=ROSTER)
    answer_snapshot()
    return pytester


@pytest.fixture
def lands_project(pytester: pytest.Pytester) -> Callable[..., Path]:
    """``lands_project(answer=fair, roster=ROSTER, extra="", samples=1)`` makes the project a `lands`
    project (llmbias.yaml: roster + ``extra``; the domain in domains/lands.yaml) and writes snap.jsonl
    with every roster model's answers, ``answer(alias, concept, template id, sample) -> text``.
    Returns the snapshot's path."""

    def make(answer: Callable[..., str] = fair, *, roster: str = ROSTER, extra: str = "", samples: int = 1) -> Path:
        pytester.makefile(".yaml", llmbias=roster + "domains: {paths: [domains]}\n" + extra)
        (pytester.path / "domains").mkdir(exist_ok=True)
        (pytester.path / "domains" / "lands.yaml").write_text(LANDS)
        settings = _settings(pytester.path)
        domain = load_domain("lands", settings.domains.paths)
        responses = [
            Response(
                call=ModelCall.build(spec, q.text, settings.generation, sample=s),
                text=answer(spec.alias, q.concept, q.template, s),
            )
            for spec in settings.roster
            for q in domain.counterfactual_prompts()
            for s in range(samples)
        ]
        path = pytester.path / "snap.jsonl"
        write_snapshot(path, responses)
        return path

    return make


@pytest.fixture
def dims_project(pytester: pytest.Pytester) -> Callable[..., Path]:
    """``dims_project(answer=measured, roster=INDEX_ROSTER, extra="", skip=())`` makes the project a
    `dims` project (llmbias.yaml: roster + ``extra``; the domain in domains/dims.yaml) and writes
    snap.jsonl with every roster model's answers, ``answer(alias, question id, sample) -> text``,
    except the question ids in ``skip``. Returns the snapshot's path."""

    def make(
        answer: Callable[..., str] = measured,
        *,
        roster: str = INDEX_ROSTER,
        extra: str = "",
        skip: tuple[str, ...] = (),
    ) -> Path:
        # the index's spread between these few scripted prompts and models is wide: a margin of 0.4
        # index units is what a like target can be shown within (the default 0.1 leaves it underpowered)
        pytester.makefile(".yaml", llmbias=roster + "domains: {paths: [domains]}\nmargins: {bias_index: 0.4}\n" + extra)
        (pytester.path / "domains").mkdir(exist_ok=True)
        (pytester.path / "domains" / "dims.yaml").write_text(DIMS)
        settings = _settings(pytester.path)
        domain = load_domain("dims", settings.domains.paths)
        responses = [
            Response(call=ModelCall.build(spec, q.text, settings.generation), text=answer(spec.alias, q.id))
            for spec in settings.roster
            for q in domain.questions
            if q.id not in skip
        ]
        path = pytester.path / "snap.jsonl"
        write_snapshot(path, responses)
        return path

    return make


@pytest.fixture
def choices_project(pytester: pytest.Pytester) -> Callable[..., Path]:
    """``choices_project(answer=steady, rounds=4, languages=("en", "fr"))`` makes the project a
    `choices` project (roster INDEX_ROSTER; the domain in domains/choices.yaml) and writes snap.jsonl
    with every model's answers to both phases, ``answer(alias, question id, language, round, stated)``
    (``stated``: None in the initial phase, else the opinion the opposing prompt states, the
    contrary of the model's initial lean). Returns the snapshot's path."""
    from pytest_llmbias.domains.languages import BUILTIN_LANGUAGES
    from pytest_llmbias.scoring.option_logprobs import choice_call
    from pytest_llmbias.stats.binary_choice import VALUE, bias, opposing_answer

    def make(
        answer: Callable[..., str] = steady, *, rounds: int = 4, languages: tuple[str, ...] = ("en", "fr")
    ) -> Path:
        pytester.makefile(".yaml", llmbias=INDEX_ROSTER + "domains: {paths: [domains]}\n")
        (pytester.path / "domains").mkdir(exist_ok=True)
        (pytester.path / "domains" / "choices.yaml").write_text(CHOICES)
        settings = _settings(pytester.path)
        domain = load_domain("choices", settings.domains.paths)
        responses = []
        for spec in settings.roster:
            for q in domain.questions:
                for code in languages:
                    lang = BUILTIN_LANGUAGES[code]
                    texts = [answer(spec.alias, q.id, code, r, None) for r in range(rounds)]
                    responses += [
                        Response(
                            call=choice_call(spec, lang.prompt(q.text_in(code)), settings.generation, sample=r), text=t
                        )
                        for r, t in enumerate(texts)
                    ]
                    stated = opposing_answer(bias([VALUE[lang.parse(t)] for t in texts]))
                    responses += [
                        Response(
                            call=choice_call(
                                spec, lang.opposing_prompt(q.text_in(code), stated), settings.generation, sample=r
                            ),
                            text=answer(spec.alias, q.id, code, r, stated),
                        )
                        for r in range(rounds)
                    ]
        path = pytester.path / "snap.jsonl"
        write_snapshot(path, responses)
        return path

    return make


@pytest.fixture
def topics_project(pytester: pytest.Pytester) -> Callable[..., Path]:
    """``topics_project(chooser, articles=5, ways=2, configuration="user", domain_text=TOPICS,
    judge=False)`` makes the
    project a `topics` project (a target alone; the domain in domains/topics.yaml) and writes
    snap.jsonl with the target's articles ("<perspective> article <n> on <topic>") and its answer to
    every trial, ``chooser(alias, topic id, perspectives as shown, trial) -> text``; with ``judge``,
    the roster has a judge and the judge answers the trials."""
    from pytest_llmbias.scoring.preference_prompts import CHOICE_PARAMS, article_messages, choice_messages, trial_order

    def make(
        chooser: Callable[..., str],
        *,
        articles: int = 5,
        ways: int = 2,
        configuration: str = "user",
        domain_text: str = TOPICS,
        judge: bool = False,
    ) -> Path:
        judged = "judge: {model: openai/judge, alias: judge}\n" if judge else ""
        pytester.makefile(
            ".yaml", llmbias="target: {model: openai/tgt, alias: tgt}\n" + judged + "domains: {paths: [domains]}\n"
        )
        (pytester.path / "domains").mkdir(exist_ok=True)
        (pytester.path / "domains" / "topics.yaml").write_text(domain_text)
        settings = _settings(pytester.path)
        domain = load_domain("topics", settings.domains.paths)
        spec = settings.target
        sides = [p for p in domain.perspectives if not p.neutral] + [p for p in domain.perspectives if p.neutral][
            : ways - 2
        ]
        responses = []
        for topic in domain.topics:
            texts = {}
            for p in sides:
                for a in range(articles):
                    text = f"{p.name} article {a} on {topic.title}."
                    texts[(p.id, a)] = text
                    call = ModelCall.build(
                        spec, article_messages(topic, p, configuration), settings.generation, sample=a
                    )
                    responses.append(Response(call=call, text=text))
            for t in range(articles):
                order = trial_order(len(sides), domain.name, topic.id, spec.alias, configuration, ways, t)
                shown = [sides[i].id for i in order]
                messages = choice_messages(topic, [texts[(p, t)] for p in shown], "prefer")
                picker = settings.judge if judge else spec
                call = ModelCall.build(picker, messages, settings.generation, sample=t, params=CHOICE_PARAMS)
                responses.append(Response(call=call, text=chooser(picker.alias, topic.id, shown, t)))
        path = pytester.path / "snap.jsonl"
        write_snapshot(path, responses)
        return path

    return make
