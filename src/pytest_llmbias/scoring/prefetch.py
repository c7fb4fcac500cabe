"""Embedding while the network works: answers are embedded in a background thread as they arrive.

Scoring that needs no network should not wait for the last call. :class:`EmbedFollowUp` is a
collector follow-up that hands each answer to an :class:`EmbeddingPrefetcher`; its thread loads
the embedding model (sentence-transformers and torch are imported there, on the first text that is
not already stored) and embeds the answers in batches into the embedding cache. When collection
ends, :meth:`EmbeddingPrefetcher.drain` waits for it; the gate's scoring then finds every vector
stored. A prefetch that fails is forgotten: the gate's own scoring runs the same code and reports
the error where it belongs.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_llmbias.planning.collector import ExpectedCall, PlannedCall
    from pytest_llmbias.scoring.embedding import EmbeddingScorer
    from pytest_llmbias.store.calls import Response

_STOP = object()


class EmbeddingPrefetcher:
    """A daemon thread that embeds (text, instruction) pairs into the scorer's cache, in batches of
    up to ``batch`` texts. A batch waits up to ``linger`` seconds to fill (answers arrive one by
    one; encoding them one by one would cost more than the batch saves), except while draining."""

    def __init__(self, scorer: Callable[[], EmbeddingScorer], *, batch: int = 64, linger: float = 0.5) -> None:
        self._scorer = scorer
        self._batch = batch
        self._linger = linger
        self._draining = threading.Event()
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.embedded = 0
        self.error: BaseException | None = None

    def add(self, text: str, instruction: str | None) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="llmbias-embed", daemon=True)
                self._thread.start()
        self._queue.put((text, instruction))

    def _run(self) -> None:
        scorer = None
        while True:
            first = self._queue.get()
            if first is _STOP:
                if scorer is not None and scorer.cache is not None:
                    scorer.cache.release_thread()  # this thread's connection (BlobCache.release_thread)
                self._queue.task_done()
                return
            items = [first]
            deadline = time.monotonic() + self._linger
            while len(items) < self._batch:
                wait = 0.0 if self._draining.is_set() else deadline - time.monotonic()
                try:
                    nxt = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    self._queue.put(nxt)  # handled after this batch
                    self._queue.task_done()
                    break
                items.append(nxt)
            try:
                if self.error is None:
                    by_instruction: dict[str | None, list[str]] = {}
                    for text, instruction in items:
                        by_instruction.setdefault(instruction, []).append(text)
                    scorer = self._scorer()
                    for instruction, texts in by_instruction.items():
                        scorer.embed(texts, instruction)
                        self.embedded += len(texts)
            except BaseException as exc:  # noqa: BLE001 - the gate's scoring reports it properly
                self.error = exc
            finally:
                for _ in items:
                    self._queue.task_done()

    def drain(self) -> None:
        """Wait until every text handed over so far is embedded (or the prefetch has failed)."""
        if self._thread is not None:
            self._draining.set()
            try:
                self._queue.join()
            finally:
                self._draining.clear()

    def close(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout=30)


@dataclass(frozen=True)
class EmbedFollowUp:
    """A collector follow-up: hand each answer to ``prefetcher`` under ``instruction``; no calls."""

    prefetcher: EmbeddingPrefetcher
    instruction: str | None

    def __call__(self, item: PlannedCall, response: Response) -> Iterable[PlannedCall]:
        self.prefetcher.add(response.text, self.instruction)
        return ()

    def expect(self, planned: PlannedCall, get: Callable[[str], Response | None]) -> Iterable[ExpectedCall]:
        """No model call: embedding runs locally."""
        return ()
