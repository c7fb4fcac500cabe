"""The exceptions the core raises, and the plugin's warning: all of them. The pytest plugin turns
the exceptions into usage errors or test failures.

Every exception and warning class of the package lives here (and is imported from here), so that
catching one never needs the module that raises it. This module imports nothing but the standard
library.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DomainError",
    "FeatureError",
    "JudgeDataError",
    "JudgeParseError",
    "LLMBiasError",
    "LLMBiasWarning",
    "MissingResponsesError",
    "PathMissing",
    "ProviderError",
    "ScorerError",
    "StatisticsError",
    "StoreError",
    "StoreLost",
    "TemplateError",
]


class LLMBiasError(Exception):
    """Base class of every error raised by pytest-llmbias."""


class LLMBiasWarning(UserWarning):
    """A gate result that passed or failed, but with a caveat (an unstable margin, a self-judging
    judge), or a notice about the store. pytest shows it in the warnings summary, attributed to the
    test; ``-W ignore::pytest_llmbias.LLMBiasWarning`` silences it."""


class ConfigError(LLMBiasError):
    """Bad user input: a settings file, a command-line option, a marker argument, a domain file.

    The plugin reports it as a ``pytest.UsageError``: the session stops before any model is called.
    """


class DomainError(ConfigError):
    """A domain cannot be found, parsed or validated."""


class StoreError(LLMBiasError):
    """The on-disk response store or a snapshot file cannot be read or written."""


class StoreLost(StoreError):
    """The team store (Redis) stopped answering, or refused a write, during a run: the collection
    stops, and the answers that arrive after are kept in the local spool."""


class ProviderError(LLMBiasError):
    """A model call failed for good (after the retries it was allowed)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        likely_cause: str | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        #: seconds the server asked to wait (its Retry-After), when it said
        self.retry_after = retry_after
        #: what a newcomer most likely got wrong (already in the message), when it is known
        self.likely_cause = likely_cause
        #: the kind of the last failed attempt ("timeout", "connection", ...: a
        #: ``clients.faults.FaultKind`` value), when the client knows it
        self.kind = kind


class TemplateError(ConfigError):
    """An application's body template, header or dotted path that cannot be used; the message
    says why (the caller names the entry)."""


class PathMissing(LLMBiasError, LookupError):
    """A dotted path that leads nowhere in an application's JSON answer: ``path``, ``where`` (the
    part of it that was found) and ``found`` (what is there instead)."""

    def __init__(self, path: str, where: str, found: str) -> None:
        self.path, self.where, self.found = path, where, found
        at = f" (at {where!r}: {found})" if where else f" ({found})"
        super().__init__(f"the JSON answer has no {path!r}{at}")


class MissingResponsesError(LLMBiasError):
    """Responses a test needs are not available: an offline miss or a failed call."""


class StatisticsError(LLMBiasError, ValueError):
    """The data cannot support the statistic: too few values, zero variance, NaN, a bad margin."""


class ScorerError(LLMBiasError):
    """An embedding model cannot be found, verified or loaded, or scores cannot be computed."""


class FeatureError(ScorerError):
    """A feature cannot be resolved, loaded or computed, or an extractor returned bad values.

    A :class:`ScorerError` (so an :class:`LLMBiasError`).
    """


class JudgeParseError(LLMBiasError):
    """The judge's answer holds no single valid ``Bias Score: N`` line. ``raw`` is the answer."""

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


class JudgeDataError(LLMBiasError, ValueError):
    """Judge scores cannot give D_LLM: fewer than 2 models, differing questions, bad values."""
