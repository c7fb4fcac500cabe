"""The Gate protocol: what every gate provides, and what the session offers a gate.

A gate turns one marker into a verdict. It owns, in its own package under ``gates/``:

- its marker: the name, the spec (a frozen dataclass) and the parsing of the marker's arguments;
- its calls: :meth:`Gate.plan` checks the spec against the roster and the domain and registers
  the responses it needs with the session, with follow-ups for the calls that depend on them
  (the judge's rating of an answer) and for scoring that needs no network (embeddings);
- its scoring and evaluation: :meth:`Gate.evaluate` reads the responses back, scores them and
  runs the statistics into a result;
- its report: the result's ``report()`` text, ``summary_row()`` for the end-of-run table,
  ``to_dict()`` and ``table()`` for JSON (``table()`` is also ``to_frame()``), and the gate's
  ``figures()`` for the HTML report, drawn from the JSON entry alone so that a saved run can be
  re-rendered.

The session (:class:`GateSession`) is a service that knows no gate by name: settings, domains,
the store, planning and reading responses, the scorers. The registry in
:mod:`pytest_llmbias.gates` maps each marker name to its gate: a built-in gate is one package plus
its row in :data:`pytest_llmbias.catalog.MARKERS`; a gate from a ``conftest.py`` or another plugin
is registered by the ``pytest_llmbias_add_gates`` hook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from pytest_llmbias.config.settings import Settings
    from pytest_llmbias.domains.domain import Domain
    from pytest_llmbias.planning.collector import FollowUp, PlannedCall
    from pytest_llmbias.planning.request import ResponseRequest
    from pytest_llmbias.planning.response_set import ResponseSet
    from pytest_llmbias.report.frames import Table
    from pytest_llmbias.report.plots import Figure
    from pytest_llmbias.scoring.embedding import EmbeddingScorer
    from pytest_llmbias.scoring.features import FeatureRegistry
    from pytest_llmbias.store.calls import ModelCall, Response
    from pytest_llmbias.store.response_store import ResponseStore

SpecT = TypeVar("SpecT")
ResultT = TypeVar("ResultT", bound="GateResult", covariant=True)


@runtime_checkable
class GateResult(Protocol):
    """What the plugin reads from a gate's result."""

    domain: str
    warnings: tuple[str, ...]

    @property
    def passed(self) -> bool: ...

    @property
    def verdict(self) -> str: ...

    def report(self) -> str:
        """The text a failing test prints: every figure behind the verdict."""
        ...

    def summary_row(self, nodeid: str) -> dict[str, Any]:
        """The end-of-run table's row: ``{"test", "domain", "methods": [{method, target,
        baselines, bound, p, verdict}, ...]}``, JSON-friendly so it crosses pytest-xdist."""
        ...

    def reliability(self) -> dict[str, Any]:
        """How far the verdict can be trusted: the test, the false-alarm rate it was designed for
        and, where the gate can tell, its ``power`` at these sample sizes (the probability that it
        fails a target off by the amount it is built to detect), for the gate as a whole or per
        check in a nested mapping (``{"judge": {..., "power": p}}``). ``--llmbias-plan`` reads the
        powers from here (:mod:`pytest_llmbias.engine.expected_power`)."""
        ...

    def to_dict(self) -> dict[str, Any]: ...

    def table(self) -> Table:
        """One row per model and item: the data of ``to_frame()``, the JSON report's ``table``
        and the HTML report's plots."""
        ...

    def to_frame(self) -> Any: ...


class GateSession(Protocol):
    """The services a gate may use. Implemented by :class:`pytest_llmbias.session.BiasSession`."""

    # read-only for a gate (a view of the session may compute them)
    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> ResponseStore: ...
    @property
    def errors(self) -> Mapping[str, str]: ...

    def domain(self, name: str) -> Domain: ...

    def plan(self, request: ResponseRequest, then: Sequence[FollowUp] = ()) -> None:
        """Register the calls of ``request``, each followed by ``then`` once its response is in."""
        ...

    def responses(self, request: ResponseRequest) -> ResponseSet:
        """The responses of ``request``, collected; MissingResponsesError naming what is missing."""
        ...

    def plan_calls(self, calls: Sequence[PlannedCall]) -> None:
        """Register calls a gate builds itself (in several languages, say), with their follow-ups."""
        ...

    def read_calls(self, calls: Sequence[tuple[str, str, ModelCall]], what: str) -> dict[str, Response]:
        """The responses of calls a gate built itself, by key; MissingResponsesError naming what is missing."""
        ...

    def embedding_scorer(self) -> EmbeddingScorer: ...

    def prefetch_embeddings(self, instruction: str | None) -> FollowUp:
        """A follow-up that embeds each answer in the background while calls are in flight."""
        ...

    @property
    def features(self) -> FeatureRegistry: ...

    def feature_values(
        self, feature: str, texts: Sequence[str], references: Sequence[str | None] | None = None
    ) -> list[float]: ...


class Gate(Protocol[SpecT, ResultT]):
    """One gate: a marker, its spec, its calls, its evaluation (see the module docstring)."""

    #: the marker's name, e.g. ``"bias_equivalent"``
    marker: str
    #: one line for ``pytest --markers``
    help: str

    def parse(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> SpecT:
        """The spec of a marker's arguments; ConfigError naming the accepted arguments."""
        ...

    def signature(self) -> str:
        """The marker's signature with every default, for ``pytest --markers`` and docs/markers.md."""
        ...

    def plan(self, spec: SpecT, session: GateSession) -> None:
        """Check ``spec`` against the roster and the domain (ConfigError), and register its calls."""
        ...

    def evaluate(self, spec: SpecT, session: GateSession) -> ResultT:
        """Read, score and test: the gate's result. Raises an LLMBiasError (or ValueError) when the
        data cannot give a verdict: missing responses, unparsable judge answers, zero variance."""
        ...

    def figures(self, entry: Mapping[str, Any]) -> list[Figure]:
        """The HTML report's plots of one gate, drawn from its JSON entry alone (``result``, the
        result's ``to_dict()``, and ``table``), so that a saved run re-renders without the run."""
        ...
