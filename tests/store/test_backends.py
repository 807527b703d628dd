"""The backend contract, written once and run against every backend of HybridStore.

A new engine is one module implementing :class:`~corrective_rag.store.backend.Backend` and one
entry in ``BACKENDS`` below. Each test runs on chromadb (with our BM25 index beside it) and on
Qdrant (both legs in the engine, qdrant-client's local mode).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_hybrid import CORPUS, CountingEmbedder

from corrective_rag.errors import ConfigError, DuplicateIdError, InputError, StoreError
from corrective_rag.protocols import Retriever
from corrective_rag.store.backend import Backend
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Document

QUERY = "programming language cat tea moon"


def _qdrant(target: str, **kwargs: Any) -> HybridStore:
    pytest.importorskip("qdrant_client", reason="needs the qdrant extra")
    return HybridStore.qdrant(target, **kwargs)


# name -> (in-memory store, store in a folder)
BACKENDS: dict[str, tuple[Callable[..., HybridStore], Callable[..., HybridStore]]] = {
    "chroma": (HybridStore.in_memory, HybridStore.open),
    "qdrant": (lambda **kw: _qdrant(":memory:", **kw), _qdrant),
}


# whether the backend records which embedder wrote its vectors (HybridStore.vectors gives them)
LABELLED = {"chroma": True, "qdrant": False}


@pytest.fixture(params=sorted(BACKENDS))
def kind(request: pytest.FixtureRequest) -> str:
    """The backend under test."""
    return str(request.param)


def memory(kind: str, **kwargs: Any) -> HybridStore:
    """An in-memory store on backend ``kind``."""
    return BACKENDS[kind][0](**kwargs)


def folder(kind: str, path: Path, **kwargs: Any) -> HybridStore:
    """A store in folder ``path`` on backend ``kind``."""
    return BACKENDS[kind][1](str(path), **kwargs)


@pytest.fixture(scope="module")
def filled(embedder) -> dict[str, HybridStore]:
    """The same corpus in one in-memory store per backend."""
    stores = {}
    for name in BACKENDS:
        try:
            stores[name] = memory(name, embedder=embedder)
        except pytest.skip.Exception:
            continue
        stores[name].add(CORPUS)
    yield stores
    for store in stores.values():
        store.close()


def _store(filled: dict[str, HybridStore], kind: str) -> HybridStore:
    if kind not in filled:
        pytest.skip(f"backend {kind} is not installed")
    return filled[kind]


def test_the_backend_is_one_protocol(filled, kind) -> None:
    """Every backend is a Backend, and the store over it a Retriever."""
    store = _store(filled, kind)
    assert isinstance(store, Retriever)
    assert isinstance(store._dense, Backend)


def test_hits_carry_both_legs(filled, kind) -> None:
    """Hits are ranked 1..n with each leg's rank, and the right document comes first."""
    hits = _store(filled, kind).retrieve("which programming language is memory safe", top_k=3)
    assert "rs" == hits[0].document.id
    assert [1, 2, 3] == [hit.rank for hit in hits]
    assert {"bm25", "dense"} == {leg.leg for leg in hits[0].legs}
    assert {"kind": "lang", "year": 2015} == dict(hits[0].document.metadata)


def test_the_dense_leg_is_the_same_on_every_backend(filled) -> None:
    """The dense leg ranks and scores alike on every backend (same vectors, cosine)."""
    legs = {
        name: [(x.document.id, round(x.score, 5)) for x in s.search(QUERY, leg="dense", top_k=8)]
        for name, s in filled.items()
    }
    assert 1 == len({tuple(v) for v in legs.values()})


@pytest.mark.parametrize("where", [None, {"kind": "animal"}, {"year": {"$gt": 1991}}])
def test_dense_many_is_dense_of_each_vector(filled, kind, where) -> None:
    """``dense_many`` answers each vector as ``dense`` does (ids, scores, order), none for none."""
    store = _store(filled, kind)
    vectors = store.embedder.embed([QUERY, "birds of prey", "red planet", QUERY])
    backend = store._dense
    assert [backend.dense(v, 5, where) for v in vectors] == backend.dense_many(vectors, 5, where)
    assert [] == backend.dense_many(vectors[:0], 5, where)


def test_dense_many_on_an_empty_store_or_filter_finds_nothing(filled, embedder, kind) -> None:
    """An empty store, or a filter no document matches, gives each vector an empty run."""
    vectors = embedder.embed(["cat", "tea"])
    assert [[], []] == _store(filled, kind)._dense.dense_many(vectors, 5, {"kind": "nothing"})
    with memory(kind, embedder=embedder) as empty:
        assert [[], []] == empty._dense.dense_many(vectors, 5, None)


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"kind": "animal"}, {"cat", "owl"}),
        ({"$and": [{"kind": "lang"}, {"year": 2015}]}, {"rs"}),
        ({"$or": [{"kind": "food"}, {"kind": "space"}]}, {"tea", "bread", "moon", "mars"}),
        ({"kind": {"$in": ["lang", "animal"]}}, {"py", "rs", "cat", "owl"}),
        ({"kind": {"$nin": ["lang", "animal"]}}, {"tea", "bread", "moon", "mars"}),
        ({"kind": {"$ne": "food"}}, {"py", "rs", "cat", "owl", "moon", "mars"}),
        ({"year": {"$gt": 1991}}, {"rs"}),
        ({"year": {"$lte": 1991}}, {"py", "cat", "owl", "tea", "bread", "moon", "mars"}),
        (
            {"$or": [{"year": {"$gte": 2000}}, {"$and": [{"kind": "space"}, {"year": 0}]}]},
            {"rs", "moon", "mars"},
        ),
        ({"kind": "nothing"}, set()),
    ],
)
def test_where_filters_select_the_matching_documents(filled, kind, where, expected) -> None:
    """Every chroma-style filter picks exactly the matching documents, on both legs and in ids()."""
    store = _store(filled, kind)
    assert expected == {x.document.id for x in store.retrieve(QUERY, top_k=8, where=where)}
    assert expected == set(store.ids(where=where))
    bm25 = {x.document.id for x in store.search(QUERY, leg="bm25", top_k=8, where=where)}
    assert bm25 <= expected


def test_invalid_arguments_raise_our_errors(filled, kind) -> None:
    """Bad queries, top_k, legs and filters are refused with ConfigError/InputError."""
    store = _store(filled, kind)
    for bad_query in ("", "   ", None):
        with pytest.raises(InputError):
            store.retrieve(bad_query)
    for bad_k in (0, -1, 10_001, 2.5, True):
        with pytest.raises(ConfigError):
            store.retrieve("cat", top_k=bad_k)
    for bad_where in ({}, {"$bogus": 1}, ["kind"]):
        with pytest.raises(InputError):
            store.retrieve("cat", where=bad_where)
    with pytest.raises(ConfigError):
        store.search("cat", leg="sparse")
    with pytest.raises(InputError):
        store.get("cat")


def test_a_write_reaches_both_legs_together(embedder, kind) -> None:
    """add, upsert and delete change both legs at once; unchanged texts are not re-embedded."""
    counting = CountingEmbedder(embedder)
    with memory(kind, embedder=counting) as q:
        q.add(CORPUS)
        with pytest.raises(DuplicateIdError):
            q.add([Document("new", "x"), Document("new", "y")])
        with pytest.raises(InputError, match="'cat'"):
            q.add([Document("cat", "Another cat.")])
        q.upsert([Document("cat", CORPUS[2].text, {"kind": "pet"})])
        assert len(CORPUS) == counting.texts_embedded
        assert {"kind": "pet"} == dict(q.get(["cat"])[0].metadata)  # replaced whole
        q.upsert([Document("cat", "Cats purr and chase mice.", {"kind": "pet"})])
        assert len(CORPUS) + 1 == counting.texts_embedded
        for leg in ("bm25", "dense"):
            assert "cat" == q.search("purr mice", leg=leg)[0].document.id
        assert "cat" not in {x.document.id for x in q.search("carnivorous mammal", leg="bm25")}
        assert 2 == q.delete(["cat", "owl", "unknown"])
        assert 0 == q.delete(["cat"])
        for leg in ("bm25", "dense"):
            assert not {"cat", "owl"} & {x.document.id for x in q.search(QUERY, leg=leg, top_k=8)}
        assert len(CORPUS) - 2 == len(q) == q.count()
        assert sorted(d.id for d in CORPUS if d.id not in ("cat", "owl")) == sorted(q.ids())
        assert ["py", "tea"] == [d.id for d in q.get(["py", "gone", "tea"])]


def test_a_failed_embedding_writes_nothing(embedder, kind) -> None:
    """When embedding fails nothing is written, so neither leg sees the documents."""

    class Broken:
        def embed(self, texts):
            raise RuntimeError("model missing")

    with memory(kind, embedder=embedder) as q:
        q.add(CORPUS[:2])
        q.embedder = Broken()
        with pytest.raises(StoreError, match="nothing written"):
            q.add(CORPUS[2:])
        assert 2 == q.count()
        assert [] == q.get([d.id for d in CORPUS[2:]])


def test_idf_follows_the_corpus(filled, kind) -> None:
    """A rarer term has a higher idf; stop words and absent terms give 0.0."""
    store = _store(filled, kind)
    assert store.idf("mars") > store.idf("programming") > 0.0
    assert 0.0 == store.idf("the") == store.idf("nonexistentword")
    with pytest.raises(InputError):
        store.idf("two words")


def test_stored_vectors_are_given_where_the_store_knows_its_embedder_wrote_them(
    filled, embedder, kind
) -> None:
    """vectors() gives each stored document its text's embedding where the backend records the
    embedder (chromadb), None where it cannot tell (Qdrant); an unknown id or a changed text
    gets None on every backend, and so does nothing at all."""
    store = _store(filled, kind)
    got = store.vectors(CORPUS)
    assert len(CORPUS) == len(got)
    if LABELLED[kind]:
        for row, vector in zip(embedder.embed([d.text for d in CORPUS]), got, strict=True):
            assert vector is not None
            assert pytest.approx(row.tolist(), abs=1e-6) == vector.tolist()
    else:
        assert [None] * len(CORPUS) == got
    first = CORPUS[0]
    changed = Document(first.id, first.text + " And more.", first.metadata)
    assert [None, None] == store.vectors([changed, Document("nowhere", first.text)])
    assert [] == store.vectors([])
    with pytest.raises(InputError):
        store.vectors(first)  # type: ignore[arg-type]


def test_a_folder_store_reopens_with_its_documents(tmp_path, embedder, kind) -> None:
    """A store in a folder keeps its documents and both legs' scores across a reopen."""
    with folder(kind, tmp_path / "s", embedder=embedder) as s:
        s.add(CORPUS)
        first = [(x.document.id, x.score) for x in s.search("programming language", leg="bm25")]
    with folder(kind, tmp_path / "s", embedder=embedder, create=False) as s:
        assert len(CORPUS) == len(s)
        assert first == [
            (x.document.id, x.score) for x in s.search("programming language", leg="bm25")
        ]
        assert {"lang", "animal", "food", "space"} == {d.metadata["kind"] for d in s.get(s.ids())}


def test_empty_and_closed_stores(embedder, kind) -> None:
    """An empty store answers nothing; a closed one refuses every call."""
    with memory(kind, embedder=embedder) as empty:
        assert [] == empty.retrieve("anything") and 0 == len(empty) and [] == empty.ids()
        assert set() == empty.sources()
    closed = memory(kind, embedder=embedder)
    closed.close()
    with pytest.raises(StoreError, match="closed"):
        closed.retrieve("cat")


def test_indexing_files_replaces_shrunk_files_and_prunes(tmp_path, embedder, kind) -> None:
    """index_paths replaces a shrunk file's chunks and prunes deleted files on every backend."""
    from corrective_rag.store.indexing import index_paths

    docs = tmp_path / "docs"
    docs.mkdir()
    long_text = " ".join(f"Sentence {i} is about topic {i % 7} and more." for i in range(200))
    (docs / "a.txt").write_text(long_text, encoding="utf-8")
    (docs / "b.txt").write_text("Bread rises in a warm oven.", encoding="utf-8")
    with memory(kind, embedder=embedder) as store:
        first = index_paths(store, [docs], chunk_tokens=64, overlap=8)
        assert first.documents > 3
        (docs / "a.txt").write_text("Now one short sentence.", encoding="utf-8")
        (docs / "b.txt").unlink()
        second = index_paths(store, [docs], chunk_tokens=64, overlap=8, prune=True)
        assert [f"{docs.resolve()}/a.txt#0"] == store.ids()
        assert (first.documents - 2, 1) == (second.replaced, second.pruned)
        assert {f"{docs.resolve()}/a.txt"} == store.sources()
        assert [f"{docs.resolve()}/a.txt#0"] == store.ids(
            where={"source": f"{docs.resolve()}/a.txt"}
        )
