"""``llmbias serve``'s batcher: which waiting requests are decoded together. Only the scheduling is
exercised here (no model is loaded: a batcher not started hands its batches to the caller); the
decoding of the batches it makes runs against the real SmolLM2 in tests/integration."""

from __future__ import annotations

from typing import Any, cast

from pytest_llmbias.local.model import Batcher, Job, Model, kind

RATING = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def _job(text: str, max_tokens: int = 60, schema: dict[str, Any] | None = None) -> Job:
    return Job(
        messages=[{"role": "user", "content": text}], max_tokens=max_tokens, temperature=0.7, seed=1, schema=schema
    )


def _batcher(size: int = 8, bound: int = 64) -> Batcher:
    return Batcher(cast(Model, None), size, bound, start=False)


def test_a_batch_holds_one_kind_the_oldest_first_and_the_rest_wait_their_turn():
    """Answers (60 tokens, no schema) and ratings (24 tokens under a schema) arrive interleaved:
    each batch is of one kind, the kind of the oldest job waiting, in arrival order; no job is
    lost or taken twice."""
    batcher = _batcher()
    jobs = [_job(f"a{i}") if i % 2 == 0 else _job(f"r{i}", 24, RATING) for i in range(10)]
    for job in jobs:
        assert batcher.offer(job)
    batches = []
    while batch := batcher.next_batch(block=False):
        batches.append([job.messages[0]["content"] for job in batch])
    assert batches == [["a0", "a2", "a4", "a6", "a8"], ["r1", "r3", "r5", "r7", "r9"]]
    assert batcher.queued() == 0


def test_a_kind_is_split_at_the_batch_size_and_a_newer_kind_goes_first_only_when_it_is_oldest():
    batcher = _batcher(size=2)
    for job in [_job("a0"), _job("a1"), _job("r0", 24, RATING), _job("a2")]:
        batcher.offer(job)
    names = []
    while batch := batcher.next_batch(block=False):
        names.append([job.messages[0]["content"] for job in batch])
    assert names == [["a0", "a1"], ["r0"], ["a2"]]


def test_kinds_differ_by_answer_length_and_schema_not_by_the_schemas_key_order():
    reordered = {"required": ["score"], "properties": {"score": {"type": "integer"}}, "type": "object"}
    assert kind(_job("x", 24, RATING)) == kind(_job("y", 24, reordered))
    assert kind(_job("x", 24, RATING)) != kind(_job("x", 60, RATING))
    assert kind(_job("x", 24)) != kind(_job("x", 24, RATING))


def test_a_cancelled_job_is_skipped_and_finished_and_a_full_queue_refuses():
    batcher = _batcher(bound=3)
    gone, kept = _job("gone"), _job("kept")
    assert batcher.offer(gone) and batcher.offer(kept) and batcher.offer(_job("third", 24, RATING))
    assert not batcher.offer(_job("fourth"))
    assert batcher.rejected == 1
    gone.cancelled.set()
    assert [job.messages[0]["content"] for job in batcher.next_batch(block=False)] == ["kept"]
    assert gone.done.is_set() and batcher.skipped == 1
    assert batcher.offer(_job("fifth"))  # room again once the batch left the queue
