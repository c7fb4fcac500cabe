"""Model clients over litellm: retry/backoff, rate limits, and the fixtures' ``LLM`` handle."""

from __future__ import annotations

from pytest_llmbias.clients.litellm_client import ModelClient, classify
from pytest_llmbias.clients.ratelimit import RateLimiter
from pytest_llmbias.clients.retry import RetryPolicy, parse_retry_after

__all__ = ["ModelClient", "RateLimiter", "RetryPolicy", "classify", "parse_retry_after"]
