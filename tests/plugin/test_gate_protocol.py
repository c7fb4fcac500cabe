"""A gate defined outside the package, through the public protocol, runs as a marker.

The conftest below is what docs/development.md's "Adding a gate" describes: a spec, a result on the shared
result base, a gate whose ``plan`` asks the session for responses and whose ``evaluate`` hands
per-question scores to the comparison engine, registered by the ``pytest_llmbias_add_gates`` hook.
"""

from __future__ import annotations

import pytest

from pytest_llmbias.config.settings_sources import resolve_settings
from pytest_llmbias.domains import load_domain
from pytest_llmbias.store.calls import ModelCall, Response
from pytest_llmbias.store.snapshot import write_snapshot
from tests.plugin._data import ROSTER

CONFTEST = """
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import pytest_llmbias as llmbias
from pytest_llmbias import markers


@dataclass(frozen=True)
class LengthSpec:
    domain: str
    alternative: str = "no-worse"
    margin: float = 3.0

    @classmethod
    def parse(cls, args, kwargs):
        bound = markers.bind("bias_length", args, kwargs, [f.name for f in dataclasses.fields(cls)])
        options = llmbias.ComparisonOptions.parse("bias_length", {**bound, "margin": bound.get("margin", 3.0)},
                                                  alternative=bound.get("alternative", "no-worse"))
        return cls(domain=bound["domain"], alternative=str(options.alternative), margin=options.margin)


@dataclass(frozen=True)
class LengthResult(llmbias.GateResultBase):
    marker: ClassVar[str] = "bias_length"

    domain: str
    target: str
    baselines: tuple
    comparison: llmbias.MethodResult
    warnings: tuple = ()

    @property
    def passed(self):
        return self.comparison.passed

    @property
    def verdict(self):
        return self.comparison.tost.verdict

    @property
    def why(self):
        t = self.comparison.tost
        return f"mean length {t.mean_target:.1f} words against the baselines' {t.mean_baseline:.1f}"

    def reliability(self):
        return self.comparison.reliability()

    def table(self):
        scores = self.comparison.scores
        rows = [{"model": a, "question": q, "words": v} for a, per in scores.items() for q, v in per.items()]
        return llmbias.Table.of(rows, ["model", "question", "words"])

    def fields(self):
        return {"target": self.target, "baselines": list(self.baselines), "comparison": self.comparison.to_dict()}

    def title(self):
        return f"bias_length on {self.domain!r}: {self.verdict.upper()} (target {self.target})"

    def details(self):
        return llmbias.method_lines(self.comparison, aliases=[self.target, *self.baselines])

    def rows(self):
        return [self.comparison.summary_row("length")]


class LengthGate:
    marker = "bias_length"
    help = "fail when the target's answers are longer than its baselines' by more than the margin"

    def parse(self, args, kwargs):
        return LengthSpec.parse(args, kwargs)

    def signature(self):
        return "domain, *, alternative='no-worse', margin=3.0"

    def plan(self, spec, session):
        session.settings.require_roster(min_baselines=2)
        session.plan(llmbias.ResponseRequest(domain=spec.domain, categories=("tibet",)))

    def evaluate(self, spec, session):
        responses = session.responses(llmbias.ResponseRequest(domain=spec.domain, categories=("tibet",)))
        scores = {a: {q.id: float(len(responses.text(a, q.id).split())) for q in responses.questions}
                  for a in responses.aliases}
        options = llmbias.ComparisonOptions(alternative=spec.alternative, margin=spec.margin)
        comparison = llmbias.compare("length", scores, target=responses.target, baselines=responses.baselines,
                                     categories={q.id: q.category for q in responses.questions}, options=options)
        return LengthResult(responses.domain.name, responses.target, responses.baselines, comparison)

    def figures(self, entry):
        return []


def pytest_llmbias_add_gates(registry):
    registry.register(LengthGate())
"""

TESTS = """
import pytest

@pytest.mark.bias_length("china_sensitive")
def test_length_like_the_baselines(bias_result):
    assert bias_result.comparison.tost.n_target == 10

@pytest.mark.bias_length("china_sensitive", margin=0.5)
def test_length_with_a_tight_margin(bias_result):
    pass
"""


def _answers(pytester: pytest.Pytester, extra_words: dict[str, int]) -> None:
    """A snapshot of every roster model's answers to china_sensitive/tibet: question i gets i + 3
    words, plus ``extra_words[alias]``, plus a little that differs between models."""
    settings = resolve_settings(config_path=pytester.path / "llmbias.yaml", environ={}, cwd=pytester.path)
    responses = []
    for spec in settings.roster:
        for i, q in enumerate(load_domain("china_sensitive").select(["tibet"])):
            words = i + 3 + extra_words.get(spec.alias, 0) + (i * len(spec.alias) + len(spec.alias) * 7) % 3
            responses.append(Response(call=ModelCall.build(spec, q.text, settings.generation), text="word " * words))
    write_snapshot(pytester.path / "snap.jsonl", responses)


def test_a_gate_from_a_conftest_runs_as_a_marker(pytester: pytest.Pytester, run_pytest) -> None:
    pytester.makefile(".yaml", llmbias=ROSTER)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_length=TESTS)
    _answers(pytester, {"tgt": 3})
    result = run_pytest("--llmbias-offline", "--llmbias-snapshot", "snap.jsonl", "--strict-markers")
    # about two words longer: shown within a margin of 3, shown beyond a margin of 0.5
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*bias_length on 'china_sensitive': BIASED (target tgt)*", "*[[]length[]] verdict: biased*"]
    )
    result.stdout.fnmatch_lines(["*test_length_like_the_baselines*length*no-worse*"])


def test_an_added_gate_is_listed_with_its_signature(pytester: pytest.Pytester, run_pytest_once) -> None:
    pytester.makeconftest(CONFTEST)
    result = run_pytest_once("--markers")
    result.stdout.fnmatch_lines(
        ["*@pytest.mark.bias_length(domain, *, alternative='no-worse', margin=3.0): fail when*"]
    )


def test_a_bad_argument_of_an_added_gate_is_a_usage_error(pytester: pytest.Pytester, run_pytest_once) -> None:
    pytester.makefile(".yaml", llmbias=ROSTER)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_length="""
import pytest

@pytest.mark.bias_length("china_sensitive", colour=1)
def test_x(bias_result):
    pass
"""
    )
    result = run_pytest_once("--llmbias-offline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown argument 'colour'; accepted: domain, alternative, margin*"])


def test_a_gate_that_takes_a_built_in_name_is_a_usage_error(pytester: pytest.Pytester, run_pytest_once) -> None:
    pytester.makeconftest(CONFTEST.replace('marker = "bias_length"', 'marker = "bias_equivalent"'))
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = run_pytest_once()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest_llmbias_add_gates: the marker 'bias_equivalent' is already registered*"])


def test_an_added_gate_that_does_not_compare_with_releases_says_so(pytester: pytest.Pytester, run_pytest_once) -> None:
    pytester.makefile(".yaml", llmbias=ROSTER)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_length=TESTS)
    _answers(pytester, {"tgt": 3})
    offline = ("--llmbias-offline", "--llmbias-snapshot", "snap.jsonl")
    run_pytest_once(*offline, "--llmbias-record-release", "v1").assert_outcomes(passed=1, failed=1)
    result = run_pytest_once(*offline, "--llmbias-against", "v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*@pytest.mark.bias_length does not compare the target with a recorded release "
            "(--llmbias-against; a gate that does sets compares_releases = True); bias_equivalent, "
            "bias_impact_ratio, bias_index, bias_stance, bias_preference, bias_benchmark, bias_evenhanded do*"
        ]
    )
