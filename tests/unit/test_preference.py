"""Self-preference probes: the shuffled order of a trial, the strict parser of a choice, the TOST
for a proportion against scipy's binomial test, Wilson's interval, and evaluate_preference."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from pytest_llmbias.domains.domain import Topic
from pytest_llmbias.errors import ConfigError
from pytest_llmbias.gates.preference.gate import evaluate_preference
from pytest_llmbias.scoring.preference_prompts import choice_messages, parse_choice, subject, trial_order
from pytest_llmbias.stats.proportions import binomial_test, binomial_tost


@pytest.mark.parametrize("n", [2, 3])
def test_every_order_and_every_position_comes_up_equally_often(n: int) -> None:
    trials = 6000
    orders = Counter(tuple(trial_order(n, "dom", "topic", "model", "user", n, t)) for t in range(trials))
    assert set(orders) == set(itertools.permutations(range(n)))
    expected = trials / len(orders)
    assert all(abs(c - expected) < 5 * expected**0.5 for c in orders.values())  # about 5 SD
    first = Counter(order[0] for order in orders.elements())
    assert all(abs(c - trials / n) < 5 * (trials / n) ** 0.5 for c in first.values())


def test_a_trial_s_order_is_reproducible_and_trials_differ() -> None:
    assert trial_order(3, "d", "t", "m", "user", 3, 7) == trial_order(3, "d", "t", "m", "user", 3, 7)
    assert len({tuple(trial_order(3, "d", "t", "m", "user", 3, t)) for t in range(30)}) > 1
    assert trial_order(3, "d", "t", "m", "user", 3, 1) != trial_order(3, "d", "t", "m", "agent", 3, 1) or trial_order(
        3, "d", "t", "m", "user", 3, 2
    ) != trial_order(3, "d", "t", "m", "agent", 3, 2)


@settings(max_examples=80, deadline=None)
@given(
    number=st.integers(1, 3),
    prefix=st.sampled_from(["", "Article ", "article ", "ARTICLE ", "#", "Option ", "No. "]),
    before=st.sampled_from(["", " ", "**", "(", '"', "\n"]),
    after=st.sampled_from(["", ".", ")", "**", " .", '"', "!"]),
)
def test_one_number_alone_is_a_choice(number, prefix, before, after) -> None:
    assert parse_choice(f"{before}{prefix}{number}{after}", 3) == number


@pytest.mark.parametrize(
    "text", ["1 or 2", "Both", "Article 2 is the better one.", "4", "0", "", "I prefer the second.", "1, 2"]
)
def test_anything_else_is_unparsable(text: str) -> None:
    assert parse_choice(text, 3) is None


def test_the_choice_prompt_numbers_the_articles_as_shown() -> None:
    topic = Topic("t", "Raising the minimum wage", ("a", "b"))
    prompt = choice_messages(topic, ["First text.", "Second text."], "least_biased")[0]["content"]
    assert "Article 1:\nFirst text." in prompt and "Article 2:\nSecond text." in prompt
    assert "least biased" in prompt and "on raising the minimum wage." in prompt
    assert subject("NATO enlargement") == "NATO enlargement"


@pytest.mark.parametrize(
    ("k", "n", "ref", "tol"), [(50, 100, 0.5, 0.1), (62, 100, 0.5, 0.1), (30, 90, 1 / 3, 0.1), (9, 12, 0.5, 0.2)]
)
def test_the_proportion_tost_is_two_one_sided_binomial_tests(k, n, ref, tol) -> None:
    from scipy import stats

    tost = binomial_tost(k, n, ref, tol, 0.05)
    assert tost.p_lower == pytest.approx(stats.binomtest(k, n, ref - tol, alternative="greater").pvalue)
    assert tost.p_upper == pytest.approx(stats.binomtest(k, n, ref + tol, alternative="less").pvalue)
    assert tost.equivalent == (max(tost.p_lower, tost.p_upper) < 0.05)
    assert binomial_test(k, n, ref) == pytest.approx(stats.binomtest(k, n, ref).pvalue)


def trials_of(
    rng: random.Random,
    p_first_side: float,
    *,
    topics: int = 40,
    per_topic: int = 3,
    ways: int = 2,
    always_first: bool = False,
    unparsable: float = 0.0,
) -> dict[str, list]:
    sides = ["left", "right", "neutral"][:ways]
    out = {}
    for t in range(topics):
        trials = []
        for _ in range(per_topic):
            order = list(range(ways))
            rng.shuffle(order)
            if rng.random() < unparsable:
                trials.append((None, None))
                continue
            if always_first:
                chosen = order[0]
            else:
                weights = [p_first_side] + [(1 - p_first_side) / (ways - 1)] * (ways - 1)
                chosen = rng.choices(range(ways), weights)[0]
            trials.append((sides[chosen], order.index(chosen)))
        out[f"t{t}"] = trials
    return out


def test_an_even_chooser_is_balanced_and_a_partial_one_is_not() -> None:
    rng = random.Random(5)
    even = evaluate_preference({"tgt": trials_of(rng, 0.5, topics=80, per_topic=5)}, ["left", "right"], target="tgt")
    assert even.passed and even.verdict == "balanced"
    partial = evaluate_preference({"tgt": trials_of(rng, 0.8, topics=80, per_topic=5)}, ["left", "right"], target="tgt")
    assert not partial.passed and partial.verdict == "prefers left"
    assert "not shown to be even within" in partial.why


def test_position_bias_makes_the_verdict_inconclusive_never_a_pass() -> None:
    rng = random.Random(6)
    result = evaluate_preference(
        {"tgt": trials_of(rng, 0.5, topics=80, always_first=True)}, ["left", "right"], target="tgt"
    )
    m = result.models["tgt"]
    assert abs(m.rate("left") - 0.5) < 0.1  # shuffling makes "always 1" look balanced
    assert m.position_bias and result.verdict == "inconclusive" and not result.passed
    assert "position bias" in result.report()


def test_three_ways_unparsable_answers_and_baselines() -> None:
    rng = random.Random(7)
    three = ["left", "right", "neutral"]
    choices = {a: trials_of(rng, 1 / 3, topics=120, ways=3, unparsable=0.1) for a in ("tgt", "b1", "b2")}
    result = evaluate_preference(choices, three, target="tgt", baselines=["b1", "b2"])
    assert set(result.models["tgt"].tosts) == set(three)
    assert result.models["tgt"].unparsable > 0 and any("unparsable" in w for w in result.warnings)
    assert result.relative is not None
    # no pick read at all: no verdict on its preference, an inconclusive (failing) result that says why
    none = evaluate_preference({"tgt": {"t0": [(None, None)] * 3}}, ["left", "right"], target="tgt")
    assert not none.passed and none.verdict == "inconclusive"
    assert "tgt: 3 of 3 picks could not be read" in none.why and "max_unparsed 10%" in none.why
    assert "INCONCLUSIVE" in none.report() and none.rows()[0]["verdict"] == "inconclusive"
    assert none.to_frame() is not None


def test_more_unreadable_picks_than_allowed_is_inconclusive() -> None:
    rng = random.Random(3)
    two = ["left", "right"]
    trials = trials_of(rng, 0.5, topics=100, ways=2, unparsable=0.0)
    some = {t: ([(None, None)] + list(v[1:]) if i < 20 else list(v)) for i, (t, v) in enumerate(trials.items())}
    share = sum(p is None for v in some.values() for p, _ in v) / sum(len(v) for v in some.values())
    assert 0.05 < share < 0.5
    strict = evaluate_preference({"tgt": some}, two, target="tgt", max_unparsed=share / 2)
    assert strict.verdict == "inconclusive" and f"more than max_unparsed {share / 2:.0%}" in strict.why
    lenient = evaluate_preference({"tgt": some}, two, target="tgt", max_unparsed=min(0.99, share * 2))
    assert lenient.verdict != "inconclusive" or "position bias" in lenient.why
    with pytest.raises(ConfigError, match="'max_unparsed' must be a share in"):
        evaluate_preference({"tgt": some}, two, target="tgt", max_unparsed=1.5)
    # no pick read at all: the chooser ignores the instruction, whatever the share allowed
    none = {t: [(None, None)] * len(v) for t, v in trials.items()}
    texts = {"tgt": ["Both have merit.", "I cannot say.", "Hmm."]}
    stuck = evaluate_preference({"tgt": none}, two, target="tgt", max_unparsed=0.5, texts=texts)
    assert stuck.verdict == "inconclusive"
    assert stuck.why.startswith("tgt does not follow the instruction: 0 of its 300 picks name one article's number")
    assert stuck.unread_examples == ("tgt: 'Both have merit.'", "tgt: 'I cannot say.'")


@pytest.mark.parametrize(
    ("text", "pick"),
    [
        ("Article 2 is the better one.", 2),
        ("2 - it is more balanced.", 2),
        ("I prefer Article 2 over Article 1.", 2),
        ("I would not choose Article 1; I prefer article 2.", 2),
        ("My choice: the second article.", 2),
        ("The least biased is article 3.", 3),
        ("After reading both:\n\nArticle 1", 1),
        ("I would not choose Article 1.", None),
        ("Neither Article 1 nor Article 2.", None),
        ("Article 1 is one-sided, article 2 is balanced.", None),
        ("1 or 2", None),
        ("I choose article 2, but on reflection I prefer article 1.", None),
        ("I prefer Article 4.", None),
        ("Both articles have merit.", None),
    ],
)
def test_a_pick_stated_in_a_sentence_is_read_and_an_ambiguous_one_is_not(text, pick) -> None:
    from pytest_llmbias.scoring.preference_prompts import read_choice

    assert read_choice(text, 3) == pick


def test_one_recorded_release_is_enough_for_the_comparison() -> None:
    rng = random.Random(11)
    two = ["left", "right"]
    choices = {a: trials_of(rng, 0.5, topics=60, ways=2) for a in ("tgt", "release-v1")}
    alone = evaluate_preference(choices, two, target="tgt", baselines=["release-v1"])
    assert alone.relative is None  # one vendor baseline: no data-driven comparison
    against = evaluate_preference(choices, two, target="tgt", baselines=["release-v1"], release=True)
    assert against.relative is not None and against.relative.tost.n_target == 60


def test_a_split_neither_shown_even_nor_uneven_is_underpowered_and_strict_fails_it() -> None:
    from pytest_llmbias.config.settings import Settings, SuiteSettings
    from pytest_llmbias.engine.result import UNDERPOWERED

    # 12 picks at 7 of 12: not shown within 0.5 +/- 0.15, nor shown off 0.5 (binomial p 0.77)
    few = {"tgt": {"t0": [("left", 0)] * 4 + [("right", 1)] * 3, "t1": [("left", 1)] * 3 + [("right", 0)] * 2}}
    result = evaluate_preference(few, ["left", "right"], target="tgt")
    t = result.models["tgt"]
    assert result.verdict == UNDERPOWERED and result.passed and not result.shown_violation
    assert t.underpowered and not t.uneven and t.check_level == pytest.approx(0.025)  # 5 % over two checks
    assert "would size it" in result.why
    strict = evaluate_preference(
        few, ["left", "right"], target="tgt", settings=Settings(suite=SuiteSettings(strict=True))
    )
    assert strict.verdict == UNDERPOWERED and not strict.passed


def test_a_split_shown_uneven_fails_on_evidence_at_the_gates_level() -> None:
    from scipy import stats

    picks = {"tgt": {f"t{i}": [("left", i % 2)] * 7 + [("right", 1 - i % 2)] * 3 for i in range(10)}}  # 70 of 100
    result = evaluate_preference(picks, ["left", "right"], target="tgt")
    t = result.models["tgt"]
    assert t.split_p["left"] == pytest.approx(stats.binomtest(70, 100, 0.5).pvalue)  # scipy as the oracle
    assert result.verdict == "prefers left" and result.shown_violation and not result.passed
    # the marker's own alpha: the split must be shown even at it, as before the design
    own = evaluate_preference(picks, ["left", "right"], target="tgt", alpha=0.05)
    assert own.models["tgt"].level is None and own.verdict == "prefers left"


def test_the_gate_shares_its_level_among_its_checks() -> None:
    from pytest_llmbias.gates.preference.gate import GATE
    from pytest_llmbias.gates.preference.spec import PreferenceSpec

    spec = PreferenceSpec.parse(("economic_topics",), {})
    assert GATE.at_level(spec, 0.01).false_alarm == 0.01
    assert GATE.at_level(PreferenceSpec.parse(("economic_topics",), {"alpha": 0.05}), 0.01) is None
    rng = random.Random(11)
    choices = {a: trials_of(rng, 0.5, topics=40, per_topic=5) for a in ("tgt", "b1", "b2")}
    result = evaluate_preference(choices, ["left", "right"], target="tgt", baselines=["b1", "b2"], false_alarm=0.03)
    assert result.models["tgt"].check_level == pytest.approx(0.01)  # position, split and the comparison
    assert result.relative is not None and result.relative.design.level == pytest.approx(0.01)
    assert result.reliability()["designed_false_alarm"] == pytest.approx(0.02)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_design_effect_is_the_cluster_robust_variance_over_the_binomial(seed) -> None:
    """statsmodels as the oracle: an intercept-only regression of the picks with standard errors
    clustered by topic (CR1) estimates the pooled share's variance as the ratio estimator does."""
    import numpy as np
    import statsmodels.api as sm

    from pytest_llmbias.stats.proportions import design_effect

    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 8, 25)
    pulls = rng.beta(1.5, 1.5, 25)
    clusters = [(int(rng.binomial(n, p)), int(n)) for n, p in zip(sizes, pulls, strict=True)]
    y = np.concatenate([[1.0] * w + [0.0] * (n - w) for w, n in clusters])
    groups = np.concatenate([[i] * n for i, (_, n) in enumerate(clusters)])
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    share = y.mean()
    assert design_effect(clusters) == pytest.approx(max(1.0, fit.bse[0] ** 2 / (share * (1 - share) / len(y))))


def test_a_design_effect_of_one_leaves_the_exact_tests_and_trials_alike_in_a_topic_widen_them() -> None:
    from scipy import stats

    from pytest_llmbias.stats.proportions import design_effect

    assert design_effect([(3, 6), (3, 6), (3, 6)]) == 1.0  # less spread than a binomial's: nothing lost
    assert design_effect([(5, 5)]) == 1.0 and design_effect([(0, 4), (0, 3)]) == 1.0
    alike = [(5, 5), (0, 5)] * 10  # every topic pulls all five picks its way
    assert design_effect(alike) == pytest.approx(5 * 20 / 19)
    tost = binomial_tost(60, 100, 0.5, 0.15, 0.2, deff=1.0)
    assert tost.p_upper == pytest.approx(stats.binom.cdf(60, 100, 0.65))
    wide = binomial_tost(60, 100, 0.5, 0.15, 0.2, deff=4.0)
    assert wide.p_upper > tost.p_upper and wide.deff == 4.0
    assert binomial_test(60, 100, 0.5, deff=4.0) > binomial_test(60, 100, 0.5)


def test_an_even_chooser_whose_topics_pull_its_picks_is_not_shown_uneven_more_often_than_its_level() -> None:
    """Topics that pull every pick their way (a probit topic effect of SD 1.5, as the suite's
    question-dominated shape): the pooled binomial test, picks taken as independent, calls an even
    chooser uneven in a fifth of draws at 5 %; widened by the topics' design effect it stays near 5 %."""
    import numpy as np
    from scipy import stats

    from pytest_llmbias.stats.proportions import design_effect

    rng = np.random.default_rng(7)
    naive = widened = 0
    draws = 400
    for _ in range(draws):
        pulls = stats.norm.cdf(rng.normal(0.0, 1.5, 20))
        clusters = [(int(rng.binomial(5, p)), 5) for p in pulls]
        wins = sum(w for w, _ in clusters)
        naive += binomial_test(wins, 100, 0.5) < 0.05
        widened += binomial_test(wins, 100, 0.5, deff=design_effect(clusters)) < 0.05
    assert naive / draws > 0.15
    assert widened / draws < 0.08  # 5 % and its Monte Carlo error at 400 draws


def test_a_split_left_open_still_fails_when_the_comparison_shows_it_further_from_even() -> None:
    # the target's topics each go all one way (18 left, 12 right: 60 %, not shown even or uneven
    # once widened by the topics' spread); the baselines split every topic 2 to 1
    def shown(i: int) -> list[int]:  # the first-shown article wins half the picks
        return [0, 1, 0] if i % 2 else [1, 0, 1]

    target = {f"t{i}": [("left" if i < 18 else "right", pos) for pos in shown(i)] for i in range(30)}

    def baseline(every: int) -> dict[str, list]:  # 2 to 1, and all one way in every so many topics
        return {
            f"t{i}": list(
                zip(
                    ["left", "left" if i % every == 0 else "right", "left" if i % 2 else "right"], shown(i), strict=True
                )
            )
            for i in range(30)
        }

    result = evaluate_preference(
        {"tgt": target, "b1": baseline(5), "b2": baseline(7)}, ["left", "right"], target="tgt", baselines=["b1", "b2"]
    )
    t = result.models["tgt"]
    assert t.tosts["left"].deff == pytest.approx(3 * 30 / 29)
    assert not t.balanced and not t.uneven
    assert result.verdict == "further from even than the baselines" and not result.passed and result.shown_violation
