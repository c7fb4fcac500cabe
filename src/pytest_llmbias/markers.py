"""The checks of a marker's arguments, shared by every marker.

Each marker parses into a frozen spec: ``bias_responses`` into a
:class:`~pytest_llmbias.planning.request.ResponseRequest`, each gate marker into its gate's spec
(:func:`pytest_llmbias.gates.parse_marker` picks the parser). A bad argument raises
:class:`ConfigError` naming the marker and the accepted arguments, which the plugin reports as a
``pytest.UsageError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

from pytest_llmbias.choices import Choice
from pytest_llmbias.errors import ConfigError

C = TypeVar("C", bound=Choice)

#: the argument every marker takes besides its spec's fields: the recorded release it compares
#: with, taken off before the spec is parsed (see :func:`pytest_llmbias.gates.marker_release`)
AGAINST = "against"


def signature_of(spec: type) -> str:
    """``domain, *, key=default, ..., against=None`` from a spec dataclass whose first field is
    the domain (``against``: see :data:`AGAINST`)."""
    parts = []
    for f in dataclasses.fields(spec):
        if f.name == "domain":
            parts.append("domain, *" if f.default is dataclasses.MISSING else f"domain={f.default!r}, *")
        elif f.default is not dataclasses.MISSING:
            default = f.default.value if isinstance(f.default, Choice) else f.default
            parts.append(f"{f.name}={default!r}")
    return ", ".join([*parts, f"{AGAINST}=None"])


def bind(marker: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Bind ``args`` (the first one only: the domain) and ``kwargs`` to ``names``; an ``against``
    is left to :func:`pytest_llmbias.gates.marker_release`, which reads it before this is called."""
    accepted = ", ".join([*names, AGAINST])
    if len(args) > 1:
        raise ConfigError(
            f"@pytest.mark.{marker} takes the domain as its only positional argument; "
            f"pass the rest by keyword ({accepted})"
        )
    bound = {k: v for k, v in kwargs.items() if k != AGAINST}
    if args:
        if "domain" in bound:
            raise ConfigError(f"@pytest.mark.{marker}: 'domain' given twice")
        bound["domain"] = args[0]
    for key in bound:
        if key not in names:
            raise ConfigError(f"@pytest.mark.{marker}: unknown argument {key!r}; accepted: {accepted}")
    domain = bound.get("domain")
    if not isinstance(domain, str) or not domain.strip():
        raise ConfigError(f"@pytest.mark.{marker} needs a domain: a built-in name, a configured name, or a path")
    return bound


def str_tuple(marker: str, key: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a non-empty list of names, got {value!r}")
    return tuple(value)


def positive_int(marker: str, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a positive integer, got {value!r}")
    return value


def positive_float(marker: str, key: str, value: Any, *, upper: float | None = None) -> float | None:
    """A positive finite real number (numpy scalars included, bools not), as a float; None stays None."""
    import numbers

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) > 0 or value != value:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a positive number, got {value!r}")
    if upper is not None and not value < upper:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be below {upper}, got {value!r}")
    return float(value)


@overload
def choice(marker: str, key: str, value: Any, enum: type[C], *, optional: Literal[False] = False) -> C: ...
@overload
def choice(marker: str, key: str, value: Any, enum: type[C], *, optional: bool) -> C | None: ...
def choice(marker: str, key: str, value: Any, enum: type[C], *, optional: bool = False) -> C | None:
    """``value`` as a member of ``enum`` (None allowed when ``optional``); an error lists the
    accepted values."""
    if value is None and optional:
        return None
    try:
        return enum.parse(value)
    except ValueError:
        shown = ("None | " if optional else "") + enum.accepted()
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be one of {shown}, got {value!r}") from None


def real(marker: str, key: str, value: Any) -> float:
    """Any real number but a bool (numpy scalars included), as a float; finite."""
    import math
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a finite number, got {value!r}")
    return float(value)


def fraction(marker: str, key: str, value: Any) -> float:
    """A number strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a number between 0 and 1 (exclusive), got {value!r}")
    return float(value)


def share(marker: str, key: str, value: Any) -> float | None:
    """None, or a share in [0, 1) (0: nothing may be dropped)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be a share in [0, 1), got {value!r}")
    return float(value)


#: the most looks a group-sequential gate may take
MAX_LOOKS = 20


def design(marker: str, bound: Mapping[str, Any]) -> dict[str, Any]:
    """A gate marker's group-sequential design: ``looks`` (1 to :data:`MAX_LOOKS`) and
    ``spending`` (see :class:`~pytest_llmbias.choices.Spending`), each None (the run's
    ``collection.looks`` and ``collection.spending``) when the marker leaves it out."""
    from pytest_llmbias.choices import Spending

    looks = bound.get("looks")
    if looks is not None and (positive_int(marker, "looks", looks) is None or looks > MAX_LOOKS):
        raise ConfigError(f"@pytest.mark.{marker}: 'looks' must be a whole number from 1 to {MAX_LOOKS}, got {looks!r}")
    spending = choice(marker, "spending", bound.get("spending"), Spending, optional=True)
    return {"looks": looks, "spending": None if spending is None else str(spending)}


def with_design(spec: Any, looks: int, spending: str) -> Any:
    """``spec`` with the design its marker left to the run (``looks``, ``spending``) filled in."""
    return dataclasses.replace(
        spec,
        looks=spec.looks if spec.looks is not None else looks,
        spending=spec.spending if spec.spending is not None else spending,
    )
