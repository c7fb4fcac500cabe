"""A comparison designed for two error rates at once: a good release seldom fails, a release worse
by the margin seldom passes.

A no-worse or equivalence test (TOST) alone controls only the second rate: its alpha is the chance
of passing a target *at* the margin δ. How often it fails a target as good as its comparator depends
on how many answers it has against their noise, so on data noisier than planned it fails good
releases at any rate up to 1. This module adds the first rate as a designed figure. With a
false-alarm level ``a`` (the gate's share of the run's ``suite.alpha``) and a power ``1 − β``
(``suite.power``), a comparison whose difference estimate is d̂ (standard error ``se`` from the
paired answers, ``se_like`` that of a target as good as its comparator: ``se`` itself against a
fixed reference — a recorded release, or the baselines' mean by default — and with the spread
between the baselines' means added when the target is compared with their population) is decided
thus:

- **pass** when the TOST at β' = β − :data:`SIZING_SLACK` shows the difference within δ:
  d̂ + t₁₋β'·se < δ (no-worse), and also d̂ − t₁₋β'·se > −δ (equivalent). A release worse by δ
  passes at most β' of the time.
- **fail** when it does not pass *and* the target is shown off its comparator at ``a``:
  d̂ > c·se_like (no-worse), |d̂| > c·se_like (equivalent), c = t₁₋ₐ (t₁₋ₐ/₂ two-sided); and
  whenever it is shown worse by more than the margin, d̂ − c·se > δ. A target as good as its
  comparator fails at most ``a`` of the time, whatever the noise.
- **underpowered** otherwise: the data can show neither. It happens only when the design is not
  *sized*: δ − t₁₋β'·se < c·se_like, i.e. too few answers for their noise. ``--llmbias-strict``
  fails it; the reports name it, with the answers that would size it.

A plan sizes a comparison before its answers exist (:func:`units_to_size`): the fewest units at
which the *expected* power at the margin — averaged over the sampling distribution of the estimated
standard errors (:func:`expected_power`) — reaches ``suite.power`` (the pass rule's TOST at β'
leaves room for the draws left underpowered). The normal formula n = ((z₁₋ₐ + z₁₋β)·σ/δ)² sizes
for the expected SE: at its n about half the draws
come out larger and are not sized, so a release at the margin fails about 70 % of the time, not 80 %.

H0 of the fail rule: the target's expected score equals the comparator's (the baselines' mean; with
``reference="population"``, the target is one more model like them); H0 of the pass rule: the
target is worse by δ or more. Sources: the
two one-sided tests (Schuirmann 1987), the sample size of a test sized for α and β (Chow, Shao &
Wang, *Sample Size Calculations in Clinical Research*, §3.2, with the t distribution and the SE's
χ² law in place of its normal quantiles), and the random-effects view of "a model like the
baselines" (the target's mean off the baselines' mean by τ·√(1 + 1/m), τ the between-model SD).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import asdict, dataclass
from typing import Any, cast

from pytest_llmbias.stats import shelf

DEFAULT_LEVEL = 0.05
"""A comparison's false-alarm level when the run shares none (``suite.alpha: off``)."""
DEFAULT_POWER = 0.8
"""The power to fail a release worse by the margin (``suite.power``)."""


SIZING_SLACK = 0.01
"""How much stricter than ``suite.power`` the pass rule is: the TOST that passes a comparison runs
at β − 0.01 (:func:`pass_alpha`), so a release worse by the margin passes at most 19 % of the time
when ``suite.power`` is 80 %. The slack buys the power a plan promises: a release at the margin fails
only where that TOST does not pass it and its design is sized, and at any finite size some draws
come out with a large standard error and are left *underpowered*. A plan asks for the units at
which the expected power at the margin (:func:`expected_power`), underpowered draws counted as not
failing, reaches ``suite.power`` itself (:func:`units_to_size`); the 1 % keeps that size finite."""


def pass_alpha(power: float) -> float:
    """The pass rule's TOST alpha for a run's ``suite.power``: 1 − power − :data:`SIZING_SLACK`."""
    return round(max(1e-6, 1 - power - SIZING_SLACK), 12)


def pass_power(power: float) -> float:
    """The quantile of the pass rule's TOST: ``power`` + :data:`SIZING_SLACK` (1 − :func:`pass_alpha`)."""
    return 1 - pass_alpha(power)


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
            pass_bound=margin - _t(pass_power(power), df) * se,
            df_like=df_like,
        )

    @property
    def fail_threshold(self) -> float:
        """The difference (in absolute value when two-sided) above which the comparison fails (on
        the worse side no higher than δ + c·se, :meth:`beyond_margin`)."""
        return max(self.pass_bound, min(self.critical * self.se_like, self.margin + self.critical * self.se))

    def shown_off(self, diff: float) -> bool:
        """Whether ``diff`` shows the target off its comparator at ``level``."""
        x = abs(diff) if self.two_sided else diff
        if self.se_like <= 0:
            return x > 0
        return x > self.critical * self.se_like

    def beyond_margin(self, diff: float) -> bool:
        """Whether ``diff`` shows the target worse than its comparator by more than the margin:
        d̂ − c·se > δ (H0: d ≤ δ, rejected at ``level``, one-sided; c is this design's critical
        value, the two-sided one for an equivalence test, so at most ``level``/2 there). A target as
        good as its comparator shows it less often than it is shown off (δ > 0): it holds the
        design's false alarm whatever ``se_like`` adds, and fails a blatant difference that a
        population comparison (whose ``se_like`` carries the baselines' spread) would call
        underpowered."""
        return diff - self.critical * self.se > self.margin

    @property
    def sized(self) -> bool:
        return self.pass_bound >= self.critical * self.se_like

    @property
    def _lower_threshold(self) -> float:
        """Two-sided: the |difference| below zero beyond which the comparison fails (the better
        side, where no margin rule adds to the test of a difference)."""
        return max(self.pass_bound, self.critical * self.se_like)

    @property
    def false_alarm(self) -> float:
        """The chance that a target like its comparator fails (the difference N(0, se_like²))."""
        if self.se_like <= 0:
            return 0.0
        tail = 1 - _phi(self.fail_threshold / self.se_like)
        if self.two_sided:
            tail += 1 - _phi(self._lower_threshold / self.se_like)
        return min(1.0, tail)

    @property
    def power_at_margin(self) -> float:
        """The chance that a target worse by the margin fails (the difference N(δ, se²))."""
        if self.se <= 0:
            return 1.0
        up = 1 - _phi((self.fail_threshold - self.margin) / self.se)
        return min(1.0, up + (_phi((-self._lower_threshold - self.margin) / self.se) if self.two_sided else 0.0))

    def se_needed(self) -> float:
        """The largest standard error (with se_like in the same ratio to se) that sizes the design."""
        ratio = self.se_like / self.se if self.se > 0 else 1.0
        return self.margin / (_t(pass_power(self.power), self.df) + self.critical * ratio)

    def units_needed(self, units: int) -> int | None:
        """How many units (as ``units`` now: items at as many samples each) would size the design:
        the fewest at which :func:`expected_power` is at least ``power``, the
        standard error shrinking as 1/√units, its degrees of freedom growing with the items, se_like
        in the same ratio to se (the baselines' spread, on their m − 1 degrees of freedom read back
        from ``df_like``). More than ``units``; None when the design is sized. Worked out once per
        design and units (a report, a warning and a table all ask)."""
        return _units_needed(self, units)

    def _units_needed(self, units: int) -> int | None:
        if self.sized or self.se <= 0:
            return None
        rho, k = (self.se_like / self.se) ** 2 - 1, None  # the spread over se², its degrees of freedom
        if rho > 1e-12 and self.df_like is not None and math.isfinite(self.df) and math.isfinite(self.df_like):
            rest = (1 + rho) ** 2 / self.df_like - 1 / self.df
            k = rho * rho / rest if rest > 0 else None

        def at(n: int) -> float:
            se = self.se * math.sqrt(units / n)
            return expected_power(
                margin=self.margin,
                se=se,
                df=(self.df + 1) * n / units - 1 if math.isfinite(self.df) else self.df,
                level=self.level,
                power=self.power,
                two_sided=self.two_sided,
                spread=max(rho, 0.0) * se * se,
                spread_df=k,
            )

        return _fewest(at, self.power, units + 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "sized": self.sized,
            "false_alarm": self.false_alarm,
            "power_at_margin": self.power_at_margin,
        }


#: the layout of a design's units needed kept on a shelf (see :mod:`pytest_llmbias.stats.shelf`);
#: a change to how they are worked out changes it, so that no run reads a figure worked out otherwise
SHELF_LAYOUT = "units-needed-1"


@functools.lru_cache(maxsize=256)
def _units_needed(design: Design, units: int) -> int | None:
    """Kept on the run's shelf as well: a warm run's unchanged designs are not searched again
    (a design with nothing needed is kept as 0)."""

    def name() -> str:
        import scipy  # its special functions compute the expected power

        fields = tuple(getattr(design, f.name) for f in dataclasses.fields(design))
        return shelf.name(f"{SHELF_LAYOUT}/{scipy.__version__}", *fields, units)

    def decode(raw: bytes) -> object:
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if type(value) is int and (value == 0 or value > units) else None

    value = shelf.kept(name, lambda: design._units_needed(units) or 0, lambda v: json.dumps(v).encode(), decode)
    return cast(int, value) or None


def expected_power(
    *,
    margin: float,
    se: float,
    df: float,
    level: float,
    power: float,
    two_sided: bool,
    spread: float = 0.0,
    spread_df: float | None = None,
) -> float:
    """The chance that a target worse by ``margin`` fails under the module's rule, averaged over
    the sampling distribution of the estimated standard errors — the figure a plan sizes for.

    The difference d̂ ~ N(δ, se²) is independent of ŝe² ~ se²·χ²_df/df (a normal sample's variance)
    and, against baselines, of their spread Ŝ ~ ``spread``·χ²_k/k (k = ``spread_df``, the baselines'
    m − 1; ``spread`` the expected variance of their means × (1 + 1/m), taken as known when k is
    None); ŝe_like = √(ŝe² + Ŝ). Given them the target fails when d̂ ≥ A (or d̂ ≤ −A, two-sided),
    A = max(δ − t₁₋β,df·ŝe, c·ŝe_like), c = t₁₋ₐ (t₁₋ₐ/₂) on the draw's Satterthwaite degrees of
    freedom (:func:`like_df`). The chance is integrated numerically over the
    quantiles of each χ² (Gauss-Legendre, 1-D against one comparator, 2-D with a spread). One-sided
    it is 1 − β' less the chance that the draw is *underpowered*: below 1 − β' at any finite size,
    approaching it as the items grow. With ``df`` infinite and no spread (the SE known) it is the
    plug-in rate :attr:`Design.power_at_margin`. Sources: the TOST's exact size on normal data
    (Schuirmann 1987), the χ² law of a normal sample's variance, Satterthwaite (1946)."""
    import numpy as np
    from scipy import special

    if se <= 0:
        return 1.0
    random_spread = spread > 0 and spread_df is not None and math.isfinite(spread_df) and spread_df > 0
    t = _t(pass_power(power), df)
    q = 1 - (level / 2 if two_sided else level)
    nodes, weights = _nodes()
    if math.isfinite(df):
        u, wu = np.sqrt(special.chdtri(df, 1 - nodes) / df), weights
    else:
        u, wu = np.ones(1), np.ones(1)
    if random_spread:
        v, wv = special.chdtri(spread_df, 1 - nodes) / spread_df, weights
    else:
        v, wv = np.ones(1), np.ones(1)
    s = se * u[:, None]
    like = s * s + spread * v[None, :]
    if random_spread and math.isfinite(df):  # the critical value on the draw's own Satterthwaite df
        assert spread_df is not None  # random_spread says so
        nu = like * like / (s**4 / df + (spread * v[None, :]) ** 2 / spread_df)
        grid = np.geomspace(min(df, spread_df), df + spread_df, 48)  # Satterthwaite's df lies within
        c = np.interp(np.log(nu), np.log(grid), special.stdtrit(grid, q))
    else:
        c = _t(q, df)
    a = np.maximum(margin - t * s, c * np.sqrt(like))
    p = special.ndtr((margin - a) / se)
    if two_sided:
        p = p + special.ndtr((-a - margin) / se)
    return float(min(1.0, wu @ p @ wv))


@functools.cache
def _nodes(n: int = 64) -> tuple[Any, Any]:
    """Gauss-Legendre nodes and weights on (0, 1)."""
    import numpy as np

    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) / 2, w / 2


def units_to_size(
    sd: float,
    margin: float,
    *,
    level: float,
    power: float,
    two_sided: bool,
    samples: int = 1,
    baselines: int = 1,
    between: float = 0.0,
    slack: float = 0.0,
) -> int | None:
    """The fewest units n (items × ``samples`` each, at least 2 items) whose :func:`expected_power`
    at the margin is at least ``power`` − ``slack`` (default 0): se = sd/√n on
    items − 1 degrees of freedom (paired item means), ``sd`` the SD of one unit's difference from
    its comparator. Against m = ``baselines`` ≥ 2, a target like them lies off their mean by
    se_like = √(2·se² + (1 + 1/m)·``between``): the noise in the baselines' means adds se² (they
    answer as noisily as the target), the between-model variance the rest, read on Satterthwaite's
    degrees of freedom (:func:`like_df`, the spread on m − 1). None when no n suffices (the
    between-model spread alone keeps a target at the margin from being shown off). It replaces
    the normal formula n = ((z₁₋β + z₁₋ₐ)·σ/δ)², which sizes for the expected SE: at that n about
    half the draws of ŝe are larger, leave the design unsized and cost power at the margin."""
    m = max(1, baselines)

    def at(items: int) -> float:
        n = items * samples
        se = sd / math.sqrt(n)
        df = items - 1.0
        spread = se * se + (1 + 1 / m) * between if m >= 2 else 0.0
        return expected_power(
            margin=margin,
            se=se,
            df=df,
            level=level,
            power=power,
            two_sided=two_sided,
            spread=spread,
            spread_df=m - 1 if m >= 2 else None,
        )

    items = _fewest(at, power - slack, 2)
    return None if items is None else items * samples


def _fewest(rate: Any, target: float, low: int, cap: int = 10**7) -> int | None:
    """The least integer n ≥ ``low`` with ``rate(n)`` ≥ ``target`` (``rate`` increasing), by
    doubling then bisection; None when none up to ``cap`` does."""
    if rate(low) >= target:
        return low
    lo, hi = low, 2 * low
    while rate(hi) < target:
        if hi > cap:
            return None
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if rate(mid) >= target else (mid, hi)
    return hi


def _spread(baseline_means: list[float] | None) -> float | None:
    """The variance of the m baselines' means × (1 + 1/m): how far a target drawn like them lies
    from their mean beyond its own noise (None with fewer than two)."""
    if not baseline_means or len(baseline_means) < 2:
        return None
    m = len(baseline_means)
    mean = sum(baseline_means) / m
    return sum((x - mean) ** 2 for x in baseline_means) / (m - 1) * (1 + 1 / m)


def between_model_sd(per_model: list[list[float]]) -> float | None:
    """τ̂, the SD between m ≥ 2 models' expected scores on the same n items, net of their answers'
    noise: the two-way random-effects estimator τ̂² = max(0, (MS_model − MS_residual) / n) over the
    m × n table of scores (MS_model = n·Σ(x̄_j − x̄)²/(m − 1), MS_residual the item × model
    interaction's mean square, which is what a model's mean carries of noise once the items they
    share are taken out). None with fewer than two models or items. Source: the ANOVA estimator of a
    variance component (Searle, Casella & McCulloch, *Variance Components*, §3.5)."""
    import numpy as np

    x = np.asarray(per_model, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        return None
    m, n = x.shape
    model, item, grand = x.mean(axis=1), x.mean(axis=0), x.mean()
    ms_model = n * float(((model - grand) ** 2).sum()) / (m - 1)
    residual = x - model[:, None] - item[None, :] + grand
    ms_residual = float((residual**2).sum()) / ((m - 1) * (n - 1))
    return math.sqrt(max(0.0, (ms_model - ms_residual) / n))


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
