"""The standard error of a mean difference when the items come in clusters (a domain's categories,
BBQ's templates, the topics of paired prompts).

Items of one category are not independent draws: a model that answers one Tibet question evasively
tends to answer the others so, and a category-level shift moves every item of it at once. The
ordinary paired standard error SD(d)/√n treats the n item differences as independent and then
understates the noise of their mean. The cluster-robust (CR1) standard error of the mean over G
clusters does not:

    se² = G / (G − 1) · Σ_g (Σ_{i∈g} (dᵢ − d̄))² / n²,   on G − 1 degrees of freedom,

the sandwich estimator of an intercept-only regression with Stata's small-sample factor, read on
t with G − 1 degrees of freedom (Cameron & Miller, "A Practitioner's Guide to Cluster-Robust
Inference", J. Human Resources 50 (2015), §II.C and §VI). It matches statsmodels'
``OLS(d, 1).fit(cov_type="cluster", cov_kwds={"groups": g})`` (whose factor is the same with one
regressor).

How a comparison uses it (:func:`pytest_llmbias.engine.relative.compare`): it is reported beside
every paired comparison whose items fall in at least :data:`MIN_CLUSTERS` categories; with
``clustered=True`` the whole test (the TOST that passes, the test that fails) takes it, on G − 1
degrees of freedom, whatever it reads (:func:`clustered_tost`). Taking it only where it is the
larger, the paired one on its n − 1 degrees of freedom otherwise, is not a valid test: where the
categories dominate the noise (more samples shrink the rest, not them) the paired SE is far too
small, and each time the clustered one's own draw comes out smaller still the test falls back on
it — `benchmarks/suite_validity.py` measured an embedding gate failing a good release 7 % of the
time against its 0.71 % share so, at the default sampling budget. With fewer categories it is too
uncertain to use (its degrees of freedom fall to one or two).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_llmbias.stats.tost import TostResult

MIN_CLUSTERS = 4
"""The fewest categories whose cluster-robust standard error a comparison uses: below it, t on
G − 1 ≤ 2 degrees of freedom makes the fail rule all but unable to fail anything."""


@dataclass(frozen=True)
class ClusteredSE:
    """The cluster-robust standard error ``se`` of the mean item difference over ``clusters``
    clusters, on ``df`` = clusters − 1 degrees of freedom, and ``design_effect``: its variance over
    the independent-items standard error's (1: no clustering to speak of)."""

    se: float
    df: float
    clusters: int
    design_effect: float

    def to_dict(self) -> dict[str, float | int]:
        return {"se": self.se, "df": self.df, "clusters": self.clusters, "design_effect": self.design_effect}


def clustered_se(differences: Sequence[float], clusters: Sequence[str]) -> ClusteredSE | None:
    """The CR1 standard error of the mean of ``differences`` (one per item) whose items fall in
    ``clusters`` (one label per item; see the module docstring). None with fewer than two clusters,
    or when the items' differences have no variance."""
    import numpy as np

    d = np.asarray(differences, dtype=float)
    if d.size != len(clusters):
        raise ValueError(f"{d.size} differences and {len(clusters)} cluster labels")
    labels = list(dict.fromkeys(clusters))
    g = len(labels)
    n = int(d.size)
    if g < 2 or n < 2:
        return None
    index = {label: i for i, label in enumerate(labels)}
    sums = np.zeros(g)
    np.add.at(sums, [index[c] for c in clusters], d - d.mean())
    var = g / (g - 1) * float(np.sum(sums**2)) / (n * n)
    iid = float(np.var(d, ddof=1)) / n
    if not iid > 0:
        return None
    return ClusteredSE(se=math.sqrt(var), df=float(g - 1), clusters=g, design_effect=var / iid)


def clustered_tost(tost: TostResult, clustered: ClusteredSE) -> TostResult:
    """``tost`` (a paired TOST) recomputed with the cluster-robust standard error on its G − 1
    degrees of freedom: the same difference, margin, alpha and alternative; H0 and H1 as the paired
    test's (:func:`pytest_llmbias.stats.tost.paired_tost`), the items' categories counted as a
    sample of a larger pool."""
    from pytest_llmbias.stats.tost import _result

    se, df, n, g = clustered.se, clustered.df, tost.n_target, clustered.clusters
    return _result(
        test=tost.test,
        alternative=tost.alternative,
        n_target=tost.n_target,
        n_baseline=tost.n_baseline,
        mean_target=tost.mean_target,
        mean_baseline=tost.mean_baseline,
        diff=tost.diff,
        margin=tost.margin,
        alpha=tost.alpha,
        se=se,
        df=df,
        # m items in as many clusters of the same size: the SE shrinks as 1/√m, the df grow with them
        se_df=lambda m: (se * math.sqrt(n / max(1, m)), max(1.0, g * m / n - 1)),
    )
