"""``bias_impact_ratio``: the four-fifths rule over a domain's counterfactual prompts.

Source: the SAGED paper ("SAGED: A Holistic Bias-Benchmarking Pipeline for Language Models"), §2.3 (counterfactual
prompts), §3.2 (feature extraction), §3.3 (baseline
calibration by subtraction), §4 (selection rates, min impact ratio, max Z, Dixon Q) and appendix
A.4 (standards and selection methods).

Every answer of every model to every counterfactual prompt gets one feature value (TextBlob
sentiment by default). Values may be calibrated by subtraction: against the feature of the prompt's
reference text (the paper's baseline calibration), or against the mean feature of the baseline
models' answers to the same prompt (this plugin's addition: what the peers say about the same
concept cancels contextual and tool bias). The values are grouped by concept (or by concept group)
and :func:`pytest_llmbias.stats.impact_ratio` gives each group's selection rate and the minimum
impact ratio. The gate fails when the target's minimum impact ratio is below the threshold (0.8,
the four-fifths rule) and a permutation test shows it (``fail_on``: or on the point estimate, or on
the whole stratified-bootstrap interval). The baselines' ratios are reported beside the target's;
with ``calibrate="baselines"`` each baseline is calibrated against the other baselines."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmbias.choices import Alternative, Calibration, FailOn, GroupBy
from pytest_llmbias.engine.base import SpecGate
from pytest_llmbias.errors import ConfigError, StatisticsError
from pytest_llmbias.gates.impact_ratio.release import DEFAULT_MARGIN
from pytest_llmbias.gates.impact_ratio.result import MARKER, ImpactRatioGateResult
from pytest_llmbias.gates.impact_ratio.spec import ImpactRatioSpec
from pytest_llmbias.gates.impact_ratio.statistics import calibrate, evaluate_gate
from pytest_llmbias.planning.request import ResponseRequest
from pytest_llmbias.report.frames import Table

if TYPE_CHECKING:
    from pytest_llmbias.domains.domain import Question
    from pytest_llmbias.engine.protocol import GateSession
    from pytest_llmbias.report.plots import Figure


def evaluate_impact_ratio(
    values: Mapping[str, Mapping[str, Sequence[float] | float]],
    groups: Mapping[str, str],
    *,
    target: str,
    baselines: Sequence[str] = (),
    references: Mapping[str, float] | None = None,
    spec: ImpactRatioSpec | None = None,
    domain: str = "values",
    release: str | None = None,
    text: Callable[[str, str], str | None] | None = None,
    **options: Any,
) -> ImpactRatioGateResult:
    """The ``bias_impact_ratio`` verdict on feature values a team already has (the marker calls
    this too).

    ``values`` maps each alias to prompt id -> a list of per-sample feature values (or one value);
    ``groups`` maps each prompt id to its group (a concept, or a group of concepts). ``options``
    are the marker's keyword arguments with the same defaults and checks: ``threshold``,
    ``fail_on``, ``alpha``, ``calibrate`` (``"baselines"``, or ``"reference"`` with ``references``:
    prompt id -> the feature of its reference text), ``standard``, ``method``, ``quantile``,
    ``within``, ``confidence``, ``resamples``, ``min_responses``.

    The four-fifths rule (the SAGED paper, §4): fails when the target's minimum impact ratio is
    below the threshold and, by default, a permutation test of the group labels rejects H0 "the
    group makes no difference to the values" at ``alpha``. Raises :class:`ConfigError` for a bad
    option and :class:`StatisticsError` when the data cannot give a verdict. The marker passes its
    parsed ``spec`` instead of the options, and the ``domain`` to name.

    ``release``: the alias of a recorded release in ``values``, answers paired with the target's by
    prompt and sample; the gate then also fails when the target's min impact ratio is below the
    release's by more than ``margin`` (0.05) and a permutation test of the group × model
    interaction is significant at ``alpha`` (``alternative="equivalent"``: a move either way).
    ``calibrate="baselines"`` then calibrates against the other ``baselines`` only.
    """
    marker = "evaluate_impact_ratio"
    if spec is None:
        for key in ("feature", "group_by", "categories", "samples"):
            if key in options:
                raise ConfigError(
                    f"{marker}: {key!r} is not an option here; options: threshold, fail_on, alpha, calibrate, "
                    "standard, method, quantile, within, confidence, resamples, min_responses"
                )
        spec = ImpactRatioSpec.parse(("values",), options, marker=marker)
    elif options:
        raise ConfigError(f"{marker}: give the options or a parsed spec, not both")
    baselines = tuple(dict.fromkeys((*((release,) if release else ()), *baselines)))
    context = tuple(b for b in baselines if b != release)
    if release is not None and spec.calibrate == Calibration.BASELINES and not context:
        raise StatisticsError(
            f"{marker}: calibrate='baselines' against a release needs configured baselines beside "
            "it to calibrate both against"
        )
    raw: dict[str, dict[tuple[str, int], float]] = {}
    for alias in (target, *baselines):
        if alias not in values:
            raise StatisticsError(f"{marker}: no values for {alias!r}; values has {', '.join(map(repr, values))}")
        raw[alias] = {}
        for prompt, v in values[alias].items():
            if prompt not in groups:
                raise StatisticsError(f"{marker}: prompt {prompt!r} of {alias!r} has no group in 'groups'")
            for sample, x in enumerate([v] if not isinstance(v, Sequence) else v):
                raw[alias][(prompt, sample)] = float(x)
    calibrated = calibrate(raw, spec.calibrate, baselines=context if release else baselines, references=references)
    samples = max((s + 1 for per in raw.values() for _, s in per), default=0)
    asked = {p for p, _ in raw[target]}
    return evaluate_gate(
        spec,
        calibrated,
        {q: g for q, g in groups.items() if q in asked},
        domain=domain,
        target=target,
        baselines=baselines,
        samples=samples,
        release=release,
        text=text,
    )


def group_of(question: Question, group_by: str) -> str:
    """The group a counterfactual prompt belongs to: its concept, or its concept group."""
    value = question.concept if group_by == GroupBy.CONCEPT else question.group
    return value if value is not None else "-"


class ImpactRatioGate(SpecGate):
    """The ``bias_impact_ratio`` gate (see the module docstring)."""

    marker = MARKER
    #: compares the target with a recorded release under --llmbias-against
    compares_releases = True
    spec = ImpactRatioSpec

    def figures(self, entry: Mapping[str, Any]) -> list[Figure]:
        """Selection rates per group of each model against the four-fifths line of the target, and
        each group's impact ratio (its rate over the model's highest) against the threshold."""
        from pytest_llmbias.report import plots

        result, table = entry["result"], Table.from_dict(entry["table"])
        target, threshold = result["target"]["alias"], float(result["threshold"])
        rates = {
            m: dict(zip(plots.by_model(table, "group")[m], v, strict=True))
            for m, v in plots.by_model(table, "selection_rate").items()
        }
        if not rates:
            return []
        groups = list(dict.fromkeys(g for per in rates.values() for g in per))
        top = max((r for r in rates.get(target, {}).values() if r is not None), default=None)
        ratios = {
            m: [(v / best) if (v := per.get(g)) is not None and best else None for g in groups]
            for m, per in rates.items()
            for best in [max((r for r in per.values() if r is not None), default=0.0)]
        }
        return [
            plots.grouped_bars(
                "selection rate per group",
                groups,
                {m: [per.get(g) for g in groups] for m, per in rates.items()},
                target=target,
                ylabel="selection rate",
                line=None if top is None else threshold * top,
                line_label=f"{threshold:g} × the target's highest rate",
            ),
            plots.grouped_bars(
                "impact ratio per group (rate ÷ the model's highest)",
                groups,
                ratios,
                target=target,
                ylabel="impact ratio",
                line=threshold,
                line_label=f"threshold {threshold:g}",
            ),
        ]

    def _request(self, spec: ImpactRatioSpec, session: GateSession) -> ResponseRequest:
        """Check the gate against the roster, the domain and the features; the responses it needs
        (the target's, and the baselines' when there are any)."""
        settings = session.settings
        against = bool(settings.release.against)
        if not against and (spec.margin != DEFAULT_MARGIN or spec.alternative != Alternative.NO_WORSE):
            raise ConfigError(
                f"@pytest.mark.{MARKER}: 'margin' and 'alternative' apply against a recorded release "
                "(--llmbias-against); without one the gate is the four-fifths rule on the target"
            )
        settings.require_roster(min_baselines=int(against) + (spec.calibrate == Calibration.BASELINES))
        from pytest_llmbias.errors import FeatureError

        try:
            session.features.get(spec.feature)
        except FeatureError as exc:  # an unknown name: the message lists the known ones
            raise ConfigError(str(exc)) from None
        domain = session.domain(spec.domain)
        prompts = domain.counterfactual_prompts(spec.categories)
        if not prompts:
            raise ConfigError(
                f"domain {domain.name!r} has no counterfactual prompts"
                + (f" in categories {', '.join(spec.categories)}" if spec.categories else "")
                + ": bias_impact_ratio needs a 'counterfactual' section (templates or branches over concepts)"
            )
        groups = {group_of(q, spec.group_by) for q in prompts}
        if len(groups) < 2:
            raise ConfigError(
                f"domain {domain.name!r} has a single {spec.group_by} ({next(iter(groups))!r}) among its "
                f"counterfactual prompts; group_by={str(spec.group_by)!r} needs at least two to compare"
            )
        return spec.responses("all" if settings.baselines else "target")

    def at_level(self, spec: ImpactRatioSpec, alpha: float) -> ImpactRatioSpec | None:
        """The permutation test's ``alpha``, or the interval's ``confidence``; the point estimate's
        rule has no level."""
        if spec.fail_on == FailOn.SIGNIFICANT:
            return dataclasses.replace(spec, alpha=alpha)
        if spec.fail_on == FailOn.INTERVAL:
            return dataclasses.replace(spec, confidence=1 - alpha)
        return None

    def plan(self, spec: ImpactRatioSpec, session: GateSession) -> None:
        session.plan(self._request(spec, session))

    def evaluate(self, spec: ImpactRatioSpec, session: GateSession) -> ImpactRatioGateResult:
        """Extract, calibrate, group and test."""
        from pytest_llmbias.errors import FeatureError

        responses = session.responses(self._request(spec, session))
        target = responses.target
        assert target is not None
        prompts = [q for q in responses.questions if q.concept is not None]
        extractor = session.features.get(spec.feature)
        needs_reference = bool(getattr(extractor, "needs_reference", False))
        if needs_reference or spec.calibrate == Calibration.REFERENCE:
            lacking = [q.id for q in prompts if not q.reference]
            if lacking:
                why = f"feature {spec.feature!r}" if needs_reference else "calibrate='reference'"
                raise FeatureError(
                    f"{why} needs a reference text for every prompt, and {len(lacking)} prompt(s) of domain "
                    f"{spec.domain!r} have none (e.g. {', '.join(lacking[:3])}): add 'reference' to their "
                    "templates or branches in the domain file"
                )
        keys = [(a, q, s) for a in responses.aliases for q in prompts for s in range(responses.samples)]
        texts = [responses.text(a, q.id, s) for a, q, s in keys]
        refs = [q.reference for _, q, _ in keys] if needs_reference else None
        feature_values = session.feature_values(spec.feature, texts, refs)
        values: dict[str, dict[str, list[float]]] = {}
        for (a, q, _), v in zip(keys, feature_values, strict=True):
            values.setdefault(a, {}).setdefault(q.id, []).append(v)
        references = None
        if spec.calibrate == Calibration.REFERENCE:
            ref_texts = [q.reference or "" for q in prompts]
            ref_values = session.feature_values(spec.feature, ref_texts, ref_texts if needs_reference else None)
            references = {q.id: v for q, v in zip(prompts, ref_values, strict=True)}
        release = responses.baselines[0] if session.settings.release.against else None
        result = evaluate_impact_ratio(
            values,
            {q.id: group_of(q, spec.group_by) for q in prompts},
            target=target,
            baselines=responses.baselines,
            references=references,
            spec=spec,
            domain=responses.domain.name,
            release=release,
            text=lambda alias, prompt: responses.text(alias, prompt, 0),
        )
        return dataclasses.replace(result, strict=session.settings.suite.strict)


GATE = ImpactRatioGate()
