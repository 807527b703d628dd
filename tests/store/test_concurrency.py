"""Concurrent reads: queries do not wait for each other, and concurrent texts share one encode."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from corrective_rag.models.batching import Batcher
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Document

WAIT = 60.0  # seconds: only reached when the property fails, never on the passing path


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


class GateEmbedder:
    """Counts callers inside embed() and holds each there until the gate opens."""

    def __init__(self) -> None:
        self.inside = 0
        self.most_inside = 0
        self.gate = threading.Event()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            if self.gate.is_set() is False and len(texts) == 1:  # queries wait; index writes pass
                self.gate.wait(WAIT)
            out = np.zeros((len(texts), 8), dtype=np.float32)
            out[:, 0] = 1.0
            return out
        finally:
            with self._lock:
                self.inside -= 1


def test_queries_embed_in_parallel_without_a_store_lock() -> None:
    """Two retrieve() calls are inside the embedder at once: no lock spans a whole query."""
    embedder = GateEmbedder()
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add([Document("a", "Owls hunt at night."), Document("b", "Tea leaves brew.")])
        results: list[list[str]] = []

        def query() -> None:
            results.append([h.document.id for h in store.retrieve("owls night", top_k=1)])

        threads = [threading.Thread(target=query) for _ in range(2)]
        for t in threads:
            t.start()
        _until(lambda: embedder.inside == 2, "both queries inside the embedder")
        embedder.gate.set()
        for t in threads:
            t.join(WAIT)
        assert 2 == embedder.most_inside
        assert [["a"], ["a"]] == results


def test_concurrent_callers_share_one_encode() -> None:
    """Texts queued while one encode runs are encoded together in the next single call."""
    calls: list[list[str]] = []
    first_running, release = threading.Event(), threading.Event()

    def encode(texts: list[str]) -> list[npt.NDArray[np.float32]]:
        calls.append(list(texts))
        if len(calls) == 1:
            first_running.set()
            release.wait(WAIT)
        return [np.full(2, len(t), dtype=np.float32) for t in texts]

    batcher = Batcher(encode)
    out: dict[str, list[float]] = {}

    def ask(text: str) -> None:
        out[text] = [float(v[0]) for v in batcher.encode([text])]

    threads = [threading.Thread(target=ask, args=("x" * n,)) for n in (1, 2, 3, 4)]
    threads[0].start()
    assert first_running.wait(WAIT)
    for t in threads[1:]:
        t.start()
    _until(lambda: len(batcher._queue) == 3, "three callers queued")
    release.set()
    for t in threads:
        t.join(WAIT)
    assert [["x"], ["xx", "xxx", "xxxx"]] == [calls[0], sorted(calls[1])]
    assert {"x": [1.0], "xx": [2.0], "xxx": [3.0], "xxxx": [4.0]} == out


def test_threads_get_the_same_vectors_as_one_caller(embedder: SentenceTransformerEmbedder) -> None:
    """Embedding from eight threads at once gives each text the vector it gets alone."""
    texts = [f"question number {i} about owls and tea" for i in range(16)]
    fresh = SentenceTransformerEmbedder(cache_size=0)
    alone = fresh.embed(texts)
    got: dict[int, npt.NDArray[np.float32]] = {}

    def work(i: int) -> None:
        got[i] = fresh.embed([texts[i], texts[(i + 1) % 16]])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    for i in range(16):
        np.testing.assert_allclose(alone[[i, (i + 1) % 16]], got[i], atol=1e-5)
