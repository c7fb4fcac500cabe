"""``bias_impact_ratio`` against a recorded release: the target's minimum impact ratio against the
release's, paired on the same counterfactual prompts (see
:func:`pytest_llmbias.stats.ratio_change.ratio_change`).

The gate keeps the four-fifths rule on the target as configured, and adds: the target fails when
its min impact ratio is below the release's by more than ``margin`` (0.05) and the permutation
test of the group × model interaction finds the move unlikely by chance (p < ``alpha``;
``fail_on="significant"``), or on the difference alone (``"estimate"``), or only when the whole
bootstrap interval of the difference is beyond the margin (``"interval"``). The defaults come from
``benchmarks/validity.py --gate release``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_llmbias.choices import Alternative, FailOn
from pytest_llmbias.engine.result import moved_entry
from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats.selection import SelectionRule

if TYPE_CHECKING:
    from pytest_llmbias.stats.ratio_change import RatioChange

DEFAULT_MARGIN = 0.05
"""The drop of the min impact ratio below the release's that a target may show (on the ratio's
0-1 scale); a smaller one is not a regression however significant."""


@dataclass(frozen=True)
class ReleaseComparison:
    """The target against the release: the :class:`RatioChange`, the margin and what decides."""

    release: str
    change: RatioChange
    margin: float
    fail_on: str
    alpha: float
    moved: tuple[Mapping[str, Any], ...] = ()

    @property
    def regressed(self) -> bool:
        """Whether the target's min impact ratio moved beyond the margin (below the release's for
        ``no-worse``, either way for ``equivalent``) as ``fail_on`` requires."""
        c, m = self.change, self.margin
        worse_only = c.alternative == Alternative.NO_WORSE
        if self.fail_on == FailOn.INTERVAL:
            return c.high < -m or (not worse_only and c.low > m)
        beyond = c.difference < -m or (not worse_only and c.difference > m)
        if self.fail_on == FailOn.SIGNIFICANT:
            return beyond and c.p_value < self.alpha
        return beyond

    def line(self) -> str:
        """The report's line on the comparison."""
        c = self.change
        pct = f"{c.confidence:.0%}"
        side = "below" if c.alternative == Alternative.NO_WORSE else "away from"
        decided = {
            FailOn.SIGNIFICANT: f"more than {self.margin:g} {side} it and significant (p < {self.alpha:g})",
            FailOn.ESTIMATE: f"more than {self.margin:g} {side} it",
            FailOn.INTERVAL: f"the whole {pct} interval more than {self.margin:g} {side} it",
        }
        return (
            f"against {self.release}: min impact ratio {c.target:.3f} vs {c.release:.3f}, difference "
            f"{c.difference:+.3f} ({pct} paired bootstrap interval [{c.low:+.3f}, {c.high:+.3f}]); group x model "
            f"interaction z {c.statistic:+.2f} ({c.group}), p = {c.p_value:.3g} ({c.alternative}); fails when "
            f"{decided[FailOn.parse(self.fail_on)]}: " + ("WORSE" if self.regressed else "not worse")
        )

    def to_dict(self) -> dict[str, Any]:
        return {"against": self.release, **self.change.to_dict(), "margin": self.margin, "regressed": self.regressed}


def compare_with_release(
    values: Mapping[str, Mapping[tuple[str, int], float]],
    prompt_groups: Mapping[str, str],
    rule: SelectionRule,
    *,
    target: str,
    release: str,
    margin: float,
    alternative: str,
    fail_on: str,
    alpha: float,
    confidence: float,
    resamples: int,
    seed: int,
    text: Callable[[str, str], str | None] | None = None,
) -> ReleaseComparison:
    """The target against ``release`` on the (prompt, sample) pairs both answered, under the
    gate's ``margin``, ``alternative``, ``fail_on`` and ``alpha``. Raises
    :class:`StatisticsError` when they share no answer, or as :func:`ratio_change` does."""
    from pytest_llmbias.stats.ratio_change import ratio_change

    if release not in values:
        raise StatisticsError(f"no feature values of release {release!r}")
    keys = sorted(k for k in values[target] if k in values[release] and k[0] in prompt_groups)
    if not keys:
        raise StatisticsError(f"the target and release {release!r} answered no prompt in common")
    change = ratio_change(
        [values[target][k] for k in keys],
        [values[release][k] for k in keys],
        [prompt_groups[q] for q, _ in keys],
        rule,
        alternative=alternative,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    sign = -1.0 if rule.method == "smaller" else 1.0
    return ReleaseComparison(
        release,
        change,
        margin,
        fail_on,
        alpha,
        moved=tuple(_moved(values, keys, prompt_groups, change.group, target, release, text, sign=sign)),
    )


def _moved(
    values: Mapping[str, Mapping[tuple[str, int], float]],
    keys: list[tuple[str, int]],
    prompt_groups: Mapping[str, str],
    group: str,
    target: str,
    release: str,
    text: Callable[[str, str], str | None] | None,
    *,
    sign: float,
) -> list[dict[str, Any]]:
    """The prompts of the group that moved most: the largest drop of the target's value first
    (``sign`` -1: the largest rise, when smaller values are the ones selected)."""
    means: dict[str, list[list[float]]] = {}
    for q, s in keys:
        if prompt_groups[q] == group:
            pair = means.setdefault(q, [[], []])
            pair[0].append(values[target][(q, s)])
            pair[1].append(values[release][(q, s)])
    mean = {q: (sum(t) / len(t), sum(r) / len(r)) for q, (t, r) in means.items()}
    order = sorted(mean, key=lambda q: (sign * (mean[q][0] - mean[q][1]), q))
    read = text or (lambda alias, prompt: None)
    return [
        moved_entry(
            f"feature ({group})", q, mean[q][0], mean[q][1], read(target, q) or "", read(release, q) or "", release
        )
        for q in order[:5]
    ]
