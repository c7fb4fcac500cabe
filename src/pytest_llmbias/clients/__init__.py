"""Model clients: one client per model over two transports (litellm, or the direct
OpenAI-compatible one), retry and backoff, the adaptive limit and the rpm and tpm caps, prices."""

from __future__ import annotations

from pytest_llmbias.clients.litellm_client import ModelClient, classify
from pytest_llmbias.clients.openai_transport import OpenAITransport, resolve_transport
from pytest_llmbias.clients.ratelimit import AdaptiveLimit, RateLimiter, TokenLimiter
from pytest_llmbias.clients.retry import RetryPolicy, parse_retry_after

__all__ = [
    "AdaptiveLimit",
    "ModelClient",
    "OpenAITransport",
    "RateLimiter",
    "RetryPolicy",
    "TokenLimiter",
    "classify",
    "parse_retry_after",
    "resolve_transport",
]
