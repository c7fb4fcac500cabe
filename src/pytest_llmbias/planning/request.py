"""The one builder of model calls: a :class:`ResponseRequest` names (domain, models, questions,
samples), and the same request gives the calls to plan, the keys to read back, and the wording of
the error when some of them are missing.

Planning (:func:`plan_calls`), reading (:func:`read_responses`) and the judge (which rates exactly
the answers a request read) all go through :func:`grid`, so a call is built one way only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmbias import markers
from pytest_llmbias.choices import ModelSelection
from pytest_llmbias.config.settings import ModelSpec, Settings
from pytest_llmbias.domains.domain import Domain, Question
from pytest_llmbias.errors import ConfigError, MissingResponsesError
from pytest_llmbias.planning.collector import FollowUp, PlannedCall
from pytest_llmbias.planning.response_set import ResponseSet
from pytest_llmbias.store.calls import ModelCall, Response, construct
from pytest_llmbias.store.kept import IdentityCache


@dataclass(frozen=True)
class ResponseRequest:
    """Ask ``domain``'s prompts (those of ``categories``, or all) of ``models``, ``samples`` times
    each (``None``: ``generation.samples``). ``models`` is ``"all"``, ``"target"``, ``"baselines"``
    or a tuple of aliases. This is also the spec of the ``bias_responses`` marker."""

    domain: str
    models: str | tuple[str, ...] = "all"
    categories: tuple[str, ...] | None = None
    samples: int | None = None

    @classmethod
    def parse(cls, args: tuple[Any, ...], kwargs: Mapping[str, Any], marker: str = "bias_responses") -> ResponseRequest:
        """The spec of a ``bias_responses`` marker's arguments; ConfigError naming the accepted ones."""
        bound = markers.bind(marker, args, kwargs, ("domain", "models", "categories", "samples"))
        models = bound.get("models", "all")
        if isinstance(models, str):
            if models not in ModelSelection.values():
                raise ConfigError(
                    f"@pytest.mark.{marker}: 'models' must be one of {', '.join(ModelSelection.values())} "
                    f"or a list of aliases, got {models!r}"
                )
        else:
            models = markers.str_tuple(marker, "models", models)
        return cls(
            domain=bound["domain"],
            models=models,
            categories=markers.str_tuple(marker, "categories", bound.get("categories")),
            samples=markers.positive_int(marker, "samples", bound.get("samples")),
        )


@dataclass(frozen=True)
class GridCell:
    """One call of a request: which model, which prompt, which sample, and the call itself."""

    model: ModelSpec
    question: Question
    sample: int
    call: ModelCall

    def planned(self, domain: str, then: Sequence[FollowUp] = ()) -> PlannedCall:
        fields = {"alias": self.model.alias, "call": self.call, "domain": domain, "question": self.question.id}
        fields["then"] = tuple(then)
        return construct(PlannedCall, fields)


def select_models(settings: Settings, models: str | tuple[str, ...]) -> tuple[ModelSpec, ...]:
    """The model specs a ``models`` argument names; the roster must provide them."""
    if models == ModelSelection.TARGET:
        settings.require_roster(min_baselines=0)
        assert settings.target is not None
        return (settings.target,)
    if models == ModelSelection.BASELINES:
        settings.require_roster(min_baselines=1)
        return settings.baselines
    if models == ModelSelection.COMPARED:
        settings.require_roster(min_baselines=1)
        assert settings.target is not None
        return (settings.target, *settings.comparators)
    if models == ModelSelection.ALL:
        settings.require_roster(min_baselines=1)
        return settings.roster
    return tuple(settings.model(alias) for alias in models)


#: the cells of the requests built lately, by request and the identity of its settings and domain
#: (kept with them, so an id is never taken for another object's): a run plans a request and reads
#: it back, and gates share requests
_GRIDS: IdentityCache[tuple[GridCell, ...]] = IdentityCache(64, oldest_first=True)


def grid(request: ResponseRequest, settings: Settings, domain: Domain) -> tuple[GridCell, ...]:
    """Every (model, prompt, sample) call of ``request``, models in roster order, then prompts in
    domain order, then samples; the same cells (and calls) each time it is asked with the same
    settings and domain. Raises :class:`ConfigError` when the selection is empty or names an
    unknown model or category."""
    key = (request, id(settings), id(domain))
    cells = _GRIDS.get(key, settings, domain)
    if cells is None:
        cells = _GRIDS.put(key, tuple(_cells(request, settings, domain)), settings, domain)
    return cells


def release_grids() -> None:
    """Forget the cells of every request :func:`grid` kept (see
    :func:`~pytest_llmbias.store.calls.release_built`): a request asked afterwards gets new cells,
    with the same calls' keys."""
    _GRIDS.clear()


def _cells(request: ResponseRequest, settings: Settings, domain: Domain) -> Iterator[GridCell]:
    questions = domain.select(request.categories)
    if not questions:
        raise ConfigError(f"domain {domain.name!r} has no questions for categories {request.categories}")
    samples = request.samples or settings.generation.samples
    models = select_models(settings, request.models)
    check_size(request, settings, len(models), len(questions), samples)
    build, generation, new = ModelCall.build, settings.generation, object.__new__
    for model in models:
        for q in questions:
            for s in range(samples):
                cell = new(GridCell)  # as construct() does, inline: once a call of a plan
                vars(cell).update(model=model, question=q, sample=s, call=build(model, q.text, generation, sample=s))
                yield cell


def check_size(request: ResponseRequest, settings: Settings, models: int, questions: int, samples: int) -> None:
    """:func:`check_plan_size` for ``request``: ``models`` x ``questions`` x ``samples`` (from the
    marker's ``samples=`` or ``generation.samples``)."""
    source = "the marker's samples=" if request.samples else "generation.samples"
    check_plan_size(
        f"domain {request.domain!r}",
        settings,
        (("model(s)", models), ("question(s)", questions), (f"sample(s) from {source}", samples)),
    )


def check_plan_size(what: str, settings: Settings, factors: Sequence[tuple[str, int]]) -> None:
    """Raise :class:`ConfigError` when the calls of ``what`` (the product of ``factors``, each a
    label and a count) exceed ``collection.max_calls``, counted before a call is built: a plan of a
    billion samples is refused at once instead of filling the memory. The error gives the figure,
    each factor and where it comes from, and ``--llmbias-plan``."""
    calls = 1
    for _, count in factors:
        calls *= count
    bound = settings.collection.max_calls
    if calls <= bound:
        return
    product = " x ".join(f"{count:,} {label}" for label, count in factors)
    raise ConfigError(
        f"{what} would need {calls:,} calls ({product}), more than collection.max_calls ({bound:,}) allows "
        "one request; lower the counts, choose fewer categories or models, or raise collection.max_calls "
        "if you mean it (--llmbias-plan prints what a run would ask and calls nothing)"
    )


def plan_calls(
    request: ResponseRequest, settings: Settings, domain: Domain, then: Sequence[FollowUp] = ()
) -> list[PlannedCall]:
    """The calls to make for ``request``; each carries the follow-ups ``then`` (e.g. the judge)."""
    name, follow, new = domain.name, tuple(then), object.__new__
    planned = []
    for cell in grid(request, settings, domain):
        call = new(PlannedCall)  # what cell.planned(name, then) gives, inline: once a call of a plan
        vars(call).update(alias=cell.model.alias, call=cell.call, domain=name, question=cell.question.id, then=follow)
        planned.append(call)
    return planned


def read_responses(
    request: ResponseRequest,
    settings: Settings,
    domain: Domain,
    get: Callable[[str], Response | None],
    errors: Mapping[str, str],
) -> ResponseSet:
    """The responses of ``request`` through ``get`` (a store lookup by key). Raises
    :class:`MissingResponsesError` naming every model and question without a response; ``errors``
    (call key -> message) says why a call failed."""
    cells = grid(request, settings, domain)
    samples = request.samples or settings.generation.samples
    found: dict[tuple[str, str, int], Response] = {}
    missing: list[tuple[str, str, str]] = []
    for cell in cells:
        response = get(cell.call.key)
        if response is None:
            label = cell.question.id if samples == 1 else f"{cell.question.id}#{cell.sample}"
            missing.append((cell.model.alias, label, cell.call.key))
        else:
            found[(cell.model.alias, cell.question.id, cell.sample)] = response
    if missing:
        raise missing_error(f"response(s) for domain {domain.name!r}", missing, errors, offline=settings.store.offline)
    models = select_models(settings, request.models)
    aliases = tuple(m.alias for m in models)
    target = settings.target.alias if settings.target else None
    return ResponseSet(
        domain=domain,
        questions=domain.select(request.categories),
        aliases=aliases,
        target=target if target in aliases else None,
        baselines=tuple(b.alias for b in settings.baselines if b.alias in aliases),
        samples=samples,
        responses=found,
    )


def read_calls(
    calls: Sequence[tuple[str, str, ModelCall]],
    what: str,
    get: Callable[[str], Response | None],
    errors: Mapping[str, str],
    *,
    offline: bool,
) -> dict[str, Response]:
    """The response of each (alias, label, call) through ``get`` (a store lookup by key), by call
    key. Raises :class:`MissingResponsesError` naming every alias and label without one, in the
    wording of :func:`missing_error`."""
    found: dict[str, Response] = {}
    missing = []
    for alias, label, call in calls:
        response = get(call.key)
        if response is None:
            missing.append((alias, label, call.key))
        else:
            found[call.key] = response
    if missing:
        raise missing_error(what, missing, errors, offline=offline)
    return found


def missing_error(
    what: str, missing: Sequence[tuple[str, str, str]], errors: Mapping[str, str], *, offline: bool, limit: int = 8
) -> MissingResponsesError:
    """The one wording of a missing-data error: how many of ``what`` are missing and why, then per
    alias the labels without a response, then the first distinct errors.

    ``missing`` holds (alias, label, call key); ``errors`` maps a call key to why it failed."""
    failed = {key: errors[key] for _, _, key in missing if key in errors}
    if failed:
        why = f"{len(failed)} call(s) failed"
    else:
        why = (
            "offline mode, and they are neither in the store nor in a snapshot"
            if offline
            else "they were not collected"
        )
    by_alias: dict[str, list[str]] = {}
    for alias, label, _ in missing:
        by_alias.setdefault(alias, []).append(label)
    lines = []
    for alias, labels in by_alias.items():
        shown = ", ".join(labels[:limit]) + (f", ... ({len(labels)} in all)" if len(labels) > limit else "")
        lines.append(f"  {alias}: {shown}")
    distinct = list(dict.fromkeys(failed.values()))
    for message in distinct[:3]:
        lines.append(f"  error: {message}")
    if len(distinct) > 3:
        lines.append(f"  ... and {len(distinct) - 3} other errors")
    return MissingResponsesError(f"{len(missing)} {what} are missing ({why}):\n" + "\n".join(lines))
