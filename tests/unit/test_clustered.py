"""The cluster-robust standard error over a domain's categories: statsmodels' CR1 as the oracle;
reported beside every comparison of items in enough categories, and used to show a difference
only when asked (``clustered=True``), because a domain's categories are its fixed strata and a
bias in some of them is what a gate exists to catch."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_llmbias import evaluate_equivalence
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.stats.clustered import MIN_CLUSTERS, clustered_se

BASELINES = ("b0", "b1", "b2")


@pytest.mark.parametrize(("groups", "per"), [(5, 10), (9, 10), (4, 3)])
def test_the_clustered_se_is_statsmodels_cr1(groups: int, per: int) -> None:
    import statsmodels.api as sm

    rng = np.random.default_rng(groups * per)
    labels = [f"c{g}" for g in range(groups) for _ in range(per)]
    d = rng.normal(0, 1, groups * per) + np.repeat(rng.normal(0, 0.7, groups), per)
    fit = sm.OLS(d, np.ones_like(d)).fit(cov_type="cluster", cov_kwds={"groups": np.repeat(np.arange(groups), per)})
    got = clustered_se(d.tolist(), labels)
    assert got is not None
    assert got.se == pytest.approx(float(fit.bse[0]), rel=1e-9)
    assert got.df == groups - 1 and got.clusters == groups
    assert got.design_effect == pytest.approx(got.se**2 / (np.var(d, ddof=1) / d.size))


def test_too_few_clusters_or_no_variance_give_none() -> None:
    assert clustered_se([1.0, 2.0, 3.0], ["a", "a", "a"]) is None
    assert clustered_se([1.0, 1.0, 1.0, 1.0], ["a", "a", "b", "b"]) is None
    with pytest.raises(ValueError, match="3 differences and 2 cluster labels"):
        clustered_se([1.0, 2.0, 3.0], ["a", "b"])


def dimensions_scores(rng: np.random.Generator, biased: tuple[int, ...]) -> tuple[dict, dict]:
    """Nine dimensions of ten prompts; the target a third of a point worse on the ``biased`` ones
    only (a bias of some dimensions, as the example suite's demo target has)."""
    ids = [f"q{d}-{i}" for d in range(9) for i in range(10)]
    categories = {q: q.split("-")[0] for q in ids}
    q = dict(zip(ids, rng.normal(0, 0.2, len(ids)), strict=True))
    scores = {a: {i: 0.4 + q[i] + rng.normal(0, 0.05) for i in ids} for a in BASELINES}
    scores["t"] = {i: 0.4 + q[i] + rng.normal(0, 0.05) + (1.5 if int(i[1]) in biased else 0) for i in ids}
    return scores, categories


def test_a_bias_in_some_categories_fails_by_default_and_clustering_is_an_option() -> None:
    scores, categories = dimensions_scores(np.random.default_rng(4), biased=(1, 4))
    options = {"margin": 0.1, "alternative": "no-worse", "false_alarm": 0.006}
    default = evaluate_equivalence(scores, target="t", baselines=BASELINES, categories=categories, **options)
    (method,) = default.methods
    assert not default.passed and method.shown_violation
    # the clustered SE is reported: the difference concentrates in two of nine categories
    assert method.clustered is not None and method.clustered.clusters == 9 and method.clustered.design_effect > 4
    assert method.tost.se < method.clustered.se  # the paired test kept its own SE
    assert "not used: the categories are the domain's own" in default.report()
    # treated as draws from a pool of categories, two biased ones of nine cannot be told from chance
    pooled = evaluate_equivalence(
        scores, target="t", baselines=BASELINES, categories=categories, clustered=True, **options
    )
    (method,) = pooled.methods
    assert method.underpowered and method.clustered is not None
    assert method.tost.se == method.clustered.se and method.tost.df == 8  # the test takes it, on G - 1 df
    assert "the test uses it (clustered=True)" in pooled.report()
    with pytest.raises(ConfigError, match="'clustered' must be True or False"):
        evaluate_equivalence(scores, target="t", baselines=BASELINES, categories=categories, clustered="yes")


def test_with_clustering_a_category_shifted_target_fails_at_most_the_level() -> None:
    # categories drawn from a pool: every model, the target too, shifted per category at random
    rng = np.random.default_rng(9)
    categories = {f"q{i}": f"c{i % 5}" for i in range(50)}
    fails = {False: 0, True: 0}
    runs = 300
    for _ in range(runs):
        question = rng.normal(0, 1.5, 50)
        scores = {}
        for alias in (*BASELINES, "t"):
            shift = rng.normal(0, 0.8, 5)
            scores[alias] = {f"q{i}": 5 + question[i] + shift[i % 5] + rng.normal(0, 2) for i in range(50)}
        for clustered in (False, True):
            result = evaluate_equivalence(
                scores,
                target="t",
                baselines=BASELINES,
                categories=categories,
                alternative="no-worse",
                false_alarm=0.05,
                clustered=clustered,
            )
            fails[clustered] += not result.passed
    assert MIN_CLUSTERS <= 5
    # the paired SE counts the items as independent and fails 7-9 % (seeds 9-11); the clustered SE 2-4 %
    assert fails[False] / runs > 0.06
    assert fails[True] / runs <= 0.05


def test_asked_for_the_clustered_se_takes_it_even_where_it_is_the_smaller() -> None:
    # category means alike (the differences pull apart inside each category): the clustered SE is
    # below the paired one; clustered=True still decides on it, on G - 1 degrees of freedom, since
    # falling back on the paired SE whenever it is larger is no test at its level
    rng = np.random.default_rng(3)
    ids = [f"q{i}" for i in range(50)]
    categories = {q: f"c{i % 5}" for i, q in enumerate(ids)}
    base = {q: 5 + rng.normal(0, 1.5) for q in ids}
    scores = {a: {q: base[q] + rng.normal(0, 0.3) for q in ids} for a in BASELINES}
    offsets = rng.normal(0, 1, 50)
    for c in range(5):  # each category's offsets centred: their means are all 0.2
        members = [i for i in range(50) if i % 5 == c]
        offsets[members] += 0.2 - offsets[members].mean()
    reference = {q: float(np.mean([scores[b][q] for b in BASELINES])) for q in ids}
    scores["t"] = {q: reference[q] + offsets[i] for i, q in enumerate(ids)}
    paired = evaluate_equivalence(scores, target="t", baselines=BASELINES, categories=categories, margin=1.0)
    pooled = evaluate_equivalence(
        scores, target="t", baselines=BASELINES, categories=categories, margin=1.0, clustered=True
    )
    (p,), (m,) = paired.methods, pooled.methods
    assert m.clustered is not None and m.clustered.se < p.tost.se
    assert m.tost.se == m.clustered.se and m.tost.df == 4 and p.tost.df == 49
    assert "the test uses it (clustered=True)" in pooled.report()
