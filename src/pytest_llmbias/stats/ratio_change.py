"""Whether a target's minimum impact ratio fell below a recorded release's, on the same prompts.

Source: the SAGED bias-benchmarking pipeline (Guan et al., §4.1) gives one model's minimum impact
ratio and the four-fifths rule; comparing two models' answers to the same counterfactual prompts
is this plugin's addition. The two draws are *paired*: answer i of the target and answer i of the
release answer the same prompt (and sample), so what the prompts themselves carry cancels.

Two figures come out of :func:`ratio_change`:

- the difference D = min IR(target) − min IR(release), with a paired, stratified bootstrap
  interval (each replicate resamples the pairs within each group, and recomputes both models'
  standards and rates on the same pairs);
- a sign-flip permutation test of the group × model interaction. H0: within every pair the two
  answers are exchangeable (the target answers as the release did). The statistic orients each
  answer's value so that a larger one is selected more often (the value for ``larger``, its
  negative for ``smaller``, minus its distance from the model's own standard for
  ``within-range``), takes the paired differences d_i = target − release, and per group g
  z_g = √n_g · (mean_g(d) − mean(d)): how far that group's answers moved against the others'.
  ``no-worse`` (H1: some group's answers fell relative to the rest) uses min_g z_g and counts the
  flips at most as low; ``equivalent`` (H1: some group moved either way) uses max_g |z_g|.

Why not read the verdict off the bootstrap interval of D alone: a minimum of ratios of noisy
rates is a rough statistic, and at the group sizes of a domain its interval is so wide that a
margin wide enough to pass a re-drawn release passes a moved one too (``benchmarks/validity.py``,
``--gate release``). The permutation test of the values behind the rates has the power.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_llmbias.choices import Alternative, SelectionMethod
from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats._common import check_confidence, jsonable
from pytest_llmbias.stats.selection import DEFAULT_RULE, SelectionRule, _check_rule

__all__ = ["RatioChange", "ratio_change"]


@dataclass(frozen=True)
class RatioChange:
    """The target's minimum impact ratio against a release's on the same prompts (see
    :func:`ratio_change`). ``difference`` is target − release; [``low``, ``high``] its paired
    bootstrap interval at ``confidence``; ``p_value`` the permutation test's (H1 by
    ``alternative``); ``statistic`` the observed z (min_g z_g, or max_g |z_g|) and ``group`` the
    group that gives it."""

    target: float
    release: float
    difference: float
    low: float
    high: float
    confidence: float
    statistic: float
    group: str
    p_value: float
    alternative: str
    resamples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {k: jsonable(v) for k, v in self.__dict__.items()}


def _oriented(values: np.ndarray[Any, Any], rule: SelectionRule) -> np.ndarray[Any, Any]:
    """``values`` turned so that a larger number is selected more often under ``rule``."""
    if rule.method == SelectionMethod.LARGER:
        return values
    if rule.method == SelectionMethod.SMALLER:
        return -values
    return -np.abs(values - rule.standard_of(values))


def _min_ratio(rates: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    top = rates.max(axis=-1)
    return np.where(top > 0, rates.min(axis=-1) / np.where(top > 0, top, 1.0), np.nan)


def _rates(
    sample: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any], rule: SelectionRule
) -> np.ndarray[Any, Any]:
    """Selection rates (rows × groups) of each row of ``sample`` (columns ordered by group)."""
    selected = rule.selects(sample, rule.row_standards(sample)[:, None])
    return np.add.reduceat(selected, starts, axis=1, dtype=np.int64) / sizes


def ratio_change(
    target: Sequence[float],
    release: Sequence[float],
    groups: Sequence[str],
    rule: SelectionRule = DEFAULT_RULE,
    *,
    alternative: str = Alternative.NO_WORSE,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> RatioChange:
    """Compare the target's minimum impact ratio with the release's on paired answers.

    ``target[i]`` and ``release[i]`` are the two models' feature values for the same prompt and
    sample, in group ``groups[i]``. Returns the difference of the min impact ratios, its paired
    stratified-bootstrap percentile interval at ``confidence``, and the permutation p-value of the
    interaction (module docstring; ``resamples`` sign flips and replicates, ``seed``: the same
    input gives the same figures). Raises :class:`StatisticsError` when the lengths differ, a
    value is not finite, there are fewer than two groups, or either model selects nothing.
    """
    rule = _check_rule(rule)
    check_confidence(confidence)
    if alternative not in Alternative.values():
        raise StatisticsError(f"unknown alternative {alternative!r}; accepted: {', '.join(Alternative.values())}")
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise StatisticsError(f"resamples must be a positive integer, got {resamples!r}")
    t, r = np.asarray(target, dtype=float), np.asarray(release, dtype=float)
    if not (t.shape == r.shape == (len(groups),)):
        raise StatisticsError(
            f"paired values need one target value, one release value and one group each; got "
            f"{t.size}, {r.size} and {len(groups)}"
        )
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(r))):
        raise StatisticsError("feature values must be finite numbers")
    names, codes = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    if names.size < 2:
        raise StatisticsError(f"an impact ratio needs at least two groups, got {names.size}")
    order = np.argsort(codes, kind="stable")
    t, r, codes = t[order], r[order], codes[order]
    sizes = np.bincount(codes, minlength=names.size)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    observed = _rates(np.vstack([t, r]), starts, sizes, rule)
    if np.any(observed.max(axis=1) == 0):
        which = "the target" if observed[0].max() == 0 else "the release"
        raise StatisticsError(f"{which} selects none of its answers, so its impact ratio is undefined")
    ratios = _min_ratio(observed)

    rng = np.random.default_rng(int(seed))
    col_size, col_start = np.repeat(sizes, sizes), np.repeat(starts, sizes)
    chunk = max(1, min(int(resamples), 2_000_000 // t.size))
    differences = []
    for lo in range(0, int(resamples), chunk):
        idx = col_start + rng.integers(0, col_size, size=(min(chunk, int(resamples) - lo), t.size))
        differences.append(
            _min_ratio(_rates(t[idx], starts, sizes, rule)) - _min_ratio(_rates(r[idx], starts, sizes, rule))
        )
    replicates = np.concatenate(differences)
    replicates = replicates[np.isfinite(replicates)]
    tail = (1.0 - float(confidence)) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail]) if replicates.size else (np.nan, np.nan)

    d = _oriented(t, rule) - _oriented(r, rule)

    def z(diffs: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        means = np.add.reduceat(diffs, starts, axis=-1) / sizes
        return np.sqrt(sizes) * (means - diffs.mean(axis=-1, keepdims=True))

    worse = alternative == Alternative.NO_WORSE
    z_obs = z(d[None, :])[0]
    at = int(np.argmin(z_obs)) if worse else int(np.argmax(np.abs(z_obs)))
    statistic = float(z_obs[at] if worse else abs(z_obs[at]))
    extreme = 0
    for lo in range(0, int(resamples), chunk):
        signs = rng.integers(0, 2, size=(min(chunk, int(resamples) - lo), t.size)) * 2 - 1
        flipped = z(signs * d)
        extreme += int(
            np.sum(flipped.min(axis=1) <= statistic + 1e-12)
            if worse
            else np.sum(np.abs(flipped).max(axis=1) >= statistic - 1e-12)
        )
    return RatioChange(
        target=float(ratios[0]),
        release=float(ratios[1]),
        difference=float(ratios[0] - ratios[1]),
        low=float(low),
        high=float(high),
        confidence=float(confidence),
        statistic=statistic,
        group=str(names[at]),
        p_value=(extreme + 1) / (int(resamples) + 1),
        alternative=str(Alternative(alternative)),
        resamples=int(resamples),
        seed=int(seed),
    )
