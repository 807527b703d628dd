"""A store remembers its searches between its own writes, and only then (store/search.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.search import Runs, SearchMemo
from corrective_rag.types import Document

CORPUS = [
    Document("py", "Python is a programming language with dynamic typing."),
    Document("rs", "Rust is a systems programming language focused on memory safety."),
    Document("cat", "The domestic cat is a small carnivorous mammal."),
    Document("owl", "Owls are nocturnal birds of prey with silent flight."),
]
QUERY = "which programming language is memory safe"


class CountingQueries:
    """The real chroma collection, counting the dense queries sent to it."""

    def __init__(self, collection: Any) -> None:
        self.collection, self.queries = collection, 0

    def query(self, **kwargs: Any) -> Any:
        self.queries += 1
        return self.collection.query(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.collection, name)


def _ids(store: HybridStore, query: str = QUERY, top_k: int = 3) -> list[str]:
    return [h.document.id for h in store.retrieve(query, top_k=top_k)]


def test_searching_again_for_more_hits_reuses_the_runs(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """The loop's second search of a question (a larger top_k) sends no dense query again."""
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        counting = CountingQueries(store._dense.collection)  # type: ignore[attr-defined]
        store._dense.collection = counting  # type: ignore[attr-defined]
        first = store.retrieve(QUERY, top_k=2)
        more = store.retrieve_many([QUERY], top_k=4)[0]
        assert 1 == counting.queries
        assert first == more[:2]
        assert ["rs", "py", "cat", "owl"] == [h.document.id for h in more]


def test_every_write_is_seen_by_the_next_search(embedder: SentenceTransformerEmbedder) -> None:
    """An upsert, a delete and an add each reach the search that follows them."""
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        assert "rs" == _ids(store)[0]
        store.upsert([Document("rs", "Rust is a memory safe programming language, said again.")])
        assert "Rust is a memory safe programming language, said again." == (
            store.retrieve(QUERY, top_k=1)[0].document.text
        )
        store.delete(["rs"])
        assert "rs" not in _ids(store)
        store.add([Document("ada", "Ada is a memory safe programming language.")])
        assert "ada" == _ids(store)[0]


def test_a_reader_sees_the_writers_deletes(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    """A read-only store is not the folder's one writer, so it remembers nothing."""
    with HybridStore.open(tmp_path / "s", embedder=embedder) as writer:
        writer.add(CORPUS)
        with HybridStore.open(tmp_path / "s", read_only=True, embedder=embedder) as reader:
            reader.warm_up()
            assert "rs" == _ids(reader)[0]
            writer.delete(["rs"])
            assert "rs" not in _ids(reader)


def test_a_search_that_overlaps_a_write_is_not_kept() -> None:
    """Runs read while the store was written to are used once, then searched for again."""
    memo = SearchMemo()
    calls: list[str] = []

    def run_legs(
        queries: Sequence[str], depth: int, where: Mapping[str, Any] | None, legs: Sequence[str]
    ) -> list[Runs | None]:
        calls.extend(queries)
        if len(calls) == 1:
            memo.forget()  # a write ends while this search runs
        return [{"bm25": [("a", 1.0)], "dense": [("a", 0.5)]} for _ in queries]

    remembered = memo.remembering(run_legs)
    for _ in range(3):
        remembered(["q"], 100, None, ("bm25", "dense"))
    assert ["q", "q"] == calls


def test_the_memo_keeps_at_most_its_size_and_never_a_filtered_search() -> None:
    """The first kept is the first forgotten; a search with a filter is never kept."""
    memo = SearchMemo(searches=2)
    calls: list[str] = []

    def run_legs(
        queries: Sequence[str], depth: int, where: Mapping[str, Any] | None, legs: Sequence[str]
    ) -> list[Runs | None]:
        calls.extend(queries)
        return [{"bm25": [(query, 1.0)]} for query in queries]

    remembered = memo.remembering(run_legs)
    for query in ("a", "b", "c", "b", "c", "a"):
        remembered([query], 100, None, ("bm25",))
    remembered(["a"], 100, {"kind": "x"}, ("bm25",))
    assert ["a", "b", "c", "a", "a"] == calls


def test_a_delete_through_chromas_own_client_is_seen(embedder: SentenceTransformerEmbedder) -> None:
    """A document deleted behind the store's back (chromadb's own client) is not served again."""
    import chromadb

    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(CORPUS)
        assert "rs" == _ids(store)[0]
        outside = chromadb.EphemeralClient().get_collection(store.collection_name)
        outside.delete(ids=["rs"])
        hits = store.retrieve(QUERY, top_k=4)
        assert "rs" not in [h.document.id for h in hits]
        assert all("Rust" not in h.document.text for h in hits)


def test_two_in_memory_stores_given_one_name_see_each_others_deletes(
    embedder: SentenceTransformerEmbedder,
) -> None:
    """Stores sharing a named in-memory collection remember nothing: one's delete reaches both."""
    with HybridStore.in_memory(collection="shared-memo", embedder=embedder) as first:
        first.add(CORPUS)
        assert "rs" == _ids(first)[0]
        with HybridStore.in_memory(collection="shared-memo", embedder=embedder) as second:
            second.delete(["rs"])
            hits = first.retrieve(QUERY, top_k=4)
            assert "rs" not in [h.document.id for h in hits]
            assert all("Rust" not in h.document.text for h in hits)


def test_a_writer_sees_a_delete_by_another_chroma_client_of_its_folder(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    """A folder's writer forgets its searches when chromadb's own client deletes from it."""
    import chromadb

    with HybridStore.open(tmp_path / "s", embedder=embedder) as store:
        store.add(CORPUS)
        assert "rs" == _ids(store)[0]
        client = chromadb.PersistentClient(path=str(tmp_path / "s"))
        client.get_collection(store.collection_name).delete(ids=["rs"])
        assert "rs" not in [h.document.id for h in store.retrieve(QUERY, top_k=4)]


def test_the_memo_forgets_when_the_version_moves() -> None:
    """check() drops what was kept once the backend's version reading changes, not before."""
    version = [4]
    memo = SearchMemo(version=lambda: version[0])
    calls: list[str] = []

    def run_legs(
        queries: Sequence[str], depth: int, where: Mapping[str, Any] | None, legs: Sequence[str]
    ) -> list[Runs | None]:
        calls.extend(queries)
        return [{"bm25": [(query, 1.0)]} for query in queries]

    for step in range(4):
        if step == 2:
            version[0] = 3  # someone else deleted a document
        memo.check()
        memo.remembering(run_legs)(["q"], 100, None, ("bm25",))
    assert ["q", "q"] == calls
