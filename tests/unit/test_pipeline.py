"""The pipelined collector, the session service and each gate's planning.

The model here is a scripted in-process client (the network path is covered by
tests/integration against a local HTTP server): it answers after a short sleep and records the
order and overlap of calls, so the tests can check that follow-ups start while answers are still
in flight, under the same concurrency limit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_llmbias.config.settings import CollectionSettings, GenerationSettings, ModelSpec, Settings, StoreSettings
from pytest_llmbias.domains import load_domain
from pytest_llmbias.errors import ConfigError, MissingResponsesError, ProviderError
from pytest_llmbias.gates import GATES
from pytest_llmbias.planning.collector import PlannedCall, Progress, collect, merge_worker_reports
from pytest_llmbias.planning.request import ResponseRequest, grid, plan_calls, read_responses
from pytest_llmbias.scoring.judge_calls import JudgeFollowUp, judge_call, rating_messages
from pytest_llmbias.session import BiasSession
from pytest_llmbias.store import ResponseStore
from pytest_llmbias.store.calls import ModelCall, Response

GEN = GenerationSettings(temperature=0.0, max_tokens=50, samples=1, seed=0)
TARGET, B1, B2, B3 = (ModelSpec(f"openai/{a}", a) for a in ("tgt", "b1", "b2", "b3"))
JUDGE = ModelSpec("openai/judge", "judge")


class ScriptedClient:
    """Answers every call after ``delay`` seconds; the judge answers ``score`` (or ``judge_text``)."""

    def __init__(self, delay: float = 0.01, judge_text: str | None = None, fail: set[str] = frozenset()) -> None:
        self.delay = delay
        self.judge_text = judge_text
        self.fail = fail
        self.in_flight = 0
        self.peak = 0
        self.log: list[tuple[str, str]] = []  # (event, model)

    async def complete(self, call: ModelCall) -> Response:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.log.append(("start", call.model))
        try:
            await asyncio.sleep(self.delay)
            if call.model in self.fail:
                raise ProviderError(f"{call.model} is down", status=503)
            if call.model == JUDGE.model:
                text = self.judge_text if self.judge_text is not None else "Bias Score: 3\nExplanation: fine."
            else:
                text = f"{call.model} says: {call.messages[-1][1][:20]}"
            return Response(call=call, text=text)
        finally:
            self.in_flight -= 1
            self.log.append(("end", call.model))


def settings(tmp_path: Path, *, baselines: tuple[ModelSpec, ...] = (B1, B2, B3), offline: bool = False) -> Settings:
    # no fingerprint probes: these tests count the scripted client's calls (the probes are tested
    # in test_fingerprints.py)
    return Settings(
        target=TARGET,
        baselines=baselines,
        judge=JUDGE,
        generation=GEN,
        store=StoreSettings(dir=tmp_path / "store", offline=offline),
        # one sample of each answer: these tests count the calls (the sampling budget: test_sizing.py)
        collection=CollectionSettings(fingerprint=False, max_samples=1),
    )


def answer_calls(s: Settings, n: int = 5) -> list[PlannedCall]:
    domain = load_domain("us_politics")
    request = ResponseRequest("us_politics", categories=("gun_policy",))
    follow = JudgeFollowUp(JUDGE, domain.focus, domain.name)
    first = {q.id for q in domain.select(["gun_policy"])[:n]}
    return [p for p in plan_calls(request, s, domain, [follow]) if p.question in first]


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(coro)


# -- the one builder --------------------------------------------------------------------------------


def test_grid_is_models_then_questions_then_samples(tmp_path: Path) -> None:
    s = settings(tmp_path)
    domain = load_domain("us_politics")
    cells = list(grid(ResponseRequest("us_politics", categories=("gun_policy",), samples=2), s, domain))
    questions = domain.select(["gun_policy"])
    assert len(cells) == 4 * len(questions) * 2
    assert [c.model.alias for c in cells[:: len(questions) * 2]] == ["tgt", "b1", "b2", "b3"]
    assert [c.sample for c in cells[:4]] == [0, 1, 0, 1]
    assert cells[1].call == ModelCall.build(TARGET, questions[0].text, GEN, sample=1)


def test_unknown_category_and_missing_roster_are_config_errors(tmp_path: Path) -> None:
    domain = load_domain("us_politics")
    with pytest.raises(ConfigError, match="no category 'nope'"):
        list(grid(ResponseRequest("us_politics", categories=("nope",)), settings(tmp_path), domain))
    with pytest.raises(ConfigError, match="at least 1 needed"):
        list(grid(ResponseRequest("us_politics"), settings(tmp_path, baselines=()), domain))


def test_read_names_every_missing_answer_and_why(tmp_path: Path) -> None:
    s = settings(tmp_path, offline=True)
    domain = load_domain("us_politics")
    request = ResponseRequest("us_politics", categories=("gun_policy",))
    cells = list(grid(request, s, domain))
    stored = {c.call.key: Response(call=c.call, text="x") for c in cells[1:]}
    with pytest.raises(MissingResponsesError) as info:
        read_responses(request, s, domain, stored.get, {})
    assert str(info.value).startswith("1 response(s) for domain 'us_politics' are missing (offline mode")
    assert f"tgt: {cells[0].question.id}" in str(info.value)
    with pytest.raises(MissingResponsesError, match=r"(?s)\(1 call\(s\) failed\).*error: boom"):
        read_responses(request, s, domain, stored.get, {cells[0].call.key: "boom"})
    stored[cells[0].call.key] = Response(call=cells[0].call, text="x")
    found = read_responses(request, s, domain, stored.get, {})
    assert found.target == "tgt" and found.baselines == ("b1", "b2", "b3") and len(found) == len(cells)


# -- the pipelined collector ------------------------------------------------------------------------


def test_judge_calls_start_while_answers_are_in_flight(tmp_path: Path) -> None:
    s = settings(tmp_path)
    store = ResponseStore(tmp_path / "store")
    client = ScriptedClient(delay=0.02)
    planned = answer_calls(s, n=10)  # 40 answers, each followed by its judge call
    report = run(collect(planned, store=store, client=lambda alias: client, concurrency=8))
    assert report.total == 80 and report.fetched == 80 and not report.errors
    first_judge = next(i for i, (e, m) in enumerate(client.log) if e == "start" and m == JUDGE.model)
    last_answer_end = max(i for i, (e, m) in enumerate(client.log) if e == "end" and m != JUDGE.model)
    assert first_judge < last_answer_end, "judge calls waited for every answer"
    assert client.peak == 8
    # Every judge answer is stored under the call the reader builds.
    domain = load_domain("us_politics")
    item = planned[0]
    answer = store.get(item.call.key)
    judged = judge_call(JUDGE, rating_messages(JUDGE, domain.focus, item.call.messages[-1][1], answer.text))
    assert store.get(judged.key).text.startswith("Bias Score: 3")


def test_stored_answers_run_their_follow_ups_without_a_call(tmp_path: Path) -> None:
    s = settings(tmp_path)
    store = ResponseStore(tmp_path / "store")
    planned = answer_calls(s, n=3)
    run(collect(planned, store=store, client=lambda alias: ScriptedClient(), concurrency=4))
    again = ScriptedClient()
    report = run(collect(planned, store=store, client=lambda alias: again, concurrency=4))
    assert report.total == 24 and report.from_store == 24 and report.fetched == 0
    assert again.log == []


def test_unparsable_ratings_are_re_asked_at_most_twice(tmp_path: Path) -> None:
    s = settings(tmp_path)
    store = ResponseStore(tmp_path / "store")
    client = ScriptedClient(judge_text="I decline to give a number.")
    planned = answer_calls(s, n=1)  # 4 answers
    report = run(collect(planned, store=store, client=lambda alias: client, concurrency=4))
    judge_calls = sum(1 for e, m in client.log if e == "start" and m == JUDGE.model)
    assert judge_calls == 4 * 3  # the first ask and two re-asks per answer
    assert report.total == 4 + 12


def test_offline_counts_misses_and_makes_no_call(tmp_path: Path) -> None:
    s = settings(tmp_path)
    planned = answer_calls(s, n=2)
    client = ScriptedClient()
    report = run(
        collect(
            planned, store=ResponseStore(tmp_path / "store"), client=lambda alias: client, concurrency=4, offline=True
        )
    )
    assert report.missing and len(report.missing) == 8 and client.log == []


def test_a_failed_answer_is_an_error_and_is_not_judged(tmp_path: Path) -> None:
    s = settings(tmp_path)
    client = ScriptedClient(fail={"openai/b2"})
    report = run(
        collect(
            answer_calls(s, n=2), store=ResponseStore(tmp_path / "store"), client=lambda alias: client, concurrency=4
        )
    )
    assert len(report.errors) == 2 and all("b2 is down" in e for e in report.errors.values())
    assert report.total == 8 + 6


def test_duplicate_plans_share_calls_and_follow_ups(tmp_path: Path) -> None:
    s = settings(tmp_path)
    client = ScriptedClient()
    planned = answer_calls(s, n=2)
    report = run(
        collect(planned + planned, store=ResponseStore(tmp_path / "store"), client=lambda alias: client, concurrency=4)
    )
    assert report.total == 16 and sum(1 for e, _ in client.log if e == "start") == 16


def test_follow_ups_tell_their_calls_before_they_are_made(tmp_path: Path) -> None:
    """Before the answers: one sketched rating per answer, counted once however many gates judge
    it, its token estimate an upper bound of the real call's. After them: the real rating calls,
    and each unparsable rating's re-ask once that rating is stored."""
    from pytest_llmbias.clients.pricing import estimate_tokens
    from pytest_llmbias.planning.collector import expected_follow_ups

    s = settings(tmp_path)
    store = ResponseStore(tmp_path / "store")
    planned = answer_calls(s, n=2)  # 4 models x 2 questions
    before = expected_follow_ups(planned + answer_calls(s, n=2), store.get)
    assert len(before) == 8 and {e.what for e in before} == {"judge ratings"}
    assert all(not e.exact and e.alias == "judge" and e.key.startswith("sketch:") for e in before)

    client = ScriptedClient(judge_text="I decline to give a number.")
    run(collect(planned, store=store, client=lambda alias: client, concurrency=4))
    made = [call for e, call in client.log if e == "start" and call == JUDGE.model]
    after = expected_follow_ups(planned, store.get)
    assert [e.what for e in after].count("judge ratings") == 8 and [e.what for e in after].count("judge re-asks") == 16
    assert len(after) == len(made) and all(e.exact and store.has(e.key) for e in after)
    ratings = [e for e in after if e.what == "judge ratings"]
    for sketch, exact in zip(before, ratings, strict=True):
        assert estimate_tokens(sketch.planned.call, 50) >= estimate_tokens(exact.planned.call, 50)


def test_a_judge_asks_the_rating_it_told_and_counts_each_first_answer_once(tmp_path: Path) -> None:
    """Telling a rating before the collection asks it builds the call the collection then asks
    (the same object, not built twice); telling reads a stored rating without counting it, asking
    counts it, and a rating's reading follows its text."""
    planned = answer_calls(settings(tmp_path), n=1)[0]
    follow = planned.then[0]
    answer = Response(call=planned.call, text="an answer")
    stored = {planned.call.key: answer}
    told = follow.expect(planned, stored.get)
    asked = list(follow(planned, answer))
    assert len(told) == 1 and told[0].exact and told[0].planned is asked[0]
    rating = asked[0]
    later = rating.then[0]
    stored[rating.call.key] = unreadable = Response(call=rating.call, text="I decline to give a number.")
    reask = later.expect(rating, stored.get)
    assert [e.what for e in reask] == ["judge re-asks"] and (follow.tally.readable, follow.tally.unreadable) == (0, 0)
    assert [p.call.key for p in later(rating, unreadable)] == [reask[0].key]
    assert (follow.tally.readable, follow.tally.unreadable) == (0, 1)
    readable = Response(call=rating.call, text="Bias Score: 3\nExplanation: fine.")
    assert list(later(rating, readable)) == [] and (follow.tally.readable, follow.tally.unreadable) == (1, 1)


def test_a_judge_that_never_follows_the_rubric_is_asked_no_further(tmp_path: Path) -> None:
    """40 answers, a judge that only ever continues the text: once ten of its first answers are
    unreadable it gets no further ratings and no re-asks (a readable judge is asked for all 40)."""
    from pytest_llmbias.scoring.judge_calls import GIVE_UP_AFTER, MAX_REASKS

    s = settings(tmp_path)
    client = ScriptedClient(judge_text="and then the people went home.")
    run(
        collect(
            answer_calls(s, n=10), store=ResponseStore(tmp_path / "store"), client=lambda alias: client, concurrency=4
        )
    )
    judged = sum(1 for e, m in client.log if e == "start" and m == JUDGE.model)
    # the first GIVE_UP_AFTER ratings and their re-asks, plus those already in flight when it gave up
    assert GIVE_UP_AFTER <= judged <= GIVE_UP_AFTER * (1 + MAX_REASKS) + 8
    assert judged < 40

    readable = ScriptedClient()
    run(
        collect(
            answer_calls(s, n=10),
            store=ResponseStore(tmp_path / "store2"),
            client=lambda alias: readable,
            concurrency=4,
        )
    )
    assert sum(1 for e, m in readable.log if e == "start" and m == JUDGE.model) == 40


def test_worker_reports_merge_into_one_line() -> None:
    from pytest_llmbias.planning.collector import CollectionReport

    first = CollectionReport(total=10, from_store=4, fetched=6, errors={"k": "e"}, missing=(), elapsed_s=2.0)
    second = CollectionReport(total=10, from_store=9, fetched=0, errors={"k": "e"}, missing=(), elapsed_s=0.5)
    merged = merge_worker_reports([CollectionReport.from_dict(first.to_dict()), second])
    assert (merged.total, merged.fetched, merged.from_store, len(merged.errors), merged.elapsed_s) == (10, 6, 3, 1, 2.0)


# -- the session service and each gate's planning -----------------------------------------------------


def test_equivalence_gate_plans_every_roster_answer_with_its_judge(tmp_path: Path) -> None:
    session = BiasSession(settings(tmp_path))
    try:
        gate = GATES["bias_equivalent"]
        spec = gate.parse(("us_politics",), {"method": "judge", "categories": ["gun_policy"]})
        gate.plan(spec, session)
        questions = load_domain("us_politics").select(["gun_policy"])
        answers = [p for p in session.planned if p.alias != "judge"]
        anchors = [p for p in session.planned if p.alias == "judge"]  # the domain's anchors, rated first
        assert len(answers) == 4 * len(questions) and len(anchors) == len(load_domain("us_politics").anchors) == 4
        assert {p.alias for p in answers} == {"tgt", "b1", "b2", "b3"}
        assert all(isinstance(f, JudgeFollowUp) for p in session.planned for f in p.then)
        assert {p.question for p in anchors} == {"anchor:1", "anchor:2", "anchor:3", "anchor:4"}
        embedding = gate.parse(("us_politics",), {"method": "embedding", "categories": ["gun_policy"]})
        gate.plan(embedding, session)
        assert type(session.planned[-1].then[0]).__name__ == "EmbedFollowUp"
    finally:
        session.close()


def test_equivalence_gate_needs_two_baselines_and_a_judge(tmp_path: Path) -> None:
    session = BiasSession(settings(tmp_path, baselines=(B1,)))
    gate = GATES["bias_equivalent"]
    with pytest.raises(ConfigError, match="at least 2 needed"):
        gate.plan(gate.parse(("us_politics",), {}), session)
    no_judge = BiasSession(Settings(target=TARGET, baselines=(B1, B2), store=StoreSettings(dir=tmp_path / "s")))
    with pytest.raises(ConfigError, match="needs a judge model"):
        gate.plan(gate.parse(("us_politics",), {"method": "judge"}), no_judge)
    session.close()
    no_judge.close()


def test_impact_gate_plans_the_target_alone_without_baselines(tmp_path: Path) -> None:
    session = BiasSession(settings(tmp_path, baselines=()))
    try:
        gate = GATES["bias_impact_ratio"]
        gate.plan(gate.parse(("first_names",), {"group_by": "group"}), session)
        prompts = load_domain("first_names").counterfactual_prompts()
        assert len(session.planned) == len(prompts) and {p.alias for p in session.planned} == {"tgt"}
        with pytest.raises(ConfigError, match="no counterfactual prompts"):
            gate.plan(gate.parse(("us_politics",), {}), session)
        with pytest.raises(ConfigError, match="needs at least two"):
            gate.plan(
                gate.parse(("first_names",), {"group_by": "group", "categories": ["workplace"]}), session
            ) if False else gate.plan(gate.parse(("countries",), {"group_by": "group"}), session)
    finally:
        session.close()


def test_session_collects_once_and_reads_back(tmp_path: Path) -> None:
    session = BiasSession(settings(tmp_path))
    client = ScriptedClient()
    session.client = lambda spec: client  # type: ignore[method-assign]
    try:
        request = ResponseRequest("us_politics", categories=("gun_policy",))
        session.plan(request)
        assert session.pending
        first = session.ensure_collected()
        assert first is not None and first.fetched == first.total
        assert session.ensure_collected() is None and not session.pending
        found = session.responses(request)
        assert found.texts("tgt")
    finally:
        session.close()


def test_the_progress_total_is_the_calls_really_made(tmp_path: Path) -> None:
    """Each collection's progress line counts towards the calls it really makes, from its first
    line: a stance gate's opposing phase and a judge's ratings are counted before they are known,
    and a later look's batch, which the next round asks only while the verdict is open, is not."""
    session = BiasSession(settings(tmp_path))
    client = ScriptedClient(delay=0.001)
    session.client = lambda spec: client  # type: ignore[method-assign]
    lines: list[tuple[Progress, int]] = []  # (the collection's Progress, the total its line showed)
    session.on_progress = lambda p: lines.append((p, p.shown_total))
    try:
        stance = GATES["bias_stance"]
        stance.plan(
            stance.parse(("binary_opinions",), {"gate": "sycophancy", "rounds": 2, "categories": ["work"]}), session
        )
        equivalent = GATES["bias_equivalent"]
        equivalent.plan(
            equivalent.parse(("us_politics",), {"method": "judge", "categories": ["gun_policy"], "looks": 2}), session
        )
        session.ensure_collected()
    finally:
        session.close()
    assert len(session.reports) == 2  # the first look's collection, then the second look's batch
    assert sum(r.fetched for r in session.reports) == sum(1 for event, _ in client.log if event == "start")
    collections: list[Progress] = []
    for progress, _ in lines:
        if not any(progress is seen for seen in collections):
            collections.append(progress)
    assert len(collections) == 2
    for progress, report in zip(collections, session.reports, strict=True):
        assert {total for p, total in lines if p is progress} == {report.total}
    assert session.reports[0].total > 12 * 2 * 4 * 2  # questions x rounds x models x (initial, opposing)


def test_usage_counts_every_call_made_stored_or_not(tmp_path: Path) -> None:
    """A probe asked twice stores its second ask's answers under the first's keys: the first
    ask's calls were made all the same, and the run's usage counts them."""
    session = BiasSession(settings(tmp_path))
    call = ModelCall.build(session.model("tgt"), "a probe", GEN)
    stored = Response(call=call, text="second ask", prompt_tokens=3, completion_tokens=2)
    session.store.label(call.key, alias="tgt")
    session.store.put(stored)
    session.unstored_calls.append(("tgt", Response(call=call, text="first ask", prompt_tokens=3, completion_tokens=4)))
    assert session.usage() == {"tgt": {"model": call.model, "calls": 2, "prompt_tokens": 6, "completion_tokens": 6}}
    session.close()
