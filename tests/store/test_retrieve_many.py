"""retrieve_many: a retrieve per query's hits, for one dense call and one fetch (store/search.py).

Each test runs on every backend of ``tests/store/test_backends.py``, through a spy on the real
backend that counts the dense searches and fetches sent to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from structlog.testing import capture_logs
from test_backends import BACKENDS, memory
from test_hybrid import CORPUS

from corrective_rag.store.backend import Backend, Lexical, Record, Run
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Hit

QUERIES = ["which programming language is memory safe", "birds of prey", "red planet dust"]


class Spy:
    """A real backend, counting the vectors of each dense call and the ids of each fetch.

    ``gone``: ids its fetch no longer finds, as if another client deleted them after the search.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.dense_calls: list[int] = []  # the number of vectors of each call
        self.fetches: list[list[str]] = []
        self.gone: set[str] = set()

    @property
    def lexical(self) -> Lexical | None:
        return self.inner.lexical

    def count(self) -> int:
        return self.inner.count()

    def ids(self, where: Mapping[str, Any] | None) -> list[str]:
        return self.inner.ids(where)

    def fetch(self, ids: Sequence[str], *, vectors: bool = False) -> dict[str, Record]:
        self.fetches.append(list(ids))
        found = self.inner.fetch(ids, vectors=vectors)
        return {i: r for i, r in found.items() if i not in self.gone}

    def dense(self, vector: npt.NDArray[np.float32], depth: int, where: Any) -> Run:
        self.dense_calls.append(1)
        return self.inner.dense(vector, depth, where)

    def dense_many(self, vectors: npt.NDArray[np.float32], depth: int, where: Any) -> list[Run]:
        self.dense_calls.append(len(vectors))
        return self.inner.dense_many(vectors, depth, where)

    def write(self, *args: Any) -> None:  # documents, embeddings, previous: passed on as they are
        self.inner.write(*args)

    def delete(self, ids: Sequence[str]) -> None:
        self.inner.delete(ids)

    def close(self) -> None:
        self.inner.close()

    def reset(self) -> None:
        self.dense_calls.clear()
        self.fetches.clear()


def _spied_store(kind: str, embedder: Any) -> Iterator[tuple[HybridStore, Spy]]:
    store = memory(kind, embedder=embedder)
    with store:
        store.add(CORPUS)
        store.warm_up()
        spy = Spy(store._backend)  # type: ignore[arg-type]
        store._backend = spy  # type: ignore[assignment]
        yield store, spy


@pytest.fixture(params=sorted(BACKENDS))
def spied(request: pytest.FixtureRequest, embedder: Any) -> Iterator[tuple[HybridStore, Spy]]:
    """A filled in-memory store on each backend, its backend behind a :class:`Spy`."""
    yield from _spied_store(str(request.param), embedder)


# The backends whose in-memory store remembers its searches (SearchMemo): its one writer. A local
# Qdrant client may be shared by other stores, so a Qdrant store remembers nothing.
REMEMBERING = ("chroma",)


@pytest.fixture(params=REMEMBERING)
def remembering(request: pytest.FixtureRequest, embedder: Any) -> Iterator[tuple[HybridStore, Spy]]:
    """:func:`spied` on the backends whose store keeps a search memo."""
    yield from _spied_store(str(request.param), embedder)


def _each(store: HybridStore, queries: Sequence[str], **kwargs: Any) -> list[list[Hit]]:
    """``retrieve`` of each query on a store that remembers no search."""
    _forget(store)
    return [store.retrieve(q, **kwargs) for q in queries]


def _same_hits(expected: Sequence[Sequence[Hit]], found: Sequence[Sequence[Hit]]) -> bool:
    """Equal field for field, scores within 1e-6: a search of N vectors at once may differ from N
    searches of one in the last bits of float32 (Qdrant's local mode scores a batch as one matrix
    product), which no caller can see; ids, ranks, legs and texts must agree exactly."""

    def scoreless(hits: Sequence[Sequence[Hit]]) -> list[list[Hit]]:
        return [
            [
                dataclasses.replace(
                    h,
                    score=0.0,
                    legs=tuple(dataclasses.replace(leg, score=0.0) for leg in h.legs),
                )
                for h in row
            ]
            for row in hits
        ]

    def scores(hits: Sequence[Sequence[Hit]]) -> list[float]:
        return [s for row in hits for h in row for s in (h.score, *(leg.score for leg in h.legs))]

    return scoreless(expected) == scoreless(found) and scores(expected) == pytest.approx(
        scores(found), rel=0, abs=1e-6
    )


def _forget(store: HybridStore) -> None:
    if store._memo is not None:
        store._memo.forget()


@pytest.mark.parametrize("where", [None, {"kind": {"$in": ["lang", "animal", "space"]}}])
def test_retrieve_many_is_one_dense_call_and_one_fetch(spied, where) -> None:
    """N queries: their hits equal a retrieve per query's, field for field, for one dense call
    with N vectors and one fetch."""
    store, spy = spied
    expected = _each(store, QUERIES, top_k=3, where=where)
    _forget(store)
    spy.reset()
    assert _same_hits(expected, store.retrieve_many(QUERIES, top_k=3, where=where))
    assert [len(QUERIES)] == spy.dense_calls
    assert 1 == len(spy.fetches)


def test_a_remembered_query_goes_to_no_backend(remembering) -> None:
    """With the memo partly warm only the other queries are searched, and the documents it
    holds are not fetched again; with it warm, nothing goes to the backend."""
    store, spy = remembering
    assert store._memo is not None
    expected = _each(store, QUERIES, top_k=3)
    _forget(store)
    warm = {h.document.id for h in store.retrieve(QUERIES[0], top_k=3)}
    spy.reset()
    assert expected == store.retrieve_many(QUERIES, top_k=3)
    assert [len(QUERIES) - 1] == spy.dense_calls
    [fetched] = spy.fetches
    assert set() == warm & set(fetched)
    spy.reset()
    assert expected == store.retrieve_many(QUERIES, top_k=3)
    assert ([], []) == (spy.dense_calls, spy.fetches)


def test_a_repeated_query_is_searched_once(spied) -> None:
    """A query twice in the list gets the same hits twice, searched once."""
    store, spy = spied
    queries = [QUERIES[0], QUERIES[1], QUERIES[0]]
    expected = _each(store, queries, top_k=4)
    _forget(store)
    spy.reset()
    assert _same_hits(expected, store.retrieve_many(queries, top_k=4))
    assert [2] == spy.dense_calls
    assert 1 == len(spy.fetches)


def test_a_filter_matching_nothing_answers_empty_lists(spied) -> None:
    """A filter no document matches gives every query no hits, fetching nothing."""
    store, spy = spied
    where = {"kind": "nothing"}
    assert [[], [], []] == _each(store, QUERIES, where=where)
    spy.reset()
    assert [[], [], []] == store.retrieve_many(QUERIES, where=where)
    assert [] == spy.fetches
    assert len(spy.dense_calls) <= 1  # chroma: none (BM25 beside finds no id); qdrant: one


def test_vanished_documents_warn_as_a_retrieve_per_query_does(spied) -> None:
    """Hits deleted between search and fetch are dropped, with one warning per query."""
    store, spy = spied
    spy.gone = {"rs", "py"}
    with capture_logs() as each_logs:
        expected = _each(store, QUERIES, top_k=4)
    _forget(store)
    with capture_logs() as many_logs:
        found = store.retrieve_many(QUERIES, top_k=4)
    assert _same_hits(expected, found)
    assert all(h.document.id not in spy.gone for hits in found for h in hits)
    vanished = [e for e in each_logs if e["event"] == "hits_vanished"]
    assert vanished and vanished == [e for e in many_logs if e["event"] == "hits_vanished"]


def test_a_store_that_overrides_retrieve_gets_it_called_per_query(embedder) -> None:
    """A subclass's own retrieve is called for each query, so what it adds still applies."""

    class Tagged(HybridStore):
        def retrieve(self, query: str, *, top_k: int = 10, where: Any = None) -> list[Hit]:
            self.asked.append(query)
            return super().retrieve(query, top_k=top_k, where=where)

    with Tagged.in_memory(embedder=embedder) as store:
        store.asked = []  # type: ignore[attr-defined]
        store.add(CORPUS)
        found = store.retrieve_many(QUERIES, top_k=2)
        assert QUERIES == store.asked  # type: ignore[attr-defined]
        assert [store.retrieve(q, top_k=2) for q in QUERIES] == found
