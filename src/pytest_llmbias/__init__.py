"""pytest-llmbias: bias regression tests for large language models, as pytest markers.

Importing this package is cheap: it pulls in nothing heavier than the standard library.
"""

from __future__ import annotations

__version__ = "0.1.0.dev0"

__all__ = ["__version__"]
