"""``bias_impact_ratio``'s statistics: feature values calibrated by subtraction, each model's impact
ratio with its bootstrap interval and permutation checks, and the gate's result with its warnings."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmbias.choices import FailOn
from pytest_llmbias.engine.result import fmt_rate
from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.gates.impact_ratio.release import compare_with_release
from pytest_llmbias.gates.impact_ratio.result import ImpactRatioGateResult, ModelImpact
from pytest_llmbias.gates.impact_ratio.spec import ImpactRatioSpec

if TYPE_CHECKING:
    from pytest_llmbias.stats.resampling import BootstrapInterval, GroupEffectTest, NullCheck
    from pytest_llmbias.stats.selection import ImpactRatioResult


#: alias -> (prompt id, sample) -> feature value
FeatureValues = Mapping[str, Mapping[tuple[str, int], float]]

BOOTSTRAP_SEED = 0
"""The seed of the bootstrap and the permutations: the same answers always give the same interval,
so a re-run gives the same verdict."""


def calibrate(
    raw: FeatureValues,
    mode: str | None,
    *,
    baselines: Sequence[str] = (),
    references: Mapping[str, float] | None = None,
) -> dict[str, dict[tuple[str, int], float]]:
    """Calibrated feature values by subtraction (saged §3.3: G_calibrated = G − G_baseline).

    ``mode=None`` returns the values unchanged; ``"reference"`` subtracts ``references[prompt]``,
    the feature of the prompt's reference text; ``"baselines"`` subtracts the mean feature of the
    baseline models' answers to the same prompt (all samples). A baseline is calibrated against the
    *other* baselines, so its own answers never cancel themselves; with a single baseline it has
    no peers and is left out of the result. Raises :class:`StatisticsError` when a reference value
    or a baseline's answer to a prompt is missing.
    """
    if mode is None:
        return {alias: dict(values) for alias, values in raw.items()}
    if mode == "reference":
        if references is None:
            raise StatisticsError("calibration against references needs the references' feature values")
        out: dict[str, dict[tuple[str, int], float]] = {}
        for alias, values in raw.items():
            missing = sorted({q for q, _ in values if q not in references})
            if missing:
                raise StatisticsError(f"no reference value for prompt(s) {', '.join(missing[:5])}")
            out[alias] = {(q, s): v - references[q] for (q, s), v in values.items()}
        return out
    if mode != "baselines":
        raise StatisticsError(f"unknown calibration {mode!r}; accepted: reference, baselines")
    if not baselines:
        raise StatisticsError("calibrate='baselines' needs at least one baseline model")
    per_prompt: dict[str, dict[str, list[float]]] = {}
    for alias in baselines:
        if alias not in raw:
            raise StatisticsError(f"no feature values of baseline {alias!r}")
        for (q, _), v in raw[alias].items():
            per_prompt.setdefault(q, {}).setdefault(alias, []).append(v)
    out = {}
    for alias, values in raw.items():
        peers = [b for b in baselines if b != alias]
        if not peers:
            continue
        calibrated = {}
        for (q, s), v in values.items():
            peer_values = [x for b in peers for x in per_prompt.get(q, {}).get(b, [])]
            if not peer_values:
                raise StatisticsError(f"no baseline answer to prompt {q!r} to calibrate {alias!r} against")
            calibrated[(q, s)] = v - statistics.fmean(peer_values)
        out[alias] = calibrated
    return out


def evaluate_model(
    alias: str,
    values: Mapping[tuple[str, int], float],
    prompt_groups: Mapping[str, str],
    spec: ImpactRatioSpec,
    *,
    permutations: bool = False,
) -> tuple[ImpactRatioResult, BootstrapInterval, NullCheck | None, GroupEffectTest | None]:
    """One model's impact ratio, its bootstrap interval and (with ``permutations``) its permutation
    check. Raises :class:`StatisticsError` when a group has fewer than ``spec.min_responses``
    values, or when no value is selected at all."""
    from pytest_llmbias.stats.resampling import bootstrap_impact_ratio, group_effect_test, permutation_null
    from pytest_llmbias.stats.selection import impact_ratio

    keys = sorted(values)
    groups = [prompt_groups[q] for q, _ in keys]
    numbers = [values[k] for k in keys]
    counts: dict[str, int] = {}
    for g in groups:
        counts[g] = counts.get(g, 0) + 1
    small = {g: n for g, n in sorted(counts.items()) if n < spec.min_responses}
    if small:
        shown = ", ".join(f"{g} ({n})" for g, n in list(small.items())[:6])
        raise StatisticsError(
            f"{len(small)} group(s) of {alias!r} have fewer than min_responses={spec.min_responses} answers: "
            f"{shown}. Add templates or samples, or lower min_responses (a selection rate of so few "
            "answers says little)"
        )
    rule = spec.rule
    result = impact_ratio(numbers, groups, rule, confidence=spec.confidence)
    interval = bootstrap_impact_ratio(
        numbers, groups, rule, confidence=spec.confidence, resamples=spec.resamples, seed=BOOTSTRAP_SEED
    )
    null = effect = None
    if permutations:
        null = permutation_null(
            numbers, groups, rule, threshold=spec.threshold, permutations=spec.resamples, seed=BOOTSTRAP_SEED
        )
        effect = group_effect_test(numbers, groups, permutations=spec.resamples, seed=BOOTSTRAP_SEED)
    return result, interval, null, effect


def evaluate_gate(
    spec: ImpactRatioSpec,
    values: FeatureValues,
    prompt_groups: Mapping[str, str],
    *,
    domain: str,
    target: str,
    baselines: Sequence[str],
    samples: int,
    release: str | None = None,
    text: Callable[[str, str], str | None] | None = None,
) -> ImpactRatioGateResult:
    """The gate's result from (calibrated) feature values. The target's statistics must compute;
    a baseline's that do not are reported with their error and a warning. With ``release`` (one
    of ``baselines``), the target is also compared with it (``text(alias, prompt)``: an answer
    to quote beside the prompts that moved), and ``alpha`` is split between the four-fifths
    rule's test and the comparison's, so that a re-drawn release fails at most ``alpha`` of the
    time in all."""
    if release is not None:
        spec = dataclasses.replace(spec, alpha=spec.alpha / 2)
    from concurrent.futures import ThreadPoolExecutor

    # the baselines' bootstraps beside the target's: numpy's resampling lets go of the GIL, so a
    # second core halves the gate's time (each model's draws are seeded alone: the same results)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llmbias-impact")
    try:
        beside = {
            alias: pool.submit(evaluate_model, alias, values[alias], prompt_groups, spec)
            for alias in baselines
            if alias in values
        }
        return _gate(spec, values, prompt_groups, beside, domain, target, baselines, samples, release, text)
    finally:
        pool.shutdown(cancel_futures=True)


def _gate(
    spec: ImpactRatioSpec,
    values: FeatureValues,
    prompt_groups: Mapping[str, str],
    beside: Mapping[str, Any],
    domain: str,
    target: str,
    baselines: Sequence[str],
    samples: int,
    release: str | None,
    text: Callable[[str, str], str | None] | None,
) -> ImpactRatioGateResult:
    """:func:`evaluate_gate`'s result, the baselines' own evaluations ``beside`` (futures by alias)."""
    result, interval, null, effect = evaluate_model(target, values[target], prompt_groups, spec, permutations=True)
    comparison = (
        None
        if release is None
        else compare_with_release(
            values,
            prompt_groups,
            spec.rule,
            target=target,
            release=release,
            margin=spec.margin,
            alternative=spec.alternative,
            fail_on=spec.fail_on,
            alpha=spec.alpha,
            confidence=spec.confidence,
            resamples=spec.resamples,
            seed=BOOTSTRAP_SEED,
            text=text,
        )
    )
    target_impact = ModelImpact(target, result, interval, null=null, effect=effect)
    side: list[ModelImpact] = []
    warnings: list[str] = []
    for alias in baselines:
        if alias not in values:
            side.append(ModelImpact(alias, None, None, "no peer baseline to calibrate against"))
            continue
        try:
            r, i, _, _ = beside[alias].result()
        except StatisticsError as exc:
            side.append(ModelImpact(alias, None, None, str(exc)))
            warnings.append(f"baseline {alias}: {exc}")
        else:
            side.append(ModelImpact(alias, r, i))
    gate = ImpactRatioGateResult(
        domain=domain,
        feature=spec.feature,
        calibrate=spec.calibrate,
        group_by=spec.group_by,
        threshold=spec.threshold,
        fail_on=spec.fail_on,
        confidence=spec.confidence,
        n_prompts=len(prompt_groups),
        samples=samples,
        target=target_impact,
        baselines=tuple(side),
        quantile=spec.quantile,
        within=spec.within,
        alpha=spec.alpha,
        comparison=comparison,
    )
    warnings = interval_warnings(gate) + warnings
    below = [b.alias for b in side if b.min_impact_ratio is not None and b.min_impact_ratio < spec.threshold]
    if below and spec.calibrate is None:
        warnings.append(
            f"baseline(s) {', '.join(below)} also fall below the threshold: the prompts or the feature may "
            "carry a disparity of their own; consider calibrate='baselines' or calibrate='reference'"
        )
    return dataclasses.replace(gate, warnings=tuple(warnings))


NOISY_RULE = 0.2
"""Warn when a model with no disparity would fail the point-estimate rule this often (by label
permutation) at the gate's group sizes."""


def interval_warnings(gate: ImpactRatioGateResult) -> list[str]:
    """What the reader of a verdict on the point estimate or the interval should know."""
    i, t, ir, null = gate.interval, gate.threshold, gate.min_impact_ratio, gate.null
    pct = f"{gate.confidence:.0%}"
    out = []
    if gate.fail_on == "interval" and gate.passed and ir < t:
        out.append(
            f"the target's min impact ratio {ir:.3f} is below {t:g}, but the {pct} interval "
            f"[{i.low:.3f}, {i.high:.3f}] reaches above it, so fail_on='interval' lets it pass"
        )
    if gate.fail_on == "estimate" and null.false_fail_rate > NOISY_RULE:
        smallest = min(g.n for g in gate.result.groups)
        out.append(
            f"at {smallest} answers per group the point-estimate rule is noisy: a model whose answers do "
            f"not depend on the group would fail it {fmt_rate(null.false_fail_rate)} of the time (label "
            "permutations); add samples or templates, or use the default fail_on='significant'"
        )
    if gate.fail_on == FailOn.SIGNIFICANT and gate.passed and ir < t:
        out.append(
            f"the target's min impact ratio {ir:.3f} is below {t:g}, but the permutation test finds no group "
            f"effect (p = {gate.effect.p_value:.3g}, not significant at alpha {gate.alpha:g}), so the gate passes; "
            f"at {min(g.n for g in gate.result.groups)} answers per group a model with no group effect falls below "
            f"{t:g} in {fmt_rate(null.false_fail_rate)} of label permutations"
        )
    return out
