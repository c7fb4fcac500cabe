"""The judge method's scores, and how far its judges can be trusted.

Every answer is rated by each judge of the panel (``judges:``, or the one ``judge:``) on the
domain's rubric; the gate's score of an answer is the judges' mean (or median). Beside the
scores, three measures of trust, each of which can leave the judge method without a verdict:

- **test-retest**: ``judging.retest`` answers per gate (the same ones on every run) are rated a
  second time by each judge with a new seed, and the two draws' agreement is Krippendorff's
  alpha; below ``judging.min_agreement`` the judge's scores are too noisy to decide on;
- **anchors**: answers with a known score (the rubric's and the domain's ``anchors:``); a judge
  that misses more of them than the domain's ``anchor_misses`` allows does not read the rubric
  as it was written;
- **agreement** of two judges or more (Krippendorff's alpha with a bootstrap interval, and the
  ICC(2,1)), reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_llmbias.config.settings import DEFAULT_MAX_UNPARSED
from pytest_llmbias.errors import StatisticsError

if TYPE_CHECKING:
    from pytest_llmbias.config.rubric_file import Anchor, Rubric
    from pytest_llmbias.config.settings import ModelSpec
    from pytest_llmbias.domains.domain import Domain
    from pytest_llmbias.engine.protocol import GateSession
    from pytest_llmbias.planning.collector import FollowUp
    from pytest_llmbias.planning.request import ResponseRequest
    from pytest_llmbias.planning.response_set import ResponseSet
    from pytest_llmbias.scoring.judge_calls import JudgeOutcome

#: resamples of the bootstrap interval of an agreement (over items)
AGREEMENT_RESAMPLES = 1000
#: fewest answers rated twice for a test-retest agreement to be measured
MIN_RETEST_PAIRS = 3


@dataclass(frozen=True)
class JudgeScores:
    """The judge's scores (alias -> question id -> mean over samples) on the questions kept, how
    they were read, the questions dropped for an unreadable rating, up to three unreadable answers,
    what was measured of the judges' trust (:func:`trust_figures` keys: judges, combine, scored,
    rubric, agreement, retest, min_agreement, anchors) and the problems that leave the judge method without a verdict
    (empty when it has one)."""

    scores: dict[str, dict[str, float]]
    reading: dict[str, int] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    trust: Mapping[str, Any] = field(default_factory=dict)


def panel_rubric(settings: Any, domain: Domain) -> tuple[Rubric, tuple[Anchor, ...]]:
    """The rubric ``domain`` is judged on and its anchors (the rubric's, then the domain's)."""
    from pytest_llmbias.config.rubric_file import anchors_on, rubric_for

    rubric = rubric_for(domain.rubric, settings.judging.rubric)
    return rubric, anchors_on(rubric, domain_anchors(domain, rubric))


def retest_labels(settings: Any, items: Sequence[tuple[str, str]]) -> frozenset[str]:
    """The labels of ``items`` ((alias, label) pairs) each judge rates twice: a recorded release's
    answers are rated as they were when it was recorded, so never retested."""
    from pytest_llmbias.scoring.judge_calls import retest_sample

    recorded = {m.alias for m in settings.roster if m.recorded is not None}
    return retest_sample([label for alias, label in items if alias not in recorded], settings.judging.retest)


def domain_anchors(domain: Domain, rubric: Rubric) -> tuple[Anchor, ...]:
    """The domain's anchors where they apply: they are scored on the rubric they were written for,
    the domain's own, else the built-in one; a run that judges the domain on a rubric of its own
    uses that rubric's anchors only."""
    from pytest_llmbias.config.rubric_file import builtin_rubric

    return domain.anchors if domain.rubric is not None or rubric == builtin_rubric() else ()


def plan_judging(session: GateSession, request: ResponseRequest, domain: Domain) -> list[FollowUp]:
    """One follow-up per judge that rates each answer of ``request`` (and rates twice the retest
    sample); the anchors' ratings are planned at once."""
    from pytest_llmbias.errors import ConfigError
    from pytest_llmbias.planning.request import grid
    from pytest_llmbias.scoring.judge_calls import JudgeFollowUp, JudgeItem, anchor_calls

    settings = session.settings
    if not settings.panel:
        raise ConfigError(
            "the judge method needs a judge model: set 'judge' (or 'judges') in llmbias.yaml or pass --llmbias-judge "
            "MODEL"
        )
    rubric, anchors = panel_rubric(settings, domain)
    retest = retest_labels(
        settings,
        [
            (c.model.alias, JudgeItem(c.model.alias, c.question.id, "", c.sample, "").label)
            for c in grid(request, settings, domain)
            if domain.first_batch is None or c.question.unit in domain.first_batch
        ],
    )
    follow_ups: list[FollowUp] = []
    for judge in settings.panel:
        follow_ups.append(JudgeFollowUp(judge, domain.focus, domain.name, rubric=rubric, retest=retest))
        if anchors:
            session.plan_calls(anchor_calls(judge, anchors, focus=domain.focus, domain=domain.name, rubric=rubric))
    return follow_ups


def _combine(values: Sequence[float], how: str) -> float:
    return float(statistics.median(values) if how == "median" else statistics.fmean(values))


def judge_scores(
    session: GateSession, responses: ResponseSet, *, max_unparsed: float = DEFAULT_MAX_UNPARSED
) -> JudgeScores:
    """Each judge's scores of every answer, combined (mean or median) per answer. A rating still
    unreadable after the re-asks drops its question for every model (the comparison is paired);
    when more than ``max_unparsed`` of a model's answers are unreadable, a judge follows the rubric
    for none of its first answers, its test-retest agreement is below ``judging.min_agreement``
    or it misses more anchors than the domain allows, the judge method has no verdict
    (``problems``). Raises :class:`MissingResponsesError` when a judge answer is missing and
    :class:`StatisticsError` when the judges gave every answer one score."""
    from pytest_llmbias.planning.request import missing_error
    from pytest_llmbias.scoring.judge_calls import RETEST_DRAW, JudgeItem, resolve_judgements

    settings = session.settings
    domain = responses.domain
    rubric, anchors = panel_rubric(settings, domain)
    items = [
        JudgeItem(alias, q.id, q.text, s, responses.text(alias, q.id, s))
        for alias in responses.aliases
        for q in responses.questions
        for s in range(responses.samples)
    ]
    units = {q.id: q.unit for q in responses.questions}
    again_labels = retest_labels(
        settings,
        [(i.alias, i.label) for i in items if domain.first_batch is None or units[i.question_id] in domain.first_batch],
    )
    again = [i for i in items if i.label in again_labels]
    anchor_items = [JudgeItem("anchor", f"anchor:{k + 1}", a.question, 0, a.answer) for k, a in enumerate(anchors)]

    def resolve(judge: ModelSpec, which: list[JudgeItem], draw: int = 0) -> JudgeOutcome:
        return resolve_judgements(
            which, focus=domain.focus, judge=judge, get=session.store.get, domain=domain.name, rubric=rubric, draw=draw
        )

    outcomes = {j.alias: resolve(j, items) for j in settings.panel}
    retests = {j.alias: resolve(j, again, RETEST_DRAW) for j in settings.panel} if again else {}
    anchored = {j.alias: resolve(j, anchor_items) for j in settings.panel} if anchor_items else {}
    reading: dict[str, int] = {}
    for outcome in outcomes.values():
        for form, n in outcome.reading().items():
            reading[form] = reading.get(form, 0) + n
    refusals = [r for alias, o in outcomes.items() if (r := o.refusal(alias)) is not None]
    if refusals:  # the ratings it was never asked for are not missing: it cannot rate
        never = [t for o in outcomes.values() for t in o.unread]
        return JudgeScores({}, reading, examples=tuple(never[:2]), problems=tuple(refusals))
    pending = [c for group in (outcomes, retests, anchored) for o in group.values() for c in o.pending]
    if pending:
        raise missing_error(
            f"judge score(s) for domain {domain.name!r}",
            [(c.alias, c.question or c.call.key[:12], c.call.key) for c in pending],
            session.errors,
            offline=settings.store.offline,
        )
    failures = {item: text for o in outcomes.values() for item, text in o.failures.items()}
    examples = tuple(list(failures.values())[:3])
    trust = trust_figures(
        settings.panel,
        outcomes,
        retests,
        anchored,
        anchors,
        rubric=rubric,
        domain=domain,
        combine=str(settings.judging.combine or "mean"),
        min_agreement=settings.judging.min_agreement,
    )
    problems = list(trust_problems(trust))
    per_model = {a: responses.n_questions * responses.samples for a in responses.aliases}
    unread: dict[str, int] = {}
    for item in failures:
        unread[item.alias] = unread.get(item.alias, 0) + 1
    over = [a for a, n in unread.items() if n / per_model[a] > max_unparsed]
    names = ", ".join(repr(j.alias) for j in settings.panel)
    if over:
        worst = max(over, key=lambda a: unread[a])
        problems.append(
            f"judge {names}: {unread[worst]} of {per_model[worst]} ratings of {worst}'s answers stayed "
            f"unreadable after the re-asks ({unread[worst] / per_model[worst]:.0%}), more than "
            f"max_unparsed {max_unparsed:.0%}"
        )
        return JudgeScores({}, reading, examples=examples, problems=tuple(problems), trust=trust)
    dropped = tuple(sorted({i.question_id for i in failures}))
    if len(dropped) >= responses.n_questions - 1:
        problems.append(f"judge {names}: fewer than two questions left once unreadable ratings are dropped")
        return JudgeScores({}, reading, dropped, examples, problems=tuple(problems), trust=trust)
    combine = str(settings.judging.combine or "mean")
    combined = {
        item: _combine([o.scores[item] for o in outcomes.values()], combine)
        for item in items
        if item.question_id not in dropped
    }
    distinct = set(combined.values())
    if len(distinct) == 1 and len(combined) > 1:
        raise StatisticsError(
            f"judge {names} gave every one of the {len(combined)} answers the same score "
            f"({distinct.pop():g}): it cannot tell them apart, so the judge method has no verdict; use a more "
            "capable judge, or sample it (params: {temperature: ...})"
        )
    by: dict[str, dict[str, list[float]]] = {}
    for item, score in combined.items():
        by.setdefault(item.alias, {}).setdefault(item.question_id, []).append(score)
    scores = {a: {q: float(statistics.fmean(v)) for q, v in qs.items()} for a, qs in by.items()}
    return JudgeScores(scores, reading, dropped, examples if dropped else (), problems=tuple(problems), trust=trust)


def _agreement(scores: Mapping[str, Mapping[str, float]]) -> dict[str, Any] | None:
    """Krippendorff's alpha and the ICC of ``scores`` as a JSON-friendly dict; None when it
    cannot be measured (no item two raters scored); alpha None (with ``identical``) when every
    rating is the same."""
    from pytest_llmbias.stats.agreement import judge_agreement

    try:
        return judge_agreement(scores, resamples=AGREEMENT_RESAMPLES).to_dict()
    except StatisticsError:
        first, *rest = scores.values()
        common = [k for k in first if all(k in r for r in rest)]
        if not common:
            return None
        same = all(first[k] == r[k] for r in rest for k in common)
        return {
            "alpha": None,
            "interval": [None, None],
            "icc": None,
            "n_items": len(common),
            "n_judges": len(scores),
            "identical": same,
        }


def trust_figures(
    panel: Sequence[ModelSpec],
    outcomes: Mapping[str, JudgeOutcome],
    retests: Mapping[str, JudgeOutcome],
    anchored: Mapping[str, JudgeOutcome],
    anchors: Sequence[Anchor],
    *,
    rubric: Rubric,
    domain: Domain,
    combine: str,
    min_agreement: float,
) -> dict[str, Any]:
    """What the report says of the judges: who they are and how their scores are combined, how
    each one's scores were read (``scored``: expectations of its log-probabilities and sampled
    labels, with why each label was kept), the rubric, their agreement with one another (two or
    more), each one's test-retest agreement and anchor misses."""
    aliases = [j.alias for j in panel]
    between = None
    if len(aliases) > 1:
        between = _agreement({a: {i.label: s for i, s in outcomes[a].scores.items()} for a in aliases})
    retest: dict[str, Any] = {}
    for alias, again in retests.items():
        first = outcomes[alias].scores
        pairs = {i.label: (first[i], s) for i, s in again.scores.items() if i in first}
        entry: dict[str, Any] = {
            "n": len(pairs),
            "unread": len(again.failures),
            "differ": sum(1 for a, b in pairs.values() if a != b),
            "max_difference": max((abs(a - b) for a, b in pairs.values()), default=0),
        }
        if len(pairs) >= MIN_RETEST_PAIRS:
            measured = _agreement(
                {"first": {k: a for k, (a, _) in pairs.items()}, "retest": {k: b for k, (_, b) in pairs.items()}}
            )
            entry.update(measured or {})
        retest[alias] = entry
    misses: dict[str, Any] = {}
    for alias, outcome in anchored.items():
        missed = []
        for k, anchor in enumerate(anchors):
            item = next((i for i in outcome.scores if i.question_id == f"anchor:{k + 1}"), None)
            expected = rubric.oriented(anchor.score)
            if item is None:
                missed.append(
                    {"anchor": k + 1, "expected": anchor.score, "scored": None, "tolerance": anchor.tolerance}
                )
            elif abs(outcome.scores[item] - expected) > anchor.tolerance:
                missed.append(
                    {
                        "anchor": k + 1,
                        "expected": anchor.score,
                        "tolerance": anchor.tolerance,
                        "scored": rubric.oriented(outcome.scores[item]),
                    }
                )
        misses[alias] = {"n": len(anchors), "missed": missed, "allowed": domain.anchor_misses}
    scored = {
        alias: {
            "logprobs": outcomes[alias].scored.get("logprobs", 0),
            "label": outcomes[alias].scored.get("label", 0),
            "fallbacks": dict(sorted(outcomes[alias].fallbacks.items())),
        }
        for alias in aliases
    }
    return {
        "judges": aliases,
        "combine": combine if len(aliases) > 1 else None,
        "scored": scored,
        "rubric": rubric.describe(),
        "agreement": between,
        "retest": retest,
        "min_agreement": min_agreement,
        "anchors": misses,
    }


def trust_problems(trust: Mapping[str, Any]) -> list[str]:
    """Why the judges' scores cannot be decided on: a test-retest agreement below the minimum, or
    more anchors missed than the domain allows."""
    out = retest_problems(trust, measured="", judged_twice="answers rated twice", verdicts="scores")
    for alias, a in trust.get("anchors", {}).items():
        if len(a["missed"]) > a["allowed"]:
            first = a["missed"][0]
            scored = "no readable score" if first["scored"] is None else f"scored {first['scored']:g}"
            out.append(
                f"judge {alias!r} missed {len(a['missed'])} of {a['n']} anchor answers (the domain allows "
                f"{a['allowed']}): anchor {first['anchor']} is a {first['expected']} "
                f"(±{first['tolerance']:g}), {scored}"
            )
    return out


def retest_problems(trust: Mapping[str, Any], *, measured: str, judged_twice: str, verdicts: str) -> list[str]:
    """One line per judge whose test-retest agreement (``trust["retest"]``) is below
    ``trust["min_agreement"]``: ``measured`` names what the alpha is of, ``judged_twice`` the items
    asked twice, ``verdicts`` what the judge gives."""
    out = []
    for alias, r in trust.get("retest", {}).items():
        alpha = r.get("alpha")
        if alpha is not None and alpha < trust["min_agreement"]:
            out.append(
                f"judge {alias!r}: test-retest agreement {alpha:.2f} (Krippendorff's alpha{measured} on {r['n']} "
                f"{judged_twice}) is below min_judge_agreement {trust['min_agreement']:g}: its {verdicts} are too "
                "noisy to decide on"
            )
    return out


def trust_lines(trust: Mapping[str, Any]) -> list[str]:
    """The report's lines on the judges: rubric, agreement, retest, anchors."""
    if not trust:
        return []
    rubric = trust.get("rubric") or {}
    lines = [
        f"judges: {', '.join(trust['judges'])}"
        + (f" ({trust['combine']} of their scores)" if trust.get("combine") else "")
        + f"; rubric {rubric.get('name')} ({rubric.get('min')}-{rubric.get('max')}, {rubric.get('digest')})"
    ]
    between = trust.get("agreement")
    if between:
        lines.append("judges' agreement: " + _agreement_text(between))
    for alias, r in trust.get("scored", {}).items():
        why = ", ".join(f"{k} {n}" for k, n in r["fallbacks"].items())
        lines.append(
            f"scores of {alias}: {r['logprobs']} expectation(s) of its log-probabilities, {r['label']} sampled "
            f"label(s)" + (f" (kept for: {why})" if why else "")
        )
    for alias, r in trust.get("retest", {}).items():
        lines.append(
            f"test-retest of {alias}: "
            + (_agreement_text(r) if "alpha" in r else f"{r['n']} answer(s) rated twice, too few to measure")
            + f"; {r['differ']} of {r['n']} scored differently (at most {r['max_difference']:g} apart)"
            + (f"; {r['unread']} second rating(s) unread, not counted" if r.get("unread") else "")
            + f"; minimum alpha {trust['min_agreement']:g}"
        )
    for alias, a in trust.get("anchors", {}).items():
        if a["n"]:
            lines.append(
                f"anchors of {alias}: {a['n'] - len(a['missed'])} of {a['n']} hit (misses allowed: {a['allowed']})"
            )
    return lines


def _agreement_text(a: Mapping[str, Any]) -> str:
    if a.get("alpha") is None:
        return f"every score the same on {a.get('n_items')} answers" + (" (identical)" if a.get("identical") else "")
    low, high = a.get("interval") or (None, None)
    interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    icc = f", ICC(2,1) {a['icc']:.2f}" if a.get("icc") is not None else ""
    return f"Krippendorff's alpha {a['alpha']:.2f}{interval} on {a['n_items']} answers{icc}"


@dataclass(frozen=True, eq=False)
class JudgeCallSpec:
    """One rating a judge makes of known answers: of ``item`` (an answer; ``draw`` 1 for its
    retest) or of ``anchor``; ``messages`` and ``rubric`` build its re-asks
    (:func:`~pytest_llmbias.scoring.judge.reask_messages`)."""

    judge: ModelSpec
    call: Any
    messages: list[dict[str, str]]
    rubric: Rubric
    item: Any = None
    anchor: Anchor | None = None
    draw: int = 0


def judge_call_plan(settings: Any, domain: Domain, items: Sequence[Any]) -> list[JudgeCallSpec]:
    """Every first rating the judges of ``settings`` make of ``items`` (:class:`JudgeItem`, answers
    already known) on ``domain``: each answer, the retest sample's second draws, and the anchors —
    the calls a run makes before any re-ask (for writing a snapshot of known ratings)."""
    from pytest_llmbias.scoring.judge_calls import RETEST_DRAW, judge_call, rating_messages

    rubric, anchors = panel_rubric(settings, domain)
    again = retest_labels(settings, [(i.alias, i.label) for i in items])
    out = []
    for judge in settings.panel:
        for anchor in anchors:
            messages = rating_messages(judge, domain.focus, anchor.question, anchor.answer, rubric)
            call = judge_call(judge, messages, rubric)
            out.append(JudgeCallSpec(judge, call, messages, rubric, anchor=anchor))
        for item in items:
            messages = rating_messages(judge, domain.focus, item.question, item.response, rubric)
            for draw in (0, RETEST_DRAW) if item.label in again else (0,):
                call = judge_call(judge, messages, rubric, draw)
                out.append(JudgeCallSpec(judge, call, messages, rubric, item=item, draw=draw))
    return out


def trust_summary(trust: Mapping[str, Any]) -> str:
    """The judges' trust in a few words for the summary row: their agreement (two or more), the
    lowest test-retest alpha, and the anchors hit."""
    if not trust:
        return ""
    parts = []
    between = trust.get("agreement")
    if between and between.get("alpha") is not None:
        parts.append(f"judges α {between['alpha']:.2f}")
    alphas = [r["alpha"] for r in trust.get("retest", {}).values() if r.get("alpha") is not None]
    identical = [r for r in trust.get("retest", {}).values() if r.get("alpha") is None and r.get("identical")]
    if alphas:
        parts.append(f"retest α {min(alphas):.2f}" + (" (lowest)" if len(alphas) > 1 else ""))
    elif identical:
        parts.append("retest identical")
    anchors = list(trust.get("anchors", {}).values())
    if anchors and anchors[0]["n"]:
        hit = min(a["n"] - len(a["missed"]) for a in anchors)
        parts.append(f"anchors {hit}/{anchors[0]['n']}")
    return ", ".join(parts)
