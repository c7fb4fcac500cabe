"""The group-sequential design every gate shares: items in seeded batches, a verdict after each
batch with the error spent so far, and the rules that stop early.

A gate with ``looks=K`` asks its domain's *units* (a question; a counterfactual template with all
its concepts; an "A or B?" pair; a topic) in K batches as equal as they divide, in an order fixed by
a hash of the domain's name and each unit (:func:`batches`: the same on every run, shared by every
gate on the domain, so their batches are asked once). At look k the gate's own fixed procedure runs
on batches 1..k at the nominal level of the k-th boundary of
:func:`pytest_llmbias.stats.sequential.sequential_boundaries` (O'Brien-Fleming or Pocock type, the
gate's alpha spent), and :func:`decide` says what it does:

- A gate whose verdict is a comparison (a paired or Welch TOST, a no-worse test: the methods of
  ``bias_equivalent``, the relative checks of ``bias_index``, ``bias_stance``, ``bias_preference``)
  or whose pass otherwise needs evidence (``bias_preference``'s binomial TOST of an even split)
  spends alpha on *passing*: it passes at the first look whose test passes at the nominal level.
  It fails early when a method is shown worse than its margin at that level (``bias_preference``:
  its split shown further from even than the tolerance), or when its statistic
  (δ − d̄)/SE, or (δ − |d̄|)/SE for equivalence, is at or below the futility bound that spends
  :data:`FUTILITY_BETA` under "exactly like the baselines" (:func:`futile`). Both bounds are
  non-binding: the pass boundaries are those of a design without them, so stopping to fail can only
  lower the error of passing a target at its margin. A margin taken from the data (``k`` × SD of
  the baselines' means, or the floor) is the one the data so far give, so that the last look is
  exactly the fixed design's procedure (fixed from the first look instead, it failed targets
  halfway to the effect far more often: ``benchmarks/sequential.py``).
- A gate whose verdict is a test that fails on evidence (the permutation test of
  ``bias_impact_ratio``, a bound with ``confidence``: ``bias_stance``'s agreement, ``bias_index``'s
  ``max_index``) spends alpha on *failing*: it fails at the first look whose test fails at the
  nominal level, and passes early only when ``bias_impact_ratio``'s bootstrap interval lies wholly
  above the threshold (again non-binding: it can only lower the false-alarm rate).

The last look is the fixed procedure at the last nominal level: pass or fail.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from pytest_llmbias.errors import LLMBiasError, MissingResponsesError

FUTILITY_BETA = 0.01
"""The chance, spent over the looks, that futility stops a target exactly like its baselines (a
failure the fixed design might not have made): see :func:`futile`. From ``benchmarks/sequential.py``."""

#: verdicts that show the target worse than its margin or bound: fail at any look
SHOWN_WORSE = ("biased", "above bound")


def batches(units: Sequence[str], looks: int, seed: str) -> list[tuple[str, ...]]:
    """``units`` cut into ``looks`` batches in an order fixed by ``seed`` and each unit (the first
    batches one unit larger where they do not divide evenly), each batch in the order given."""
    order = sorted(dict.fromkeys(units), key=lambda u: hashlib.sha256(f"{seed}\0{u}".encode()).hexdigest())
    size, extra = divmod(len(order), looks)
    out, start = [], 0
    for k in range(looks):
        end = start + size + (1 if k < extra else 0)
        chosen = set(order[start:end])
        out.append(tuple(u for u in units if u in chosen))
        start = end
    return out


def futile(
    tost: Any,
    look: int,
    looks: int,
    alpha: float,
    spending: str,
    shares: Sequence[float],
    *,
    beta: float = FUTILITY_BETA,
) -> bool:
    """Whether a comparison that has not passed at ``look`` should stop and fail: its statistic
    Z = (δ − d̄)/SE (no-worse; (δ − |d̄|)/SE for equivalence) is at or below the futility bound that
    spends ``beta`` (:data:`FUTILITY_BETA`) under the alternative that the target is exactly like its
    baselines (d = 0, whose expected Z at the last look is δ/SE scaled to the whole design from this
    look's share ``shares[look - 1]`` of the information). ``tost`` is a
    :class:`~pytest_llmbias.stats.tost.TostResult`."""
    from pytest_llmbias.stats.sequential import sequential_boundaries

    if tost.se <= 0 or tost.margin <= 0:
        return False
    drift = tost.margin / (tost.se * shares[look - 1] ** 0.5)
    bounds = sequential_boundaries(looks, alpha, spending, beta=beta, drift=drift, information=shares)
    distance = tost.diff if tost.alternative == "no-worse" else abs(tost.diff)
    assert bounds.futility is not None  # a drift was given
    return bool((tost.margin - distance) / tost.se <= bounds.futility[look - 1])


def expected_calls(
    tost: Any, look: int, looks: int, alpha: float, spending: str, shares: Sequence[float]
) -> dict[str, float] | None:
    """The share of the fixed design's calls a comparison is expected to ask, from the boundaries
    and their crossing probabilities (:func:`~pytest_llmbias.stats.sequential.crossing_probabilities`)
    with the drift its look ``look`` measured (δ/SE scaled to the whole design): ``like`` a target
    exactly like its baselines, and ``at_margin`` one whose true difference is the margin. None
    without a spread."""
    from pytest_llmbias.stats.sequential import crossing_probabilities, sequential_boundaries

    if tost.se <= 0 or tost.margin <= 0:
        return None
    drift = tost.margin / (tost.se * shares[look - 1] ** 0.5)
    bounds = sequential_boundaries(looks, alpha, spending, beta=FUTILITY_BETA, drift=drift, information=shares)

    def share(theta: float) -> float:
        up, down = crossing_probabilities(bounds, theta)
        stops = [u + d for u, d in zip(up, down, strict=True)]
        # a stop at look k (all but the last) costs shares[k]; the rest run to the end (share 1)
        return sum(p * t for p, t in zip(stops[:-1], shares, strict=False)) + (1 - sum(stops[:-1])) * 1.0

    return {"like": share(drift), "at_margin": share(0.0)}


def comparisons(result: Any) -> list[Any]:
    """The TOST comparisons a result's verdict rests on: ``methods`` or ``relative``."""
    methods = getattr(result, "methods", None)
    if methods:
        return list(methods)
    relative = getattr(result, "relative", None)
    return [relative] if relative is not None else []


def decide(result: Any, look: int, looks: int, *, alpha: float, spending: str, shares: Sequence[float]) -> str:
    """``"pass"``, ``"fail"``, ``"fail (futility)"``, ``"pass (shown fair)"`` or ``"continue"``
    after the gate's fixed procedure at look ``look``'s nominal level gave ``result`` (see the
    module docstring)."""
    if look == looks:
        return "pass" if result.passed else "fail"
    methods = comparisons(result)
    if methods or getattr(result, "passes_on_evidence", False):  # spends alpha on passing
        # an underpowered comparison (neither shown within its margin nor off its comparator) waits
        if result.passed and not any(getattr(m, "underpowered", False) for m in methods):
            return "pass"
        shown = [m for m in methods if getattr(m, "shown_off", True)]  # failing needs the difference shown
        if (
            any(m.tost.verdict in SHOWN_WORSE for m in shown)
            or getattr(result, "verdict", None) in SHOWN_WORSE
            or getattr(result, "shown_worse", False)
        ):
            return "fail"
        if any(not m.tost.passed and futile(m.tost, look, looks, alpha, spending, shares) for m in shown):
            return "fail (futility)"
        return "continue"
    # spends alpha on failing: a failure at the nominal level stops; a pass waits for the last look
    if not result.passed and not getattr(result, "underpowered", False):
        return "fail"
    if result.passed and shown_fair(result):
        return "pass (shown fair)"
    return "continue"


def shown_fair(result: Any) -> bool:
    """``bias_impact_ratio`` passes before its last look only when its bootstrap interval lies
    wholly above the threshold, not merely when no disparity was shown yet."""
    interval = getattr(getattr(result, "target", None), "interval", None)
    return interval is not None and getattr(result, "threshold", None) is not None and interval.low >= result.threshold


def run_looks(
    evaluate: Callable[[tuple[str, ...], float, Any], Any],
    parts: Sequence[Sequence[str]],
    *,
    alpha: float,
    spending: str,
) -> tuple[Any | None, int, Exception | None]:
    """The looks of a gate over the batches ``parts`` (unit ids): ``evaluate(units, nominal,
    first)`` is the gate's fixed procedure on ``units`` at the nominal level, ``first`` the result
    of the first look that gave one (None before it; a gate fixes its margin from it). Returns
    ``(result, look, None)`` at the first look that decides, the result carrying the figures of
    ``sequential`` (``looks``, ``look``, ``decision``, ``spending``, ``alpha``, the ``nominal``
    levels and the error ``spent``, the ``units`` asked (``units_first`` at the first look) of
    ``units_max``, the size of each of the ``batches``, the share ``saved`` and,
    for a comparison, the share of calls ``expected`` like the baselines and at the margin), or
    ``(None, k, error)`` when look k's batch has no answers yet (``error``: what is missing).

    H0 and H1 are the gate's own; the boundaries keep its error at ``alpha`` over all the looks
    (Lan & DeMets 1983; see :mod:`pytest_llmbias.stats.sequential`)."""
    import dataclasses

    from pytest_llmbias.stats.sequential import sequential_boundaries

    looks = len(parts)
    bounds = sequential_boundaries(looks, alpha, spending)
    total = sum(len(p) for p in parts)
    shares = [sum(len(p) for p in parts[:j]) / total for j in range(1, looks + 1)]
    asked: tuple[str, ...] = ()
    first = None
    for k, part in enumerate(parts, 1):
        asked += tuple(part)
        try:
            result = evaluate(asked, bounds.nominal[k - 1], first)
        except MissingResponsesError as exc:
            return None, k, exc
        except (LLMBiasError, ValueError):
            if k == looks:
                raise
            continue  # too few items for a verdict yet (no variance, say): look again with more
        first = first or result
        made = decide(result, k, looks, alpha=alpha, spending=spending, shares=shares)
        if made == "continue":
            continue
        figures = {
            "looks": looks,
            "look": k,
            "decision": made,
            "spending": spending,
            "alpha": alpha,
            "nominal": list(bounds.nominal),
            "spent": list(bounds.spent),
            "units": len(asked),
            "units_first": len(parts[0]),
            "units_max": total,
            "saved": 1 - len(asked) / total,
            "batches": [len(p) for p in parts],
        }
        methods = comparisons(result)
        expected = expected_calls(methods[0].tost, k, looks, alpha, spending, shares) if methods else None
        if expected is not None:
            figures["expected"] = expected
        return dataclasses.replace(result, sequential=figures), k, None
    raise AssertionError("the last look always decides")


def sequential_line(q: Any) -> str:
    """The report's line on where a group-sequential gate stopped (``q``: its ``sequential``)."""
    return (
        f"{q['decision']} at look {q['look']} of {q['looks']} ({q['spending']} spending of alpha {q['alpha']:g}; "
        f"nominal level there {q['nominal'][q['look'] - 1]:.3g}; boundaries "
        + ", ".join(f"{x:.3g}" for x in q["nominal"])
        + f"): {q['units']} of {q['units_max']} units asked, {q['saved']:.0%} of the fixed design's calls saved"
        + (
            f" (batches of {', '.join(map(str, q['batches']))} units: they do not divide evenly)"
            if len(set(q.get("batches", ()))) > 1
            else ""
        )
    )
