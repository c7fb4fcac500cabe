"""An inline model on the command line reaches the run; a broken one is a usage error naming the option."""

from __future__ import annotations

import pytest

TEST = """
import pytest

@pytest.mark.bias_responses("china_sensitive", categories=["tibet"], models="target")
def test_x(bias_responses):
    pass
"""


def test_an_inline_target_is_used_and_a_broken_one_named(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", llmbias="baselines: [openai/b1, openai/b2]\n")
    pytester.makepyfile(TEST)
    inline = '{model: openai/x, alias: x-local, api_base: "http://127.0.0.1:9/v1", system: "Be brief."}'
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--llmbias-target={inline}", "--llmbias-plan")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*x-local*"])
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--llmbias-target={model: openai/x, oops")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmbias-target: the inline model*does not parse as YAML at column*"])
