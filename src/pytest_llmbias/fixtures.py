"""The plugin's fixtures: ``bias_responses``, ``bias_result`` and the ``llm_*`` models. Registered
by :mod:`pytest_llmbias.plugin` when pytest configures it; each reads the run's state that the
plugin keeps on the config and on the test item.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmbias.plugin import SPEC_KEY, plugin_of
from pytest_llmbias.plugin.failures import shown

if TYPE_CHECKING:
    from pytest_llmbias.llm import LLM
    from pytest_llmbias.planning.response_set import ResponseSet


@pytest.fixture
def bias_responses(request: pytest.FixtureRequest) -> ResponseSet:
    """The responses ``@pytest.mark.bias_responses(...)`` asked for (a ``ResponseSet``)."""
    from pytest_llmbias.errors import MissingResponsesError, StoreError

    specs = request.node.stash.get(SPEC_KEY, {})
    if "bias_responses" not in specs:
        pytest.fail(
            "the bias_responses fixture needs @pytest.mark.bias_responses(domain=...) on the test", pytrace=False
        )
    plugin = plugin_of(request.config)
    with shown("test"):  # any other error of the plugin's: its class and message
        try:
            return plugin.session_for(request.node, "bias_responses").responses(specs["bias_responses"])
        except (MissingResponsesError, StoreError) as exc:
            message = str(exc)
    pytest.fail(message, pytrace=False)


@pytest.fixture
def bias_result(request: pytest.FixtureRequest) -> Any:
    """The result of the test's gate marker (``.passed``, ``.verdict``, ``.why``, ``.report()``...):
    an ``EquivalentResult`` for ``bias_equivalent``, an ``ImpactRatioGateResult`` for
    ``bias_impact_ratio``, a ``BiasIndexGateResult``, ``StanceResult`` or ``PreferenceResult``
    for the others, or what an added gate returns."""
    if plugin_of(request.config).gate_marker(request.node) is None:
        pytest.fail(
            "the bias_result fixture needs a gate marker: @pytest.mark.bias_equivalent(...), "
            "bias_impact_ratio, bias_index, bias_stance, bias_preference or one a conftest adds",
            pytrace=False,
        )
    with shown("test"):
        return plugin_of(request.config).gate_result(request.node)


def _llm(config: pytest.Config, which: str) -> Any:
    from pytest_llmbias.errors import ConfigError
    from pytest_llmbias.llm import role_llms

    with shown("test"):
        try:
            return role_llms(plugin_of(config).session, which)
        except ConfigError as exc:
            message = f"pytest-llmbias: {exc}"
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def llm_target(pytestconfig: pytest.Config) -> LLM:
    """The target model: ``.ask(prompt) -> str`` (and ``await .aask(prompt)``), through the store."""
    return _llm(pytestconfig, "target")


@pytest.fixture(scope="session")
def llm_baselines(pytestconfig: pytest.Config) -> tuple[LLM, ...]:
    """The baseline models, in configured order (each an ``LLM``)."""
    return _llm(pytestconfig, "baselines")


@pytest.fixture(scope="session")
def llm_judge(pytestconfig: pytest.Config) -> LLM:
    """The judge model (an ``LLM``)."""
    return _llm(pytestconfig, "judge")
