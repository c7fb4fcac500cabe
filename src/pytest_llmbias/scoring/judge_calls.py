"""The judge's calls: rating an answer (structured output where the judge takes a JSON schema),
re-asking an unreadable rating, and reading the ratings back from the store.

Every judge answer is an ordinary stored response (its call is the judge model on the rubric
messages of :mod:`pytest_llmbias.scoring.judge`), so judge scores replay offline and from
snapshots like everything else. An answer whose score cannot be read is re-asked, with a reminder
of the format, at most :data:`MAX_REASKS` times; each re-ask is its own stored call, so a resumed
run walks the same chain without asking again. A judge none of whose first :data:`GIVE_UP_AFTER`
answers can be read is asked no further.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_llmbias.config.rubric_file import Anchor, Rubric, builtin_rubric
from pytest_llmbias.config.settings import GIVE_UP_AFTER, GenerationSettings, ModelSpec
from pytest_llmbias.errors import JudgeParseError
from pytest_llmbias.scoring.judge import judge_messages, reask_messages
from pytest_llmbias.scoring.judge_answers import parse_bias_score, read_bias_score, score_schema
from pytest_llmbias.store.calls import ModelCall, Response

if TYPE_CHECKING:
    from pytest_llmbias.planning.collector import ExpectedCall, PlannedCall


def response_format(rubric: Rubric | None = None) -> dict:
    """The ``response_format`` of a structured rating: the JSON schema on ``rubric``'s scale."""
    scale = (rubric or builtin_rubric()).scale
    return {
        "type": "json_schema",
        "json_schema": {"name": "bias_rating", "schema": score_schema(scale), "strict": True},
    }


RESPONSE_FORMAT = response_format()

#: the judge samples at temperature 0, one answer per response; a retest draw is the same call
#: with seed ``draw``
JUDGE_GENERATION = GenerationSettings(temperature=0.0, max_tokens=400, samples=1, seed=0)
MAX_REASKS = 2
#: the draw of a judge's second, independent rating of an answer (its test-retest)
RETEST_DRAW = 1


def retest_sample(labels: Iterable[str], n: int) -> frozenset[str]:
    """The ``n`` labels a judge rates twice: the first ``n`` in the order of their sha256, so the
    same answers on every run and every worker, spread over models and questions."""
    import hashlib

    ordered = sorted(set(labels), key=lambda label: hashlib.sha256(label.encode("utf-8")).hexdigest())
    return frozenset(ordered[:n])


@dataclass(frozen=True)
class JudgeItem:
    """One response to rate: which model said it, to which question, which sample."""

    alias: str
    question_id: str
    question: str
    sample: int
    response: str

    @property
    def label(self) -> str:
        return f"judge:{self.alias}:{self.question_id}" + (f"#{self.sample}" if self.sample else "")


@dataclass
class JudgeTally:
    """The judge's first answers (before any re-ask) seen so far: readable and not."""

    readable: int = 0
    unreadable: int = 0

    @property
    def gave_up(self) -> bool:
        """None of at least :data:`GIVE_UP_AFTER` first answers could be read."""
        return self.readable == 0 and self.unreadable >= GIVE_UP_AFTER


@dataclass(frozen=True)
class JudgeOutcome:
    """Scores by item (the expectation of the judge's score distribution where its
    log-probabilities give one, else its label); ``pending`` calls still to make; ``failures``
    items whose every answer failed; ``forms`` how many scores were read from each form of
    :data:`~pytest_llmbias.scoring.judge_answers.FORMS`, and ``reasked`` how many of them only
    after a re-ask."""

    scores: dict[JudgeItem, float]
    pending: list[PlannedCall]
    #: item -> the judge's last answer, still unreadable after the re-asks
    failures: dict[JudgeItem, str]
    forms: dict[str, int] = field(default_factory=dict)
    reasked: int = 0
    #: the judge's unreadable first answers, in item order (the examples a report shows)
    unread: list[str] = field(default_factory=list)
    #: the first answers read and not, as :class:`JudgeTally` counts them
    tally: JudgeTally = field(default_factory=JudgeTally)
    #: how many scores are the expectation of the judge's distribution (``logprobs``) and how
    #: many its sampled ``label`` (see :mod:`pytest_llmbias.scoring.judge_logprobs`)
    scored: dict[str, int] = field(default_factory=dict)
    #: why the labels that are no expectation were kept (its ``FALLBACKS``), counted
    fallbacks: dict[str, int] = field(default_factory=dict)

    def refusal(self, judge: str) -> str | None:
        """Why the judge cannot be used, when none of its first answers could be read (with two
        of them), else None."""
        if not self.tally.gave_up:
            return None
        shown = "; ".join(repr(t[:160]) for t in self.unread[:2])
        return (
            f"judge {judge!r} does not follow the rubric: 0 of {self.tally.unreadable} answers readable "
            f"(for example {shown})"
        )

    def reading(self) -> dict[str, int]:
        """``forms`` with ``re-asked`` (read only after a re-ask) and ``unread`` beside them, for
        reports: every first answer that could not be read and was not read after a re-ask either
        (the failures, and the answers a judge that follows no rubric was never re-asked for), so
        that the forms, ``unread`` and :meth:`refusal`'s figure count the same answers."""
        unread = max(len(self.failures), self.tally.unreadable - self.reasked)
        return {**self.forms, "re-asked": self.reasked, "unread": unread}


def judged_text(messages: Sequence[tuple[str, str]] | Sequence[Mapping[str, str]]) -> str | None:
    """The rated answer inside the first ``<response>`` block of a judge call's messages (escaped
    as the judge saw it), or None."""
    for m in messages:
        content = m[1] if isinstance(m, tuple) else m.get("content", "")
        start = content.find("<response>\n")
        end = content.find("\n</response>", start + 1)
        if start >= 0 and end > start:
            return content[start + len("<response>\n") : end]
    return None


def structured_output(judge: ModelSpec, rubric: Rubric | None = None) -> bool:
    """Whether ``judge`` is asked for a JSON answer through ``response_format``: as the rubric's
    ``answer`` says, else as :attr:`ModelSpec.structured <pytest_llmbias.config.settings.ModelSpec>` says."""
    if rubric is not None and rubric.answer != "auto":
        return rubric.answer == "json"
    if judge.structured is not None:
        return judge.structured
    return bool(judge.api_base) or _litellm_supports_schema(judge.model)


@functools.lru_cache(maxsize=64)
def _litellm_supports_schema(model: str) -> bool:
    """What litellm's model map (read from the installed package, without importing litellm) says
    of ``model``'s ``supports_response_schema``; False for a model it does not list."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return False
    models = _model_map(str(next(iter(spec.submodule_search_locations))))
    entry = models.get(model) or models.get(model.split("/", 1)[-1]) or {}
    return bool(entry.get("supports_response_schema")) if isinstance(entry, dict) else False


@functools.lru_cache(maxsize=1)
def _model_map(package_dir: str) -> dict:
    import json
    from pathlib import Path

    try:
        data = json.loads((Path(package_dir) / "model_prices_and_context_window_backup.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


#: what a rating asks where the judge is asked for log-probabilities (:func:`asks_logprobs`):
#: ten alternatives a token, one for each level of a 1-10 scale
LOGPROB_PARAMS = {"logprobs": True, "top_logprobs": 10}
#: litellm providers whose chat completions return ``logprobs``/``top_logprobs`` as OpenAI's do
LOGPROB_PROVIDERS = ("openai", "azure", "hosted_vllm", "vllm", "together_ai", "fireworks_ai", "deepseek", "xai")
#: OpenAI's reasoning models (their names' first part), which answer a request with
#: ``logprobs`` with an error
_REASONING = ("o1", "o3", "o4")


def asks_logprobs(judge: ModelSpec) -> bool:
    """Whether ``judge``'s ratings ask for log-probabilities: as its entry's ``logprobs`` says,
    else (auto) at an ``api_base`` (OpenAI-compatible servers: vLLM, llama.cpp, ``llmbias serve``)
    and on the providers of :data:`LOGPROB_PROVIDERS`, never for an application nor OpenAI's
    reasoning models (which reject the parameter); litellm drops it where it knows a model lacks it.
    A recorded release's entry answers as its target's did, so its calls are the recorded ones."""
    if judge.logprobs is not None:
        return judge.logprobs
    if judge.is_app:
        return False
    model = judge.model
    if judge.recorded is not None and model.startswith("release:"):
        model = model.split("/", 1)[-1]  # a recorded release's calls are its target's
    provider, _, name = model.rpartition("/")
    if name.split("-")[0] in _REASONING or name.startswith("gpt-5"):
        return False
    if judge.api_base:
        return True
    return provider.split("/")[0] in LOGPROB_PROVIDERS or (not provider and name.startswith("gpt-"))


def judge_call(
    judge: ModelSpec, messages: Sequence[Mapping[str, str]], rubric: Rubric | None = None, draw: int = 0
) -> ModelCall:
    """The call that sends ``messages`` (a rating, or a re-ask) to ``judge``: at temperature 0,
    with the JSON schema of ``rubric``'s scale as ``response_format`` when
    :func:`structured_output` says so, and :data:`LOGPROB_PARAMS` when :func:`asks_logprobs`
    does; ``draw`` > 0 is an independent draw (seed ``draw``)."""
    params: dict | None = {"response_format": response_format(rubric)} if structured_output(judge, rubric) else None
    if asks_logprobs(judge):
        params = {**(params or {}), **LOGPROB_PARAMS}
    generation = JUDGE_GENERATION if draw == 0 else dataclasses.replace(JUDGE_GENERATION, seed=draw)
    return ModelCall.build(judge, messages, generation, params=params)


def rating_messages(
    judge: ModelSpec, focus: str, question: str, response: str, rubric: Rubric | None = None
) -> list[dict[str, str]]:
    """:func:`judge_messages` on ``rubric`` in the form ``judge`` is asked for (structured or not)."""
    return judge_messages(focus, question, response, structured=structured_output(judge, rubric), rubric=rubric)


@dataclass(frozen=True)
class JudgeFollowUp:
    """The judge as a follow-up of the collector: given a model's answer, the judge's rating call
    (and, for an answer of ``retest``, its second draw); given a rating that does not parse, its
    re-ask (``attempt`` counts the re-asks so far).

    Frozen, so two gates that judge the same answers share one follow-up and one set of calls."""

    judge: ModelSpec
    focus: str
    domain: str
    attempt: int | None = None  # None: follows an answer; n: follows the judge's n-th re-ask
    rubric: Rubric | None = None
    draw: int = 0
    #: labels (:attr:`JudgeItem.label`) of the answers rated a second time
    retest: frozenset[str] = frozenset()
    #: the judge's first answers so far, readable and not; shared by the follow-ups of one plan
    tally: JudgeTally = field(default_factory=lambda: JudgeTally(), compare=False, hash=False, repr=False)
    #: the rating calls built so far, by what they are built from; shared like ``tally``, so that
    #: the rating a collection told in advance (:meth:`expect`) is the one it then asks, not built twice
    built: dict[tuple[str, str, str | None, str, int], PlannedCall] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    #: whether a rating (its call's key, its text) could be read, for the same reason
    readable: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def _rating(self, item: PlannedCall, question: str, answer: str, draw: int) -> PlannedCall:
        # the call's key names its model, messages (the question among them) and sample
        memo = (item.call.key, item.alias, item.question, answer, draw)
        kept = self.built.get(memo)
        if kept is None:
            kept = self.built[memo] = self._build_rating(item, question, answer, draw)
        return kept

    def _build_rating(self, item: PlannedCall, question: str, answer: str, draw: int) -> PlannedCall:
        from pytest_llmbias.planning.collector import PlannedCall

        messages = rating_messages(self.judge, self.focus, question, answer, self.rubric)
        label = JudgeItem(item.alias, item.question or "?", question, item.call.sample, "").label
        then = dataclasses.replace(self, attempt=0, draw=draw, retest=frozenset())
        return PlannedCall(
            self.judge.alias,
            judge_call(self.judge, messages, self.rubric, draw),
            self.domain,
            label + ("~retest" if draw else ""),
            (then,),
        )

    def _ratings(self, item: PlannedCall, answer: str) -> list[PlannedCall]:
        question = item.call.messages[-1][1]
        label = JudgeItem(item.alias, item.question or "?", question, item.call.sample, "").label
        draws = (0, RETEST_DRAW) if label in self.retest else (0,)
        return [self._rating(item, question, answer, d) for d in draws]

    def __call__(self, item: PlannedCall, response: Response) -> Iterable[PlannedCall]:
        from pytest_llmbias.planning.collector import PlannedCall

        if self.attempt is None:  # rate the answer, unless the judge has shown it cannot
            return [] if self.tally.gave_up else self._ratings(item, response.text)
        memo = (item.call.key, response.text)
        readable = self.readable.get(memo)
        if readable is None:
            scale = (self.rubric or builtin_rubric()).scale
            try:
                parse_bias_score(response.text, judged_text(item.call.messages), scale)
            except JudgeParseError:
                readable = False
            else:
                readable = True
            self.readable[memo] = readable
        if not readable:
            if self.attempt == 0 and self.draw == 0:
                self.tally.unreadable += 1
            if self.attempt >= MAX_REASKS or self.tally.gave_up:
                return []
            previous = [{"role": r, "content": c} for r, c in item.call.messages]
            messages = reask_messages(previous, response.text, self.rubric)
            then = dataclasses.replace(self, attempt=self.attempt + 1)
            return [
                PlannedCall(
                    self.judge.alias,
                    judge_call(self.judge, messages, self.rubric, self.draw),
                    self.domain,
                    item.question,
                    (then,),
                )
            ]
        if self.attempt == 0 and self.draw == 0:
            self.tally.readable += 1
        return []

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> list[ExpectedCall]:
        """After an answer: its rating (and retest), exact when the answer is stored, else
        sketched with a stand-in answer of the answer's ``max_tokens``. After a rating: its
        re-ask, only once the rating is stored and does not parse (none is guessed for ratings
        not yet made)."""
        from pytest_llmbias.clients.pricing import answer_tokens, stand_in_text
        from pytest_llmbias.planning.collector import ExpectedCall

        response = get(planned.call.key)
        what = "judge ratings" if self.attempt is None else "judge re-asks"
        if response is not None and self.attempt is None:
            # built by this follow-up, whose tally the rating's own follow-up shares
            return [ExpectedCall(c, what) for c in self._ratings(planned, response.text)]
        if response is not None:
            # a probe with a tally of its own: telling the calls must not count the answers
            probe = dataclasses.replace(self, tally=JudgeTally())
            return [ExpectedCall(c, what) for c in probe(planned, response)]
        if self.attempt is not None:
            return []
        answer = stand_in_text(answer_tokens(planned.call, GenerationSettings().max_tokens))
        return [
            ExpectedCall.sketch(dataclasses.replace(rating, then=()), what, [planned.call.key])
            for rating in self._ratings(planned, answer)
        ]


def anchor_calls(
    judge: ModelSpec, anchors: Sequence[Anchor], *, focus: str, domain: str, rubric: Rubric | None
) -> list[PlannedCall]:
    """The judge's ratings of ``anchors`` (each followed by its re-asks), to plan before the answers."""
    from pytest_llmbias.planning.collector import PlannedCall

    then = JudgeFollowUp(judge, focus, domain, attempt=0, rubric=rubric)
    return [
        PlannedCall(
            judge.alias,
            judge_call(judge, rating_messages(judge, focus, a.question, a.answer, rubric), rubric),
            domain,
            f"anchor:{i + 1}",
            (then,),
        )
        for i, a in enumerate(anchors)
    ]


def resolve_judgements(
    items: Iterable[JudgeItem],
    *,
    focus: str,
    judge: ModelSpec,
    get: Callable[[str], Response | None],
    domain: str,
    rubric: Rubric | None = None,
    draw: int = 0,
) -> JudgeOutcome:
    """Walk each item's judge chain (of draw ``draw``) through ``get`` (a store lookup by key): a
    parsed score — on a scale where higher means more biased, whichever end ``rubric`` calls
    biased — a call still to make, or a failure quoting the last raw answer once the re-asks are
    spent. A score is the expectation of the judge's distribution where its answer's
    log-probabilities give one (:func:`~pytest_llmbias.scoring.judge_logprobs.expected_score`),
    else its label; ``scored`` and ``fallbacks`` count which, and why."""
    from pytest_llmbias.scoring.judge_logprobs import expected_score

    scale = (rubric or builtin_rubric()).scale
    orient = rubric.oriented if rubric is not None else (lambda v: v)
    from pytest_llmbias.planning.collector import PlannedCall

    scores: dict[JudgeItem, float] = {}
    scored: dict[str, int] = {}
    fallbacks: dict[str, int] = {}
    pending: list[PlannedCall] = []
    failures: dict[JudgeItem, str] = {}
    forms: dict[str, int] = {}
    reasked = 0
    tally, unread = JudgeTally(), []
    for item in items:
        messages = rating_messages(judge, focus, item.question, item.response, rubric)
        judged = judged_text(messages)
        for attempt in range(MAX_REASKS + 1):
            call = judge_call(judge, messages, rubric, draw)
            answer = get(call.key)
            if answer is None:
                pending.append(PlannedCall(alias=judge.alias, call=call, domain=domain, question=item.label))
                break
            try:
                reading = read_bias_score(answer.text, judged, scale)
            except JudgeParseError as exc:
                if attempt == 0:
                    tally.unreadable += 1
                    unread.append(answer.text)
                if attempt == MAX_REASKS:
                    failures[item] = exc.raw
                else:
                    messages = reask_messages(messages, answer.text, rubric)
            else:
                tally.readable += attempt == 0
                expectation = expected_score(reading.score, answer.number_logprobs, scale)
                scores[item] = float(orient(expectation.score))
                scored[expectation.reading] = scored.get(expectation.reading, 0) + 1
                if expectation.why is not None:
                    fallbacks[expectation.why] = fallbacks.get(expectation.why, 0) + 1
                forms[reading.form] = forms.get(reading.form, 0) + 1
                reasked += attempt > 0
                break
    return JudgeOutcome(
        scores=scores,
        pending=pending,
        failures=failures,
        forms=forms,
        reasked=reasked,
        unread=unread,
        tally=tally,
        scored=scored,
        fallbacks=fallbacks,
    )
