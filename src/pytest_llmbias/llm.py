"""``LLM``: the handle the ``llm_target``, ``llm_baselines`` and ``llm_judge`` fixtures give tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmbias.errors import ConfigError, LLMBiasError
from pytest_llmbias.store.calls import ModelCall, Response

if TYPE_CHECKING:
    from pytest_llmbias.config.settings import ModelSpec
    from pytest_llmbias.session import BiasSession


class LLM:
    """One configured model. Calls go through the session's store, so a repeated prompt is served
    from disk, and in offline mode a prompt that was never stored fails naming the model.

    ``sample`` picks an independent draw (its own store entry and seed); ``params`` override the
    generation settings for this call.
    """

    def __init__(self, session: BiasSession, spec: ModelSpec) -> None:
        self._session = session
        self.spec = spec

    @property
    def alias(self) -> str:
        return self.spec.alias

    @property
    def model(self) -> str:
        return self.spec.model

    def __repr__(self) -> str:
        return f"LLM(alias={self.alias!r}, model={self.model!r})"

    def _call(self, prompt: str | Sequence[Mapping[str, str]], sample: int, params: Mapping[str, Any]) -> ModelCall:
        if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
            raise ValueError(f"sample must be a non-negative integer, got {sample!r}")
        return ModelCall.build(self.spec, prompt, self._session.settings.generation, sample=sample, params=params)

    def complete(self, prompt: str | Sequence[Mapping[str, str]], *, sample: int = 0, **params: Any) -> Response:
        """The full :class:`Response` (text, usage, latency, where it came from).

        Raises :class:`~pytest_llmbias.errors.ProviderError` (the call failed for good) or
        :class:`~pytest_llmbias.errors.MissingResponsesError` (offline, nothing stored), with the
        frames of the plugin and of litellm cut from its traceback.
        """
        __tracebackhide__ = True
        try:
            return self._session.run(self._session.complete(self.spec, self._call(prompt, sample, params)))
        except LLMBiasError as exc:
            raise _bare(exc) from None

    def ask(self, prompt: str | Sequence[Mapping[str, str]], *, sample: int = 0, **params: Any) -> str:
        """The model's answer to ``prompt`` (a string, or a list of chat messages)."""
        __tracebackhide__ = True
        return self.complete(prompt, sample=sample, **params).text

    async def acomplete(self, prompt: str | Sequence[Mapping[str, str]], *, sample: int = 0, **params: Any) -> Response:
        """The async form of :meth:`complete`."""
        __tracebackhide__ = True
        try:
            return await self._session.run_async(self._session.complete(self.spec, self._call(prompt, sample, params)))
        except LLMBiasError as exc:
            raise _bare(exc) from None

    async def aask(self, prompt: str | Sequence[Mapping[str, str]], *, sample: int = 0, **params: Any) -> str:
        """The async form of :meth:`ask`, for async tests."""
        __tracebackhide__ = True
        return (await self.acomplete(prompt, sample=sample, **params)).text


def _bare(exc: LLMBiasError) -> LLMBiasError:
    """``exc`` without the frames it crossed (the session loop, the client, litellm): what a test
    shows of a failed call is the test's own line and the plugin's message."""
    exc.__cause__ = None
    exc.__context__ = None
    return exc.with_traceback(None)


def role_llms(session: BiasSession, which: str) -> LLM | tuple[LLM, ...]:
    """The roster's ``"target"``, its ``"baselines"`` (a tuple, in configured order) or its
    ``"judge"``, each an :class:`LLM`; ConfigError when the roster has none."""
    settings = session.settings
    if which == "target":
        settings.require_roster(min_baselines=0)
        return LLM(session, settings.target)  # type: ignore[arg-type]
    if which == "baselines":
        settings.require_roster(min_baselines=1)
        return tuple(LLM(session, spec) for spec in settings.baselines)
    if settings.judge is None:
        raise ConfigError("no judge model configured: set 'judge' in llmbias.yaml or pass --llmbias-judge MODEL")
    return LLM(session, settings.judge)
