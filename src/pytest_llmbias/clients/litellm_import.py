"""The one import of litellm: offline-safe (its price map from the package, not the internet) and
quiet. Every module that needs litellm asks here, so the settings are made before its first import."""

from __future__ import annotations

import os
from typing import Any

_litellm: Any = None


def import_litellm() -> Any:
    """Import litellm once, offline-safe and quiet."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm

        try:
            # The OpenAI SDK's resources load on the first call through it (0.6 s with the event
            # loop blocked): load them with litellm, before any call takes a rate-limit turn.
            import openai.resources  # noqa: F401
        except ImportError:  # pragma: no cover - litellm depends on openai
            pass
        litellm.suppress_debug_info = True
        _litellm = litellm
    return _litellm
