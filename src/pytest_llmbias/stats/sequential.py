"""Group-sequential boundaries: look at the data several times, spend the error rate across the
looks, and keep the overall error rate.

Source: Lan & DeMets (1983), "Discrete sequential boundaries for clinical trials", Biometrika 70;
the spending functions of O'Brien-Fleming and Pocock type (Lan & DeMets 1983; Kim & DeMets 1987);
the recursive numerical integration of Armitage, McPherson & Rowe (1969), as Jennison & Turnbull
(2000, *Group Sequential Methods with Applications to Clinical Trials*, ch. 7 and 19) set it out.

A test is one-sided: its statistic at look k is Z_k, standardised so that Z_k ~ N(θ √t_k, 1) with
t_k = k / K the share of the information gathered (equal batches) and (Z_1, ..., Z_K) the path of a
Brownian motion (Cov(Z_j, Z_k) = √(t_j / t_k)). H0: θ ≤ 0; H1: θ > 0. The test rejects H0 at the
first look where Z_k ≥ b_k. The boundaries b_k are chosen so that under θ = 0 the probability of
first rejecting at look k is α(t_k) − α(t_{k−1}), α(·) the spending function:

- ``obrien-fleming``: α(t) = 2 − 2 Φ(z_{1−α/2} / √t), which spends almost nothing early;
- ``pocock``: α(t) = α · ln(1 + (e − 1) t), which spends evenly.

So the probability of ever rejecting a true H0 is α exactly, whatever K. Optional futility bounds
a_k (stop and accept H0 when Z_k ≤ a_k) spend β the same way under the alternative θ = ``drift``;
they are *non-binding*: the efficacy bounds are computed as if the test never stopped for futility,
so a gate that ignores a futility bound (looks again) keeps its α, and one that obeys them has an
error rate below α. At the last look a_K = b_K.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmbias.errors import StatisticsError

SPENDINGS = ("obrien-fleming", "pocock")
#: grid points per unit of standard deviation in the numerical integration
_POINTS_PER_SD = 30
#: how far (in SDs) the integration grid reaches below the boundary
_REACH = 8.0


@dataclass(frozen=True)
class Boundaries:
    """The boundaries of a one-sided group-sequential test (see the module docstring).

    ``z[k]``: reject H0 at look k+1 when Z ≥ z[k]; ``nominal[k]`` = 1 − Φ(z[k]), the p-value a
    fixed test must reach there; ``spent[k]`` = α(t_k), the error spent up to look k+1;
    ``futility[k]``: accept H0 when Z ≤ futility[k] (None without a ``drift``)."""

    looks: int
    alpha: float
    spending: str
    information: tuple[float, ...]
    spent: tuple[float, ...]
    z: tuple[float, ...]
    nominal: tuple[float, ...]
    futility: tuple[float, ...] | None = None
    beta: float | None = None
    drift: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    def decide(self, look: int, p_pass: float, p_fail: float | None = None) -> str:
        """What a gate does at ``look`` (1-based) given the p-value of the test whose rejection
        passes it (``p_pass``: a no-worse test's p_upper, the larger of a TOST's two one-sided
        p-values, a proportion test's or a permutation test's p-value) and, optionally, that of the
        test whose rejection shows it worse than its margin (``p_fail``, the other direction):
        ``"pass"`` when p_pass ≤ ``nominal[look]``, ``"fail"`` when p_fail ≤ ``nominal[look]`` or
        at the last look without a pass, else ``"continue"``. Each test at a look uses the nominal
        level of its z boundary, so any test whose statistic is approximately normal with
        independent increments (a t test, a proportion, a permutation test of a mean difference)
        spends α as the boundaries do; stopping to fail never raises the error of passing."""
        if not 1 <= look <= self.looks:
            raise StatisticsError(f"look must be 1 to {self.looks}, got {look!r}")
        level = self.nominal[look - 1]
        if p_pass <= level:
            return "pass"
        if (p_fail is not None and p_fail <= level) or look == self.looks:
            return "fail"
        return "continue"


def spent(spending: str, alpha: float, t: float) -> float:
    """α(t): the error spent by information share ``t`` (0 < t ≤ 1) under ``spending``."""
    from scipy.special import ndtr, ndtri

    if t <= 0:
        return 0.0
    if spending == "obrien-fleming":
        return float(2.0 - 2.0 * ndtr(ndtri(1 - alpha / 2) / math.sqrt(t)))
    return float(alpha * math.log(1 + (math.e - 1) * min(t, 1.0)))


def _check(looks: int, alpha: float, spending: str) -> None:
    if isinstance(looks, bool) or not isinstance(looks, int) or looks < 1:
        raise StatisticsError(f"looks must be a whole number of at least 1, got {looks!r}")
    if not 0 < alpha < 0.5:
        raise StatisticsError(f"alpha must lie in (0, 0.5), got {alpha!r}")
    if spending not in SPENDINGS:
        raise StatisticsError(f"spending must be one of {', '.join(SPENDINGS)}, got {spending!r}")


class _Path:
    """The sub-density of the score S_k = Z_k √t_k on the continuation region, on a grid, under
    drift θ (S_k ~ N(θ t_k, t_k)), advanced look by look."""

    def __init__(self, theta: float) -> None:
        self.theta = theta
        self.t = 0.0
        # numpy arrays (numpy is imported lazily) once advanced: the grid of S and its sub-density
        self.grid: Any = None
        self.density: Any = None

    def advance(self, t: float) -> None:
        """The density of S at information ``t``, before any boundary at ``t`` is applied."""
        import numpy as np

        dt = t - self.t
        centre, sd = self.theta * t, math.sqrt(t)
        lo, hi = centre - _REACH * sd, centre + _REACH * sd
        grid = np.linspace(lo, hi, int(2 * _REACH * _POINTS_PER_SD) + 1)
        if self.grid is None:
            density = _phi((grid - centre) / sd) / sd
        else:
            step = math.sqrt(dt)
            kernel = _phi((grid[:, None] - self.grid[None, :] - self.theta * dt) / step) / step
            density = np.trapezoid(kernel * self.density[None, :], self.grid, axis=1)
        self.t, self.grid, self.density = t, grid, density

    def tail(self, z: float) -> float:
        """P(Z ≥ z and still continuing) at the current look: the mass of S above z √t, exact at
        the cut (the density integrated from the cut)."""
        return self._between(z * math.sqrt(self.t), math.inf)

    def below(self, z: float) -> float:
        return self._between(-math.inf, z * math.sqrt(self.t))

    def _between(self, lo: float, hi: float) -> float:
        import numpy as np

        grid, density = self.grid, self.density
        a, b = max(lo, float(grid[0])), min(hi, float(grid[-1]))
        if b <= a:
            return 0.0
        inside = (grid > a) & (grid < b)
        xs = np.concatenate(([a], grid[inside], [b]))
        ys = np.interp(xs, grid, density)
        return float(np.trapezoid(ys, xs))

    def cut(self, lower: float | None, upper: float | None) -> None:
        """Keep the paths that continue, a < Z < b at the current look: the grid ends at the cut
        points (the density interpolated there), so that the next look integrates the edge exactly."""
        import numpy as np

        root = math.sqrt(self.t)
        lo = float(self.grid[0]) if lower is None else max(lower * root, float(self.grid[0]))
        hi = float(self.grid[-1]) if upper is None else min(upper * root, float(self.grid[-1]))
        if hi <= lo:
            self.grid, self.density = np.array([lo, lo + 1e-12]), np.zeros(2)
            return
        inside = (self.grid > lo) & (self.grid < hi)
        grid = np.concatenate(([lo], self.grid[inside], [hi]))
        self.density = np.interp(grid, self.grid, self.density)
        self.grid = grid


def _phi(x: Any) -> Any:
    """The standard normal density, elementwise."""
    import numpy as np

    return np.exp(-0.5 * x * x) / _ROOT_2PI


_ROOT_2PI = math.sqrt(2 * math.pi)


def _solve(f: object, target: float, lo: float = -10.0, hi: float = 12.0) -> float:
    """The z with f(z) = target for a decreasing f (bisection to 1e-7)."""
    for _ in range(80):
        mid = (lo + hi) / 2
        if f(mid) > target:  # type: ignore[operator]
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-7:
            break
    return (lo + hi) / 2


def sequential_boundaries(
    looks: int,
    alpha: float = 0.05,
    spending: str = "obrien-fleming",
    *,
    beta: float | None = None,
    drift: float | None = None,
    information: Sequence[float] | None = None,
) -> Boundaries:
    """The efficacy boundaries of a one-sided test at ``looks`` equally spaced looks (or at the
    information shares ``information``, increasing to 1) spending ``alpha`` by ``spending``, and,
    with ``beta`` and ``drift`` (θ: the expected Z at the last look under the alternative),
    non-binding futility boundaries spending ``beta`` the same way. One look is the fixed test:
    z = Φ⁻¹(1 − α). Raises :class:`StatisticsError` for a bad argument. The same design asked again
    is the same (frozen) result, computed once: a gate asks for its boundaries at every look."""
    _check(looks, alpha, spending)
    t = tuple(information) if information is not None else tuple((k + 1) / looks for k in range(looks))
    return _boundaries(looks, alpha, spending, beta, drift, tuple(map(float, t)))


@functools.lru_cache(maxsize=256)
def _boundaries(
    looks: int, alpha: float, spending: str, beta: float | None, drift: float | None, t: tuple[float, ...]
) -> Boundaries:
    from scipy.special import ndtr, ndtri

    # neighbouring looks' fractions (0 before the first): the longer tuple's last one is unpaired
    if len(t) != looks or any(b <= a for a, b in zip((0.0, *t), t, strict=False)) or abs(t[-1] - 1.0) > 1e-12:
        raise StatisticsError(f"information must increase to 1 over {looks} looks, got {t!r}")
    cumulative = [spent(spending, alpha, x) for x in t]
    cumulative[-1] = alpha
    z: list[float] = []
    null = _Path(0.0)
    for k, share in enumerate(t):
        null.advance(share)
        increment = cumulative[k] - (cumulative[k - 1] if k else 0.0)
        z.append(float(ndtri(1 - increment)) if k == 0 else _solve(null.tail, increment))
        null.cut(None, z[-1])
    futility = None
    if beta is not None or drift is not None:
        if beta is None or drift is None or not 0 < beta < 0.5 or drift <= 0:
            raise StatisticsError(
                "futility bounds need beta in (0, 0.5) and a positive drift (the expected Z at the "
                f"last look under the alternative), got beta={beta!r}, drift={drift!r}"
            )
        futility = _futility(t, z, beta, drift, spending)
    return Boundaries(
        looks=looks,
        alpha=alpha,
        spending=spending,
        information=t,
        spent=tuple(cumulative),
        z=tuple(z),
        nominal=tuple(float(ndtr(-b)) for b in z),
        futility=futility,
        beta=beta,
        drift=drift,
    )


def _futility(t: Sequence[float], z: Sequence[float], beta: float, drift: float, spending: str) -> tuple[float, ...]:
    """Futility bounds spending ``beta`` under θ = ``drift`` (the continuation region between the
    futility and efficacy bounds); never above the efficacy bound, equal to it at the last look."""
    theta = drift  # S_1 ~ N(θ t, t): Z at t = 1 has mean θ
    path = _Path(theta)
    out: list[float] = []
    spent_before = 0.0
    for k, share in enumerate(t):
        path.advance(share)
        if k == len(t) - 1:
            out.append(z[k])
            break
        increment = spent(spending, beta, share) - spent_before
        spent_before += increment
        a = -_solve(lambda x: path.below(-x), increment)
        a = min(a, z[k])
        out.append(a)
        path.cut(a, z[k])
    return tuple(out)


def crossing_probabilities(bounds: Boundaries, theta: float = 0.0) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Under drift ``theta``, the probability of stopping at each look by crossing the efficacy
    bound, and (with futility bounds) by crossing the futility bound: what a design's error rates and
    expected sample size are computed from."""
    path = _Path(theta)
    up, down = [], []
    for k, share in enumerate(bounds.information):
        path.advance(share)
        up.append(path.tail(bounds.z[k]))
        low = bounds.futility[k] if bounds.futility is not None else None
        down.append(0.0 if low is None or k == bounds.looks - 1 else path.below(low))
        path.cut(low if k < bounds.looks - 1 else None, bounds.z[k])
    return tuple(up), tuple(down)
