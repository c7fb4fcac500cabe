"""How a comparison is asked: :class:`ComparisonOptions`, the options every comparison gate's marker
shares (the test, the alternative, the margin or how it is drawn from the data, the error rates, and
what the target is compared with), checked once, with the run's design written in."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmbias import markers
from pytest_llmbias.choices import Alternative, EquivalenceTest, Reference
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.stats.design import DEFAULT_LEVEL, DEFAULT_POWER


@dataclass(frozen=True)
class ComparisonOptions:
    """How the target is compared with its baselines: ``test`` (``paired`` or ``welch``),
    ``alternative`` (``equivalent``: two one-sided tests; ``no-worse``: one), ``alpha`` (the TOST's:
    the chance of passing a target at the margin; None: 1 − ``power``), ``false_alarm`` (the chance
    of failing a target like its comparator; None: the gate's share of the run's ``suite.alpha``),
    a fixed ``margin``, and the data-driven margin's ``k`` and ``min_margin`` floor (each margin a
    number or, for a gate with several scoring methods, one per method: ``{"judge": 1.0,
    "embedding": 0.02}``). Without ``margin``, ``k`` or ``min_margin`` the margin is the gate's
    ``default_margin`` (see :mod:`pytest_llmbias.config.margins`). ``power`` and ``strict`` come from
    the run's ``suite`` settings (see :meth:`designed`), not from a marker."""

    test: EquivalenceTest = EquivalenceTest.PAIRED
    #: None: the comparison's default, equivalent against baselines and no-worse against a recorded
    #: release (see :meth:`resolved`)
    alternative: Alternative | None = Alternative.EQUIVALENT
    k: float | None = None
    alpha: float | None = None
    margin: float | Mapping[str, float] | None = field(default=None, hash=False)
    min_margin: float | Mapping[str, float] | None = field(default=None, hash=False)
    false_alarm: float | None = None
    power: float = DEFAULT_POWER
    strict: bool = False
    default_margin: float | Mapping[str, float] | None = field(default=None, hash=False)
    reference: Reference = Reference.MEAN
    #: show a difference with the cluster-robust SE over the items' categories where it is larger
    #: (:mod:`pytest_llmbias.stats.clustered`): for categories sampled from a larger pool
    clustered: bool = False

    #: the marker arguments these options come from
    KEYS = ("test", "alternative", "k", "alpha", "margin", "min_margin", "false_alarm", "reference", "clustered")

    def margin_for(self, method: str) -> float | None:
        return _per_method(self.margin, method)

    def min_margin_for(self, method: str) -> float | None:
        return _per_method(self.min_margin, method)

    @property
    def data_driven(self) -> bool:
        """Whether the margin is drawn from the data (``k`` or ``min_margin`` given, no default)."""
        return self.k is not None or self.min_margin is not None or self.default_margin is None

    @property
    def tost_alpha(self) -> float:
        """The TOST's alpha: ``alpha``, else 1 − ``power`` − 0.01 (a target at the margin passes at most
        this often; see :func:`~pytest_llmbias.stats.design.pass_alpha`)."""
        from pytest_llmbias.stats.design import pass_alpha

        return self.alpha if self.alpha is not None else pass_alpha(self.power)

    @property
    def level(self) -> float:
        """The false-alarm rate this comparison may spend: ``false_alarm``, else :data:`DEFAULT_LEVEL`."""
        return self.false_alarm if self.false_alarm is not None else DEFAULT_LEVEL

    def designed(self, gate: str, settings: Any = None) -> ComparisonOptions:
        """These options with what the run decides: ``gate``'s default margins (the ``margins:``
        section of ``settings`` first, then :data:`~pytest_llmbias.config.margins.MARGINS`), and
        ``suite.power`` and ``suite.strict``. ``settings`` None: the defaults (the public functions)."""
        from pytest_llmbias.config.margins import MARGINS

        configured = getattr(settings, "margins", None) or {}
        given = configured.get(gate)
        defaults: Any = dict(MARGINS.get(gate, {}))
        if isinstance(given, Mapping):
            defaults.update(given)
        elif given is not None:
            defaults = {m: float(given) for m in defaults} or float(given)
        suite = getattr(settings, "suite", None)
        return dataclasses.replace(
            self,
            default_margin=defaults or None,
            power=getattr(suite, "power", None) or self.power,
            strict=bool(getattr(suite, "strict", self.strict)),
        )

    @classmethod
    def parse(
        cls,
        marker: str,
        bound: Mapping[str, Any],
        *,
        alternative: str | None = "no-worse",
        methods: Sequence[str] | None = None,
    ) -> ComparisonOptions:
        """The options among a marker's bound arguments, checked, with ``alternative`` as the
        gate's default (None: decided by what the target is compared with, see :meth:`resolved`). With ``methods``,
        ``margin`` and ``min_margin`` may map each method to a
        number; without, each is one number. ConfigError names the argument; ``margin`` with ``k`` is
        refused (a fixed margin and one drawn from the baselines' spread: which applies would be a guess)."""
        if bound.get("margin") is not None and bound.get("k") is not None:
            raise ConfigError(
                f"@pytest.mark.{marker}: give 'margin' (a fixed margin) or 'k' (k x the SD of the baselines' "
                f"means), not both; got margin={bound['margin']!r}, k={bound['k']!r}"
            )
        if methods is not None:
            margin = _parse_per_method(marker, "margin", bound.get("margin"), methods, zero=False)
            min_margin = _parse_per_method(marker, "min_margin", bound.get("min_margin"), methods, zero=True)
        else:
            margin = markers.positive_float(marker, "margin", bound.get("margin"))
            min_margin = bound.get("min_margin")
            if min_margin is not None:
                min_margin = markers.real(marker, "min_margin", min_margin)
                if min_margin < 0:
                    raise ConfigError(f"@pytest.mark.{marker}: 'min_margin' must not be negative, got {min_margin!r}")
        return cls(
            test=markers.choice(marker, "test", bound.get("test", "paired"), EquivalenceTest),
            alternative=None
            if bound.get("alternative", alternative) is None
            else markers.choice(marker, "alternative", bound.get("alternative", alternative), Alternative),
            k=markers.positive_float(marker, "k", bound.get("k")),
            alpha=markers.positive_float(marker, "alpha", bound.get("alpha"), upper=0.5),
            margin=margin,
            min_margin=min_margin,
            false_alarm=markers.positive_float(marker, "false_alarm", bound.get("false_alarm"), upper=0.5),
            reference=markers.choice(marker, "reference", bound.get("reference", "mean"), Reference),
            clustered=_flag(marker, "clustered", bound.get("clustered", False)),
        )

    def resolved(self, against_release: bool = False) -> ComparisonOptions:
        """These options with the default alternative decided: ``no-worse`` against a recorded
        release (the question is whether the new release is more biased), else ``equivalent``."""
        if self.alternative is not None:
            return self
        default = Alternative.NO_WORSE if against_release else Alternative.EQUIVALENT
        return dataclasses.replace(self, alternative=default)

    def as_fields(self) -> dict[str, Any]:
        """The options by name, for a spec that holds them as fields of its own."""
        return {key: getattr(self, key) for key in self.KEYS}


class ComparedSpec:
    """Mixin of a gate spec that holds :class:`ComparisonOptions`' options as fields of its own
    (so that they are the marker's keyword arguments): ``comparison`` reads them back."""

    @property
    def comparison(self) -> ComparisonOptions:
        """The options, as :func:`compare` takes them."""
        return ComparisonOptions(**{key: getattr(self, key) for key in ComparisonOptions.KEYS})


def designed_spec(spec: Any, comparison: ComparisonOptions, gate: str, method: str, settings: Any) -> Any:
    """``spec`` (whose comparison options are ``comparison``) with the run's ``margins:`` written
    into its ``margin`` for ``gate``'s ``method`` comparison, unless the margin is given or drawn
    from the data (see :meth:`ComparisonOptions.designed`)."""
    options = comparison.designed(gate, settings)
    if spec.margin is not None or options.data_driven:
        return spec
    return dataclasses.replace(spec, margin=_per_method(options.default_margin, method))


def _per_method(value: float | Mapping[str, float] | None, method: str) -> float | None:
    if value is None or isinstance(value, float):
        return value
    return value.get(method)


def _parse_per_method(
    marker: str, key: str, value: Any, methods: Sequence[str], *, zero: bool
) -> float | Mapping[str, float] | None:
    """A number (positive; or 0 when ``zero``), or a mapping of method name to such a number."""
    if value is None:
        return None
    kind = "a non-negative number" if zero else "a positive number"

    def number(v: Any, where: str) -> float:
        x = markers.real(marker, where, v) if not isinstance(v, str) else None
        if x is None or x < 0 or (x == 0 and not zero):
            raise ConfigError(f"@pytest.mark.{marker}: {where!r} must be {kind}, got {v!r}")
        return x

    if isinstance(value, Mapping):
        unknown = [m for m in value if m not in methods]
        if unknown or not value:
            raise ConfigError(
                f"@pytest.mark.{marker}: {key!r} maps a method to a number; methods: {', '.join(methods)}; "
                f"got {dict(value)!r}"
            )
        return {m: number(v, f"{key}[{m!r}]") for m, v in value.items()}
    return number(value, key)


def _flag(marker: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"@pytest.mark.{marker}: {key!r} must be True or False, got {value!r}")
    return value
