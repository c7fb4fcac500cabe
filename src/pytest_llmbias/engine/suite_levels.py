"""One false-alarm rate for the session (``--llmbias-suite-alpha``): the m gates whose false-alarm
rate is a level they can be set to (:meth:`~pytest_llmbias.engine.base.SpecGate.at_level`) share
alpha so that a good release fails any of them at most alpha of the time, whatever their
dependence. The others keep their own rate (a TOST's is set by its margin, not by a level), and
the reports say which.

- A gate with one look has all its answers before the first verdict of the session is reported
  (the session collects every call first), so these gates share alpha by **Holm's step-down**,
  run as rounds of Bonferroni: every gate not yet shown to violate is evaluated at alpha / (m −
  the gates shown so far); those that show a violation leave; the rounds stop when one shows none.
  Each gate's check is monotone in its level (a p-value under it, a bound at its confidence), so
  this rejects exactly what :func:`~pytest_llmbias.stats.multiple.holm` rejects on their p-values
  (:func:`step_down`; checked against it in the tests).
- A gate with several looks spends its level over the looks as it collects, so it gets alpha / m
  (**Bonferroni**) up front. Counting it among the m keeps the mixture valid: a true null among
  the Holm gates is compared with at most alpha / (m₀ + the false nulls outside them), one among
  the sequential gates with alpha / m, and the union of the two stays under alpha.

Every process of a run plans every gate and collects every answer (pytest-xdist's workers too),
so each computes the same levels.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pytest_llmbias.stats.multiple import BONFERRONI, HOLM

__all__ = ["Share", "SuiteShare", "step_down"]

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Share:
    """A gate's part of the session's alpha: ``level`` (None: it keeps its own rate) and the
    ``method`` that gave it (``"holm"``, ``"bonferroni"`` or None)."""

    alpha: float
    level: float | None
    method: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"suite_alpha": self.alpha, "suite_level": self.level, "suite_method": self.method}


def step_down(
    alpha: float, m: int, keys: Sequence[K], shows: Callable[[K, float], bool]
) -> dict[K, tuple[float, bool]]:
    """Holm's step-down over ``keys`` among ``m`` hypotheses (the others never rejected here),
    given ``shows(key, level)``: whether the key's test rejects at ``level`` (monotone in it).
    Returns per key the level it was last compared with and whether it was rejected. With
    p-values, ``shows = p <= level`` rejects what :func:`~pytest_llmbias.stats.multiple.holm`
    rejects (source: Holm 1979, the procedure in its equivalent rounds form)."""
    if not 0 < len(keys) <= m:
        raise ValueError(f"step_down needs 1 to m={m} keys, got {len(keys)}")
    out: dict[K, tuple[float, bool]] = {}
    left, rejected = list(keys), 0
    while left:
        level = alpha / (m - rejected)
        shown = [k for k in left if shows(k, level)]
        out.update({k: (level, k in shown) for k in left})
        if not shown:
            break
        rejected += len(shown)
        left = [k for k in left if k not in shown]
    return out


class SuiteShare:
    """The session's gates and their parts of ``alpha`` (None: each keeps its own rate). ``gates``
    maps a key (a test item and its marker) to its gate and its spec; ``looks``: the run's looks
    for a spec that sets none. Before :meth:`settle`, every settable gate's spec is at alpha / m
    (Bonferroni); :meth:`settle` runs Holm's step-down over the one-look gates once every answer
    is in, and :meth:`verdict` gives each gate's spec and result."""

    def __init__(self, alpha: float | None, gates: Mapping[Any, tuple[Any, Any]], *, looks: int = 1) -> None:
        self.alpha = alpha
        self._gates = dict(gates)
        settable = [k for k, (g, s) in self._gates.items() if alpha is not None and _at_level(g, s, alpha) is not None]
        self.m = len(settable)
        self._holm = [k for k in settable if (getattr(self._gates[k][1], "looks", None) or looks) == 1]
        self._shares = {k: Share(alpha, None, None) for k in self._gates} if alpha is not None else {}
        self._specs = {k: s for k, (_, s) in self._gates.items()}
        for k in settable:
            self._set(k, self.alpha / self.m, BONFERRONI)  # type: ignore[operator]
        self._results: dict[Any, Any] | None = None
        self._raised: dict[Any, Exception] = {}

    def _set(self, key: Any, level: float, method: str) -> None:
        gate, spec = self._gates[key]
        self._specs[key], self._shares[key] = _at_level(gate, spec, level), Share(self.alpha, level, method)  # type: ignore[arg-type]

    def keys(self) -> list[Any]:
        return list(self._gates)

    def spec(self, key: Any) -> Any:
        """The spec to evaluate: the gate's, set to its current level."""
        return self._specs[key]

    def share(self, key: Any) -> Share | None:
        """The key's part of the session's alpha (None without one)."""
        return self._shares.get(key)

    def settle(self, evaluate: Callable[[Any, Any], Any]) -> None:
        """Holm's step-down over the one-look gates (once): ``evaluate(key, spec)`` returns the
        gate's result (or the exception that stopped it); a result whose ``shown_violation`` is
        true is a rejection. The results at each gate's final level are kept for :meth:`verdict`;
        an exception ``evaluate`` raises for one gate is that gate's alone (raised by its verdict),
        and the others settle without it."""
        if self._results is not None:
            return
        self._results = {}
        if not self._holm:
            return
        seen: dict[tuple[Any, float], Any] = {}

        def shows(key: Any, level: float) -> bool:
            gate, spec = self._gates[key]
            try:
                seen[key, level] = result = evaluate(key, _at_level(gate, spec, level))
            except Exception as exc:  # noqa: BLE001 - raised again by this gate's verdict, not the first's
                seen[key, level], self._raised[key] = None, exc
                return False
            return getattr(result, "shown_violation", None) is True

        assert self.alpha is not None
        for key, (level, _) in step_down(self.alpha, self.m, self._holm, shows).items():
            self._set(key, level, HOLM)
            self._results[key] = seen[key, level]

    def verdict(self, key: Any, evaluate: Callable[[Any, Any], Any]) -> tuple[Any, Any]:
        """The key's spec at its level and its result, after :meth:`settle` (``evaluate`` as there)."""
        self.settle(evaluate)
        if key in self._raised:
            raise self._raised.pop(key)
        spec = self._specs[key]
        return spec, results[key] if key in (results := self._results or {}) else evaluate(key, spec)


def _at_level(gate: Any, spec: Any, level: float) -> Any | None:
    at_level = getattr(gate, "at_level", None)
    return at_level(spec, level) if at_level is not None else None
