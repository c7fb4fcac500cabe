"""How often a target that behaves exactly like its baselines passes the TOST gate: the gate's
false-alarm rate under the data it is given, estimated by a seeded simulation fitted to the
observed baseline scores (see :func:`equivalence_pass_probability`). The gate reports it as its
reliability and warns when it is low.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from pytest_llmbias.errors import StatisticsError
from pytest_llmbias.stats.tost import (
    ALTERNATIVES,
    EQUIVALENT,
    TESTS,
    check_alpha,
    check_choice,
    clean_scores,
    positive_real,
)


def _count(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= minimum:
        return int(value)
    raise StatisticsError(f"{what} must be a whole number ≥ {minimum}, got {value!r}")


def equivalence_pass_probability(
    baseline_scores: Sequence[Sequence[float]],
    *,
    n_target: int,
    k: float,
    alpha: float = 0.05,
    margin: float | None = None,
    min_margin: float | None = None,
    simulations: int = 4000,
    seed: int = 0,
    test: str = "welch",
    alternative: str = EQUIVALENT,
) -> float:
    """Estimated probability that a target behaving exactly like the baselines passes the gate.

    ``baseline_scores`` holds each baseline model's per-question scores (for ``test="paired"`` they
    must be aligned by question: same length, same order). Each simulation draws the K baselines
    and one more model as the target from a model fitted to the observed baselines, recomputes the
    margin δ = k · SD of the baseline models' means (unless ``margin`` is fixed; never below
    ``min_margin``) and applies the pass rule of ``test`` and ``alternative`` at ``alpha``
    (``equivalent``: |D̂| + t*·se < δ; ``no-worse``: D̂ + t*·se < δ; t* = t₁₋α(df)). Monte Carlo,
    seeded: the same inputs give the same figure.

    ``test="welch"`` (the Welch TOST of the target's scores against the pooled baseline scores):
    each model's mean is drawn from N(μ, τ²), τ² the between-model variance of the baseline means
    less the part explained by within-model noise; each model's per-question scores are
    N(its mean, σ²), σ² the pooled within-model variance. The baselines answer the mean number of
    questions they answered; the target ``n_target``. Question effects count as noise here, so when
    questions differ much more than models do, the simulated model means spread more than the
    observed ones (τ² is then 0 and the spread is σ²/n).

    ``test="paired"`` (:func:`paired_tost` of the target's scores against the baselines'
    per-question mean) — a two-way random-effects model without interaction (interaction is part
    of the noise), fitted by the two-way ANOVA of the K × n score matrix (Searle, Casella &
    McCulloch, *Variance Components*, 1992: the two-way crossed classification, ANOVA
    estimators)::

        score[j, i] = μ + qᵢ + m_j + e[j, i],  qᵢ ~ N(0, s_q²), m_j ~ N(0, τ²), e ~ N(0, σ²)

    n the number of questions in ``baseline_scores``: σ² = residual mean square,
    SS_E / ((K − 1)(n − 1)); τ² = max(0, Var(model means) − σ²/n); s_q² = max(0, Var(per-question
    means of the baselines) − σ²/K). In the simulation every model (the target too)
    answers the same ``n_target`` questions. The question effect qᵢ is common to every model, so
    it cancels exactly from the target's differences dᵢ = targetᵢ − mean_j score[j, i] and from
    the SD of the model means: the pass probability does not depend on s_q. The simulation
    therefore draws the exact sufficient statistics instead of whole score matrices (m = n_target):
    model means M_j = m_j + ē_j (ē_j ~ N(0, σ²/m)), the mean difference D̂ = M_target − mean_j M_j,
    and the variance of the differences σ²(1 + 1/K) · χ²(m − 1)/(m − 1), which is independent of
    every model mean under normal noise; se = √(that variance / m), df = m − 1.
    """
    import numpy as np
    from scipy import stats

    test = check_choice(test, TESTS, "test")
    alternative = check_choice(alternative, ALTERNATIVES, "alternative")
    alpha = check_alpha(alpha)
    n_target = _count(n_target, "n_target", 2)
    simulations = _count(simulations, "simulations", 1)
    if margin is None:
        k = positive_real(k, "k")
    else:
        margin = positive_real(margin, "the equivalence margin")
    if min_margin is not None:
        min_margin = positive_real(min_margin, "min_margin")

    groups = [clean_scores(g, f"baseline {i}") for i, g in enumerate(baseline_scores)]
    if len(groups) < 2:
        raise StatisticsError("at least two baseline models are needed to estimate gate stability")
    K = len(groups)
    rng = np.random.default_rng(seed)

    def margins(b_means: Any) -> Any:
        if margin is None:
            delta = k * b_means.std(axis=1, ddof=1)
        else:
            delta = np.full(simulations, float(margin))
        if min_margin is not None:
            delta = np.maximum(delta, float(min_margin))
        return delta

    if test == "paired":
        sizes = sorted({g.size for g in groups})
        if len(sizes) > 1:
            raise StatisticsError(
                "paired test: the baselines' score lists must be aligned by question (one score per "
                f"question, same order), but their lengths differ: {sizes}"
            )
        scores = np.vstack(groups)
        n_q = scores.shape[1]
        row = scores.mean(axis=1)
        resid = scores - row[:, None] - scores.mean(axis=0)[None, :] + scores.mean()
        sigma2 = float((resid**2).sum()) / ((K - 1) * (n_q - 1))
        tau2 = max(0.0, float(row.var(ddof=1)) - sigma2 / n_q)
        n = n_target
        model_means = rng.normal(0.0, math.sqrt(tau2), size=(simulations, K + 1)) + rng.normal(
            0.0, math.sqrt(sigma2 / n), size=(simulations, K + 1)
        )
        var_d = sigma2 * (1 + 1 / K) * rng.chisquare(n - 1, size=simulations) / (n - 1)
        diff = model_means[:, K] - model_means[:, :K].mean(axis=1)
        delta = margins(model_means[:, :K])
        se = np.sqrt(var_d / n)
        t_crit = stats.t.ppf(1 - alpha, n - 1)
    else:
        n_b = int(np.mean([g.size for g in groups]))
        means = np.array([g.mean() for g in groups])
        sigma2 = float(np.mean([g.var(ddof=1) for g in groups]))
        tau2 = max(0.0, float(means.var(ddof=1)) - sigma2 / n_b)
        model_means = rng.normal(0.0, math.sqrt(tau2), size=(simulations, K + 1))
        sigma = math.sqrt(sigma2)

        # Sufficient statistics per simulated model: sample mean and sample variance.
        def sample(n: int, mu: Any) -> tuple[Any, Any]:
            m = mu + rng.normal(0.0, sigma / math.sqrt(n), size=mu.shape)
            v = sigma2 * rng.chisquare(n - 1, size=mu.shape) / (n - 1)
            return m, v

        b_means, b_vars = sample(n_b, model_means[:, :K])
        t_mean, t_var = sample(n_target, model_means[:, K])
        # Pooled baseline values: mean of means; variance of the pooled sample (within + between).
        N = K * n_b
        pooled_mean = b_means.mean(axis=1)
        ss_within = ((n_b - 1) * b_vars).sum(axis=1)
        ss_between = (n_b * (b_means - pooled_mean[:, None]) ** 2).sum(axis=1)
        pooled_var = (ss_within + ss_between) / (N - 1)
        delta = margins(b_means)
        a, b = t_var / n_target, pooled_var / N
        se = np.sqrt(a + b)
        df = (a + b) ** 2 / (a * a / (n_target - 1) + b * b / (N - 1))
        diff = t_mean - pooled_mean
        t_crit = stats.t.ppf(1 - alpha, df)
    if alternative == EQUIVALENT:
        passed = (np.abs(diff) + t_crit * se) < delta
    else:
        passed = (diff + t_crit * se) < delta
    return float(passed.mean())
