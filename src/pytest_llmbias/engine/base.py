"""What every gate class shares: its marker's row in the catalog and its spec class."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar


class SpecGate:
    """A gate's marker name, help and argument parsing, from ``marker`` (its row in
    :data:`pytest_llmbias.catalog.MARKERS`) and ``spec`` (a frozen dataclass with a ``parse``
    classmethod). Subclasses add ``plan`` and ``evaluate``."""

    marker: ClassVar[str]
    spec: ClassVar[Any]  # a frozen dataclass type with a ``parse`` classmethod

    @property
    def help(self) -> str:
        from pytest_llmbias.catalog import BY_NAME

        return BY_NAME[self.marker].help

    def parse(self, a: tuple[Any, ...], kw: Mapping[str, Any]) -> Any:
        return self.spec.parse(a, kw)

    def signature(self) -> str:
        from pytest_llmbias.markers import signature_of

        return signature_of(self.spec)

    def at_level(self, spec: Any, alpha: float) -> Any | None:
        """``spec`` set so that the gate fails a good target at most ``alpha`` of the time, for a
        session that shares one false-alarm rate among its gates (``--llmbias-suite-alpha``); None
        when its false-alarm rate is not a level it can be set to (a TOST's comes from its margin)."""
        return None
