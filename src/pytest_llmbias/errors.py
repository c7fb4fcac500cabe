"""The exceptions the core raises. The pytest plugin turns them into usage errors or test failures."""

from __future__ import annotations


class LLMBiasError(Exception):
    """Base class of every error raised by pytest-llmbias."""


class ConfigError(LLMBiasError):
    """Bad user input: a settings file, a command-line option, a marker argument, a domain file.

    The plugin reports it as a ``pytest.UsageError``: the session stops before any model is called.
    """


class DomainError(ConfigError):
    """A domain cannot be found, parsed or validated."""


class StoreError(LLMBiasError):
    """The on-disk response store or a snapshot file cannot be read or written."""


class ProviderError(LLMBiasError):
    """A model call failed for good (after the retries it was allowed)."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class MissingResponsesError(LLMBiasError):
    """Responses a test needs are not available: an offline miss or a failed call."""
