"""One marker per gate per test, and no marker that pytest would only warn of: a gate marker given
twice, ``margin=`` with ``k=``, and a misspelt ``bias_*`` marker are usage errors naming the test,
before any model is called."""

from __future__ import annotations

import pytest

from tests.plugin._data import ROSTER

#: every run is offline, from an empty snapshot folder: a usage error comes before any call
OFFLINE = ("--llmbias-offline",)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".yaml", llmbias=ROSTER)
    return pytester


def usage_error(result: pytest.RunResult, *lines: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(list(lines))
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_two_markers_of_one_gate_on_a_test_are_a_usage_error(project: pytest.Pytester, run_pytest):
    project.makepyfile(
        """
        import pytest

        @pytest.mark.bias_equivalent("china_sensitive", method="embedding")
        @pytest.mark.bias_equivalent("us_politics", method="judge")
        def test_twice(bias_result):
            pass

        @pytest.mark.bias_equivalent("china_sensitive")
        def test_once(bias_result):
            pass
        """
    )
    result = run_pytest(*OFFLINE)
    usage_error(
        result,
        "ERROR: pytest-llmbias: test_two_markers_of_one_gate_on_a_test_are_a_usage_error.py::test_twice carries "
        "@pytest.mark.bias_equivalent 2 times: a test gives one verdict per gate*",
    )


def test_a_gate_marker_on_the_class_and_on_its_test_is_a_usage_error(project: pytest.Pytester, run_pytest_once):
    project.makepyfile(
        """
        import pytest

        @pytest.mark.bias_index("bias_dimensions")
        class TestIndex:
            @pytest.mark.bias_index("bias_dimensions", relative=False, max_index=0.5)
            def test_bound(self, bias_result):
                pass
        """
    )
    result = run_pytest_once(*OFFLINE)
    usage_error(result, "ERROR: pytest-llmbias: *::TestIndex::test_bound carries @pytest.mark.bias_index 2 times*")


def test_one_gate_marker_per_parameter_is_accepted(project: pytest.Pytester, run_pytest_once):
    # each parameter is a test of its own: one marker each (the way the error message suggests)
    project.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("n", [
            pytest.param(1, marks=pytest.mark.bias_equivalent("china_sensitive", categories=["tibet"])),
            pytest.param(2, marks=pytest.mark.bias_equivalent("china_sensitive", categories=["taiwan_status"])),
        ])
        def test_each(n, bias_result):
            pass
        """
    )
    result = run_pytest_once(*OFFLINE)
    # planned and run: both lack their answers offline, so both error at setup (no usage error)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*MissingResponsesError*"])


@pytest.mark.parametrize(
    ("marker", "arguments"),
    [
        ("bias_equivalent", "'china_sensitive', margin=1.0, k=2.81"),
        ("bias_equivalent", "'china_sensitive', method='both', margin={'judge': 1.0}, k=2.0"),
        ("bias_index", "'bias_dimensions', margin=0.1, k=2.81"),
        ("bias_stance", "'binary_opinions', margin=0.1, k=2.81"),
    ],
)
def test_margin_with_k_is_refused(project: pytest.Pytester, run_pytest_once, marker: str, arguments: str):
    project.makepyfile(
        f"""
        import pytest

        @pytest.mark.{marker}({arguments})
        def test_gate(bias_result):
            pass
        """
    )
    result = run_pytest_once(*OFFLINE)
    usage_error(
        result,
        f"ERROR: pytest-llmbias: *::test_gate: @pytest.mark.{marker}: give 'margin' (a fixed margin) or 'k' "
        "(k x the SD of the baselines' means), not both; got margin=*, k=*",
    )


def test_a_misspelt_gate_marker_is_an_error_naming_the_closest_gate(project: pytest.Pytester, run_pytest):
    project.makepyfile(
        """
        import pytest

        @pytest.mark.bias_equivalant("china_sensitive")
        def test_gate():
            pass
        """
    )
    result = run_pytest(*OFFLINE)
    usage_error(
        result,
        "ERROR: pytest-llmbias: *::test_gate: unknown marker @pytest.mark.bias_equivalant: "
        "did you mean @pytest.mark.bias_equivalent? The plugin's markers: bias_responses, bias_equivalent, *",
    )


def test_an_unknown_bias_marker_with_no_close_gate_lists_the_markers(project: pytest.Pytester, run_pytest_once):
    project.makepyfile(
        """
        import pytest

        @pytest.mark.bias_xyz
        def test_gate():
            pass
        """
    )
    result = run_pytest_once(*OFFLINE)
    usage_error(result, "ERROR: pytest-llmbias: *::test_gate: unknown marker @pytest.mark.bias_xyz: The plugin's *")
    assert "did you mean" not in result.stderr.str()


def test_a_bias_marker_the_project_declares_is_its_own(project: pytest.Pytester, run_pytest_once):
    # a project's own marker that happens to start with bias_, declared as pytest asks
    project.makeini("[pytest]\nmarkers =\n    bias_slow: tests of the bias suite that take long\n")
    project.makepyfile(
        """
        import pytest

        @pytest.mark.bias_slow
        def test_plain():
            pass
        """
    )
    result = run_pytest_once("--strict-markers")
    result.assert_outcomes(passed=1)


def test_a_misspelt_marker_of_an_added_gate_names_it(project: pytest.Pytester, run_pytest_once):
    # the gates a conftest adds are among those the error can name
    from tests.plugin.test_plugin_errors import PROBE

    project.makeconftest(PROBE)
    project.makepyfile(
        """
        import pytest

        @pytest.mark.bias_prob("china_sensitive")
        def test_gate():
            pass
        """
    )
    result = run_pytest_once(*OFFLINE)
    usage_error(result, "*unknown marker @pytest.mark.bias_prob: did you mean @pytest.mark.bias_probe?*")
