"""A comparison designed for two error rates at once: a good release seldom fails, a release worse
by the margin seldom passes.

A no-worse or equivalence test (TOST) alone controls only the second rate: its alpha is the chance
of passing a target *at* the margin δ. How often it fails a target as good as its comparator depends
on how many answers it has against their noise, so on data noisier than planned it fails good
releases at any rate up to 1. This module adds the first rate as a designed figure. With a
false-alarm level ``a`` (the gate's share of the run's ``suite.alpha``) and a power ``1 − β``
(``suite.power``), a comparison whose difference estimate is d̂ (standard error ``se`` from the
paired answers, ``se_like`` that of a target drawn like its comparator, which adds the spread
between the baselines' means) is decided thus:

- **pass** when the TOST at β shows the difference within δ: d̂ + t₁₋β·se < δ (no-worse), and also
  d̂ − t₁₋β·se > −δ (equivalent). A release worse by δ passes at most β of the time.
- **fail** when it does not pass *and* the target is shown off its comparator at ``a``:
  d̂ > c·se_like (no-worse), |d̂| > c·se_like (equivalent), c = t₁₋ₐ (t₁₋ₐ/₂ two-sided). A
  target like its comparator fails at most ``a`` of the time, whatever the noise.
- **underpowered** otherwise: the data can show neither. It happens only when the design is not
  *sized*: δ − t₁₋β·se < c·se_like, i.e. too few answers for their noise. ``--llmbias-strict``
  fails it; the reports name it, with the answers that would size it.

H0 of the fail rule: the target's expected score equals the comparator's (for baselines: the target
is one more model like them); H0 of the pass rule: the target is worse by δ or more. Sources: the
two one-sided tests (Schuirmann 1987), the sample size of a test sized for α and β
(n = ((z₁₋ₐ + z₁₋β)·σ/δ)², Chow, Shao & Wang, *Sample Size Calculations in Clinical Research*, §3.2),
and the random-effects view of "a model like the baselines" (the target's mean off the baselines'
mean by τ·√(1 + 1/m), τ the between-model SD).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_LEVEL = 0.05
"""A comparison's false-alarm level when the run shares none (``suite.alpha: off``)."""
DEFAULT_POWER = 0.8
"""The power to fail a release worse by the margin (``suite.power``)."""


def _t(p: float, df: float) -> float:
    from scipy import special

    return float(special.stdtrit(df, p)) if math.isfinite(df) else float(special.ndtri(p))


def _phi(x: float) -> float:
    from scipy import special

    return float(special.ndtr(x))


@dataclass(frozen=True)
class Design:
    """How a comparison's verdict was designed (see the module docstring): ``level`` (the
    false-alarm rate it may spend), ``power`` (to fail a target at the margin), ``margin``, ``se``
    (the difference's standard error), ``se_like`` (that of a target like its comparator),
    ``critical`` (c), ``pass_bound`` (δ − t₁₋β·se: the pass needs |d̂| or d̂ below it) and
    ``two_sided``. ``false_alarm`` and ``power_at_margin`` are the rates on data like these (normal
    approximation); ``sized``: both designed rates hold."""

    level: float
    power: float
    margin: float
    se: float
    se_like: float
    df: float
    two_sided: bool
    critical: float
    pass_bound: float
    #: the degrees of freedom of ``se_like`` (Satterthwaite's, where the baselines' spread adds to it)
    df_like: float | None = None

    @classmethod
    def of(
        cls,
        *,
        margin: float,
        se: float,
        se_like: float,
        df: float,
        level: float,
        power: float,
        two_sided: bool,
        df_like: float | None = None,
    ) -> Design:
        c = _t(1 - (level / 2 if two_sided else level), df_like if df_like is not None else df)
        return cls(
            level=level,
            power=power,
            margin=margin,
            se=se,
            se_like=max(se_like, se),
            df=df,
            two_sided=two_sided,
            critical=c,
            pass_bound=margin - _t(power, df) * se,
            df_like=df_like,
        )

    @property
    def fail_threshold(self) -> float:
        """The difference (in absolute value when two-sided) above which the comparison fails."""
        return max(self.pass_bound, self.critical * self.se_like)

    def shown_off(self, diff: float) -> bool:
        """Whether ``diff`` shows the target off its comparator at ``level``."""
        x = abs(diff) if self.two_sided else diff
        if self.se_like <= 0:
            return x > 0
        return x > self.critical * self.se_like

    @property
    def sized(self) -> bool:
        return self.pass_bound >= self.critical * self.se_like

    @property
    def false_alarm(self) -> float:
        """The chance that a target like its comparator fails (the difference N(0, se_like²))."""
        if self.se_like <= 0:
            return 0.0
        tail = 1 - _phi(self.fail_threshold / self.se_like)
        return min(1.0, 2 * tail if self.two_sided else tail)

    @property
    def power_at_margin(self) -> float:
        """The chance that a target worse by the margin fails (the difference N(δ, se²))."""
        if self.se <= 0:
            return 1.0
        thr = self.fail_threshold
        up = 1 - _phi((thr - self.margin) / self.se)
        return min(1.0, up + (_phi((-thr - self.margin) / self.se) if self.two_sided else 0.0))

    def se_needed(self) -> float:
        """The largest standard error (with se_like in the same ratio to se) that sizes the design."""
        ratio = self.se_like / self.se if self.se > 0 else 1.0
        return self.margin / (_t(self.power, self.df) + self.critical * ratio)

    def units_needed(self, units: int) -> int | None:
        """How many units (questions x samples, as ``units`` now) would size the design: the
        standard error shrinks as 1/sqrt(units). None when it is already sized."""
        if self.sized or self.se <= 0:
            return None
        return math.ceil(units * (self.se / self.se_needed()) ** 2)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "sized": self.sized,
            "false_alarm": self.false_alarm,
            "power_at_margin": self.power_at_margin,
        }


def _spread(baseline_means: list[float] | None) -> float | None:
    """The variance of the m baselines' means × (1 + 1/m): how far a target drawn like them lies
    from their mean beyond its own noise (None with fewer than two)."""
    if not baseline_means or len(baseline_means) < 2:
        return None
    m = len(baseline_means)
    mean = sum(baseline_means) / m
    return sum((x - mean) ** 2 for x in baseline_means) / (m - 1) * (1 + 1 / m)


def like_se(se: float, baseline_means: list[float] | None) -> float:
    """The standard error of the difference for a target drawn like its comparator: ``se`` alone
    against one comparator; against m ≥ 2 baselines √(se² + var(means)·(1 + 1/m)) — the target is
    one more draw of a model like them, its mean off theirs by the between-model spread, which the
    baselines' means show. Read with :func:`like_df`'s degrees of freedom."""
    spread = _spread(baseline_means)
    return se if spread is None else math.sqrt(se * se + spread)


def like_df(se: float, df: float, baseline_means: list[float] | None) -> float:
    """The degrees of freedom of :func:`like_se` by Satterthwaite's approximation, the spread
    counted on the m − 1 of the baselines' means: with few baselines a spread that dominates is
    itself uncertain, and the critical value that shows a target off them must widen with it.
    Counting the spread as known (its estimate truncated at zero when the means happen to lie
    close) failed a good target 6-10 % of runs at τ = 0.3 against a designed 5 %
    (``benchmarks/suite_validity.py``). Source: Satterthwaite, "An approximate distribution of
    estimates of variance components", Biometrics Bulletin 2 (1946)."""
    spread = _spread(baseline_means)
    if spread is None or spread <= 0 or not df > 0 or not math.isfinite(df):
        return df
    a, m = se * se, len(baseline_means or ())
    return (a + spread) ** 2 / (a * a / df + spread * spread / (m - 1))
