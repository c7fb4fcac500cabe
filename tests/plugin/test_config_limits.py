"""Settings out of range, a plan too big to build and a YAML bomb, end to end: each stops the run at
once with the plugin's one-line usage error, never a hang, a traceback or a MemoryError."""

from __future__ import annotations

import time

import pytest

from tests.plugin._data import ROSTER

MARKED = """
import pytest

@pytest.mark.bias_responses("{domain}", categories={categories}{extra})
def test_marked(bias_responses):
    pass
"""


def test_a_billion_samples_is_refused_when_the_settings_are_read(pytester: pytest.Pytester, run_pytest_once):
    pytester.makefile(".yaml", llmbias=ROSTER + "generation: {samples: 1000000000}\n")
    pytester.makepyfile(MARKED.format(domain="china_sensitive", categories=["tibet"], extra=""))
    start = time.perf_counter()
    result = run_pytest_once()
    assert time.perf_counter() - start < 30
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-llmbias: *llmbias.yaml:*: 'generation.samples' must be an integer from 1 to 1,000 *"]
    )
    assert "INTERNALERROR" not in str(result.stdout) + str(result.stderr)


def test_a_marker_plan_beyond_max_calls_is_refused_before_it_is_built(pytester: pytest.Pytester, run_pytest_once):
    pytester.makefile(".yaml", llmbias=ROSTER)
    pytester.makepyfile(MARKED.format(domain="china_sensitive", categories=["tibet"], extra=", samples=10**9"))
    start = time.perf_counter()
    result = run_pytest_once("--llmbias-offline")
    assert time.perf_counter() - start < 30
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: pytest-llmbias: *domain 'china_sensitive' would need 30,000,000,000 calls (3 model(s) x 10 "
            "question(s) x 1,000,000,000 sample(s) from the marker's samples=), more than collection.max_calls "
            "(200,000)*--llmbias-plan*"
        ]
    )
    assert "INTERNALERROR" not in str(result.stdout) + str(result.stderr)


def test_an_alias_bomb_in_a_domain_file_is_a_usage_error_naming_it(pytester: pytest.Pytester, run_pytest_once):
    pytester.makefile(".yaml", llmbias=ROSTER + "domains: {paths: [domains]}\n")
    rows = ["name: bomb", 'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    (pytester.path / "domains").mkdir()
    (pytester.path / "domains" / "bomb.yaml").write_text("\n".join(rows) + "\n", encoding="utf-8")
    pytester.makepyfile(MARKED.format(domain="bomb", categories=None, extra=""))
    start = time.perf_counter()
    result = run_pytest_once("--llmbias-offline")
    assert time.perf_counter() - start < 30
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-llmbias: *bomb.yaml:*: the YAML's aliases expand it to more than*"])
    assert "INTERNALERROR" not in str(result.stdout) + str(result.stderr)
