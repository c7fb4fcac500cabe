"""Views of the session with settings of their own: :class:`SessionView` (the store and the
scorers are the session's), and :class:`ReleaseView`, the session as a gate sees it when its
marker names a release of its own (``against=``).

A marker's ``against="v1"`` compares its target with release v1 whatever the run's
``--llmbias-against`` says (or when it names none). The view holds the settings of that
comparison (:func:`pytest_llmbias.releases.release.settings_against`: the release first among the
baselines, the configured baselines after it for context, its record among the snapshots) and
hands everything else to the session, so that the calls of every marker still go out as one
plan, deduplicated, and the answers land in one store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmbias.planning.request import plan_calls, read_responses

if TYPE_CHECKING:
    from pytest_llmbias.config.settings import Settings
    from pytest_llmbias.domains import Domain
    from pytest_llmbias.planning.collector import FollowUp, PlannedCall
    from pytest_llmbias.planning.request import ResponseRequest
    from pytest_llmbias.planning.response_set import ResponseSet
    from pytest_llmbias.scoring.embedding import EmbeddingScorer
    from pytest_llmbias.scoring.features import FeatureRegistry
    from pytest_llmbias.store.calls import ModelCall, Response
    from pytest_llmbias.store.response_store import ResponseStore


class SessionView:
    """The session with ``settings`` of its own: the store and the scorers are the session's.
    :class:`ReleaseView` and the stand-ins of ``--llmbias-plan`` build on it."""

    def __init__(self, session: Any, settings: Settings) -> None:
        # ``session`` is the BiasSession (not imported: the session imports this module)
        self._session = session
        self.settings = settings

    @property
    def store(self) -> ResponseStore:
        return self._session.store

    def embedding_scorer(self) -> EmbeddingScorer:
        return self._session.embedding_scorer()

    def prefetch_embeddings(self, instruction: str | None) -> FollowUp:
        return self._session.prefetch_embeddings(instruction)

    @property
    def features(self) -> FeatureRegistry:
        return self._session.features

    def feature_values(
        self, feature: str, texts: Sequence[str], references: Sequence[str | None] | None = None
    ) -> list[float]:
        return self._session.feature_values(feature, texts, references)


class ReleaseView(SessionView):
    """A :class:`~pytest_llmbias.engine.protocol.GateSession` over ``session`` with ``settings``
    that compare the target with another recorded release (see the module docstring)."""

    @property
    def errors(self) -> Mapping[str, str]:
        return self._session.errors

    def domain(self, name: str) -> Domain:
        return self._session.domain(name, against=self.settings.release.against)

    def inconclusive(self, exc: Exception, domain: str) -> Exception:
        return self._session.inconclusive(exc, domain, against=self.settings.release.against)

    def plan(self, request: ResponseRequest, then: Sequence[FollowUp] = ()) -> None:
        self._session.plan_calls(plan_calls(request, self.settings, self.domain(request.domain), then))

    def plan_calls(self, calls: Sequence[PlannedCall]) -> None:
        self._session.plan_calls(calls)

    def add_round(self, advance: Callable[[], None]) -> None:
        self._session.add_round(advance)

    def at_share(self, spec: Any) -> Any:
        return self._session.at_share(spec)

    def responses(self, request: ResponseRequest) -> ResponseSet:
        self._session.ensure_collected()
        return read_responses(request, self.settings, self.domain(request.domain), self.store.get, self.errors)

    def read_calls(self, calls: Sequence[tuple[str, str, ModelCall]], what: str) -> dict[str, Response]:
        return self._session.read_calls(calls, what)
