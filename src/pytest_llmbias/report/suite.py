"""The session as a family of gates: how likely a good release is to fail some gate of it.

Each gate states the false-alarm rate of its checks in its ``reliability()`` (the rate it
estimated on these data where it has one, else the one it was designed for). A gate with several
checks fails when any of them does, so its rate is at most the sum of its checks' (the union
bound); the session's figures are those of :func:`pytest_llmbias.stats.multiple.familywise_bound`
over its gates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _parts(reliability: Mapping[str, Any]) -> list[float]:
    """The false-alarm figure of each check in a ``reliability()`` mapping and the mappings in it."""
    out = []
    estimated, designed = reliability.get("false_alarm"), reliability.get("designed_false_alarm")
    figure = estimated if isinstance(estimated, (int, float)) else designed
    if isinstance(figure, (int, float)) and not isinstance(figure, bool):
        out.append(float(figure))
    for value in reliability.values():
        if isinstance(value, Mapping):
            out += _parts(value)
    return out


def gate_false_alarm(entry: Mapping[str, Any]) -> float | None:
    """The false-alarm rate a gate entry of the JSON document states (the sum of its checks',
    at most 1), or None when it states none (say, the gate errored)."""
    reliability = (entry.get("result") or {}).get("reliability")
    parts = _parts(reliability) if isinstance(reliability, Mapping) else []
    return min(1.0, sum(parts)) if parts else None


def suite_figures(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The session's family-wise figures from its gate entries: ``gates`` (how many ran),
    ``rates`` (each stating gate's rate, by test), ``independent`` and ``at_most`` (see
    :class:`~pytest_llmbias.stats.multiple.FamilyBound`), ``unstated`` (tests whose gate states
    no rate) and the ``sentence`` the reports print. None without a gate."""
    from pytest_llmbias.stats.multiple import familywise_bound

    entries = list(entries)
    if not entries:
        return None
    rates = {str(e.get("test")): gate_false_alarm(e) for e in entries}
    stated = {t: r for t, r in sorted(rates.items()) if r is not None}
    unstated = sorted(t for t, r in rates.items() if r is None)
    if not stated:
        return {
            "gates": len(entries),
            "rates": {},
            "independent": None,
            "at_most": None,
            "unstated": unstated,
            "sentence": f"{len(entries)} gate(s) ran; none states a false-alarm rate",
            "summary": f"{len(entries)} gate(s) ran; none states a false-alarm rate",
        }
    bound = familywise_bound(list(stated.values()))
    sentence = bound.sentence() + (f"; {len(unstated)} more state none" if unstated else "")
    out = {
        "gates": len(entries),
        "rates": stated,
        "independent": bound.independent,
        "at_most": bound.at_most,
        "unstated": unstated,
        "sentence": sentence,
    }
    out = {**out, **_shared(entries, out)}
    return {**out, **_designed(entries, out)}


def _flags(reliability: Mapping[str, Any], key: str) -> list[Any]:
    """Every value of ``key`` in a ``reliability()`` mapping and the mappings in it."""
    out = [reliability[key]] if reliability.get(key) is not None else []
    for value in reliability.values():
        if isinstance(value, Mapping):
            out += _flags(value, key)
    return out


def _designed(entries: list[Mapping[str, Any]], out: Mapping[str, Any]) -> dict[str, Any]:
    """The run's design in one line (``summary``): the family-wise false-alarm rate a good
    release meets (the union bound over the gates' stated rates, with the ``suite.alpha`` it is
    designed for), the power each sized gate is designed for against a release worse by its
    margin at the gates whose answers size it (``sized`` of ``designed``: the others need more
    questions x samples), and the gates whose verdict is ``underpowered`` (``underpowered_failed``
    of them failed, under ``suite.strict``). A gate that failed on a
    design its answers did not size is not counted among them but as failed without needing the
    power (``caught``): its verdict stands as it is. ``power``: the designed figure (None where no
    gate states one)."""
    from pytest_llmbias.stats.multiple import fmt_rate

    under, designed, sized, caught, powers, failed_under = [], 0, 0, 0, [], 0
    for e in entries:
        reliability = (e.get("result") or {}).get("reliability")
        flags = _flags(reliability, "sized") if isinstance(reliability, Mapping) else []
        powers += _flags(reliability, "designed_power") if isinstance(reliability, Mapping) else []
        if "underpowered" in str(e.get("verdict", "")):
            under.append(str(e.get("test")))
            failed_under += e.get("passed") is False  # suite.strict fails an underpowered pass
        # a gate that failed needs no power to stand: more answers would not change what it showed
        # (its standard error is its own target's, often wide because the target is off)
        if flags and not all(flags) and e.get("passed") is False and "underpowered" not in str(e.get("verdict", "")):
            caught += 1
            continue
        designed += bool(flags)
        sized += bool(flags) and all(flags)
    power = min(powers) if powers else None
    n = out["gates"]
    bound = out.get("at_most")
    line = f"{n} gate{'s' if n != 1 else ''}: a good release fails {'it' if n == 1 else 'any'}"
    line += f" at most {fmt_rate(bound)}" if bound is not None else " at a rate none states"
    if out.get("alpha") is not None:
        how = {"holm": "Holm", "bonferroni": "Bonferroni", "holm+bonferroni": "Holm and Bonferroni"}
        line += (
            f" (designed: suite.alpha {fmt_rate(out['alpha'])} shared by {how.get(out.get('method') or '', 'no gate')}"
        )
        kept = out.get("kept") or []
        # a rule with no rate to share (the four-fifths rule on an estimate, a
        # marker's own alpha) adds its own to the bound: name them, or the bound reads as a defect
        line += (
            (
                f"; {len(kept)} keep their own rate: "
                + ", ".join(_short(t) for t in kept[:3])
                + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
            )
            if kept
            else ""
        )
        line += ")"
    if power is not None and designed:
        line += (
            f"; one worse by a gate's margin fails it {fmt_rate(power)} of the time at {sized} of {designed} "
            "designed gates"
            + (
                f" ({designed - sized} need{'s' if designed - sized == 1 else ''} more questions x samples)"
                if sized < designed
                else ""
            )
        )
    if caught:
        gates = f"{'more ' if designed else ''}gate{'s' if caught != 1 else ''}"
        line += f"; {caught} {gates} failed (a failure needs no power)"
    if under:
        line += f"; {len(under)} underpowered verdict{'s' if len(under) != 1 else ''}"
        if failed_under:
            line += f" ({'failed' if failed_under == len(under) else f'{failed_under} failed'}: suite.strict)"
    return {
        "power": power,
        "sized": sized,
        "designed": designed,
        "caught": caught,
        "underpowered": sorted(under),
        "underpowered_failed": failed_under,
        "summary": line,
    }


def _shared(entries: list[Mapping[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
    """With ``--llmbias-suite-alpha``: ``alpha``, ``method`` (``holm``, ``bonferroni`` or both,
    joined by ``+``), each gate's ``levels`` (None: it keeps its own rate) and ``methods``, and
    the sentence extended to say so (see :mod:`pytest_llmbias.engine.suite_levels`)."""
    from pytest_llmbias.stats.multiple import BONFERRONI, HOLM

    alphas = {e["suite_alpha"] for e in entries if e.get("suite_alpha") is not None}
    if not alphas:
        return {}
    alpha = alphas.pop()
    levels = {str(e.get("test")): e.get("suite_level") for e in entries}
    # an entry written before methods were recorded shared by Bonferroni
    methods = {
        str(e.get("test")): (e.get("suite_method") or BONFERRONI) if e.get("suite_level") is not None else None
        for e in entries
    }
    kept = sorted(t for t, level in levels.items() if level is None)
    parts = []
    for method, how in ((HOLM, "Holm's step-down"), (BONFERRONI, "Bonferroni")):
        shared = sorted(float(level) for t, m in methods.items() if m == method and (level := levels[t]) is not None)
        if shared:
            said = (
                f"at {shared[0]:.3g} each" if len(set(shared)) == 1 else "at " + ", ".join(f"{x:.3g}" for x in shared)
            )
            parts.append(
                f"by {how}{' (several looks)' if method == BONFERRONI and HOLM in methods.values() else ''}: "
                f"{len(shared)} gate(s) {said}"
            )
    used = [m for m in (HOLM, BONFERRONI) if m in methods.values()]
    said = (
        f"; --llmbias-suite-alpha {alpha:g} is shared "
        + ("; ".join(parts) if parts else "by no gate: none can be set to a level")
        + (f", {len(kept)} keep their own rate (none they can be set to)" if kept and parts else "")
    )
    return {
        "alpha": alpha,
        "method": "+".join(used) or None,
        "levels": levels,
        "methods": methods,
        "kept": kept,
        "sentence": out["sentence"] + said,
    }


def _short(test: str) -> str:
    """A test id without its file: the name a reader finds in the report."""
    return test.rsplit("::", 1)[-1]
