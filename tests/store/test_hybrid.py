"""HybridStore with real chromadb and the real embedding model: writes, search, filters, disk."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from structlog.testing import capture_logs

from corrective_rag.errors import (
    ConfigError,
    DuplicateIdError,
    InputError,
    StoreError,
    StoreLockedError,
)
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.protocols import Retriever
from corrective_rag.store.fusion import RRFusion
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.persist import SavedBM25
from corrective_rag.testing.filter_contract import LetterEmbedder
from corrective_rag.text import tokenize
from corrective_rag.types import Document

ROWS = [
    ("py", "Python is a programming language with dynamic typing.", "lang", 1991),
    ("rs", "Rust is a systems programming language focused on memory safety.", "lang", 2015),
    ("cat", "The domestic cat is a small carnivorous mammal.", "animal", 0),
    ("owl", "Owls are nocturnal birds of prey with silent flight.", "animal", 0),
    ("tea", "Green tea is brewed from unoxidised leaves.", "food", 0),
    ("bread", "Sourdough bread rises with wild yeast and bacteria.", "food", 0),
    ("moon", "The Moon orbits the Earth every 27 days.", "space", 0),
    ("mars", "Mars is the fourth planet, red with iron oxide dust.", "space", 0),
]
CORPUS = [Document(i, text, {"kind": kind, "year": year}) for i, text, kind, year in ROWS]


class CountingEmbedder:
    """A real embedder wrapper that counts every text it is asked to embed."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.texts_embedded = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts_embedded += len(texts)
        return self.inner.embed(texts)


@pytest.fixture
def store(embedder: SentenceTransformerEmbedder):
    with HybridStore.in_memory(embedder=embedder) as s:
        s.add(CORPUS)
        yield s


def test_retrieve_ranks_the_matching_document_first(store: HybridStore) -> None:
    """A query about a document's topic finds it first, with both legs' ranks and scores."""
    hits = store.retrieve("which programming language is memory safe", top_k=3)
    assert isinstance(store, Retriever)
    assert "rs" == hits[0].document.id
    assert [1, 2, 3] == [h.rank for h in hits]
    assert {"bm25", "dense"} == {leg.leg for leg in hits[0].legs}
    assert all(leg.rank >= 1 for h in hits for leg in h.legs)
    assert sorted((h.score for h in hits), reverse=True) == [h.score for h in hits]
    assert {"kind": "lang", "year": 2015} == dict(hits[0].document.metadata)


def test_single_leg_search_and_convex_fusion(embedder: SentenceTransformerEmbedder) -> None:
    """search() returns one leg's ranking; an RRF store ranks the obvious match first too."""
    with HybridStore.in_memory(embedder=embedder, fusion=RRFusion()) as s:
        s.add(CORPUS)
        bm25 = s.search("owls birds", leg="bm25", top_k=5)
        assert "owl" == bm25[0].document.id
        assert ("bm25",) == tuple(leg.leg for leg in bm25[0].legs)
        assert "mars" == s.retrieve("red planet dust")[0].document.id
        with pytest.raises(ConfigError):
            s.search("owls", leg="sparse")


def test_invalid_arguments_raise_our_errors(store: HybridStore) -> None:
    """Empty queries, bad top_k, bad filters and bad ids are refused with ConfigError/InputError."""
    for bad_query in ("", "   ", None):
        with pytest.raises(InputError):
            store.retrieve(bad_query)  # type: ignore[arg-type]
    for bad_k in (0, -1, 10_001, 2.5, True):
        with pytest.raises(ConfigError):
            store.retrieve("cat", top_k=bad_k)  # type: ignore[arg-type]
    for bad_where in ({}, {"$bogus": 1}, ["kind"]):
        with pytest.raises(InputError):
            store.retrieve("cat", where=bad_where)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        store.get("cat")
    with pytest.raises(ConfigError):
        HybridStore.in_memory(embedder=store.embedder, candidates=0)


def test_duplicate_and_existing_ids_write_nothing(store: HybridStore) -> None:
    """Repeated ids in one call raise DuplicateIdError naming them; existing ids need upsert."""
    fresh = Document("new", "A brand new document about volcanoes.")
    with pytest.raises(DuplicateIdError, match="'new'") as err:
        store.add([fresh, fresh])
    assert ["new"] == err.value.ids
    with pytest.raises(InputError, match="'cat'"):
        store.add([fresh, Document("cat", "Another cat.")])
    with pytest.raises(InputError, match="reserved"):
        store.add([Document("x", "text", {"_crag_hash": "forged"})])
    assert len(CORPUS) == len(store) == store.count()
    assert [] == store.get(["new"])


def test_upsert_with_unchanged_text_does_not_re_embed(embedder) -> None:
    """Upserting identical text only updates metadata; changed text is embedded once."""
    counting = CountingEmbedder(embedder)
    with HybridStore.in_memory(embedder=counting) as s:
        s.add(CORPUS)
        assert len(CORPUS) == counting.texts_embedded
        s.upsert([Document("cat", CORPUS[2].text, {"kind": "pet"})])
        assert len(CORPUS) == counting.texts_embedded
        assert {"kind": "pet"} == dict(s.get(["cat"])[0].metadata)
        changed = Document("cat", "Cats purr and chase mice.", {"kind": "pet"})
        s.upsert([changed, Document("z", "Zebras.")])
        assert len(CORPUS) + 2 == counting.texts_embedded
        assert "cat" == s.search("purr mice", leg="bm25")[0].document.id


def test_delete_get_ids_and_idf(store: HybridStore) -> None:
    """Deletes reach both legs; get keeps the asked order; idf follows the corpus."""
    assert store.idf("programming") > store.idf("nonexistentword") == 0.0
    assert 0.0 == store.idf("the")
    with pytest.raises(InputError):
        store.idf("two words")
    assert 2 == store.delete(["py", "rs", "unknown"])
    assert 0 == store.delete([])
    assert 0.0 == store.idf("programming")
    assert ["owl", "cat"] == [d.id for d in store.get(["owl", "gone", "cat"])]
    assert [d.id for d in CORPUS[2:]] == store.ids()
    assert all(h.document.id not in ("py", "rs") for h in store.retrieve("programming language"))


def test_persistent_store_reopens_with_both_sides(tmp_path, embedder) -> None:
    """A persistent store reopens with the same documents and the same BM25 scores."""
    with HybridStore.open(tmp_path / "db", embedder=embedder) as s:
        s.add(CORPUS)
        before = s.search("planet moon", leg="bm25")
    with HybridStore.open(tmp_path / "db", embedder=embedder) as s:
        assert [d.id for d in CORPUS] == sorted(s.ids(), key=[d.id for d in CORPUS].index)
        assert before == s.search("planet moon", leg="bm25")


def test_second_writer_is_locked_out(tmp_path, embedder) -> None:
    """A directory held by one store cannot be opened by another until it is closed."""
    first = HybridStore.open(tmp_path / "db", embedder=embedder)
    with pytest.raises(StoreLockedError):
        HybridStore.open(tmp_path / "db", embedder=embedder)
    first.close()
    HybridStore.open(tmp_path / "db", embedder=embedder).close()


def test_mismatched_bm25_side_is_repaired_and_logged(tmp_path, embedder) -> None:
    """A BM25 side missing committed writes (log cut off) is rebuilt at open, with a log line."""
    directory = tmp_path / "db"
    with HybridStore.open(directory, embedder=embedder) as s:
        s.add(CORPUS)
    saved = SavedBM25(str(directory.resolve()), "corrective_rag")
    assert saved.log_size() > 0
    os.truncate(saved.log, 0)
    with capture_logs() as logs, HybridStore.open(directory, embedder=embedder) as s:
        assert len(CORPUS) == len(s)
        assert "mars" == s.search("iron oxide dust", leg="bm25")[0].document.id
    assert ["bm25_repaired"] == [e["event"] for e in logs if e["event"] == "bm25_repaired"]


def test_failed_bm25_save_rolls_back_the_dense_write(tmp_path, embedder) -> None:
    """When saving the BM25 side fails after chroma accepted a write, chroma is rolled back."""
    directory = tmp_path / "db"
    with HybridStore.open(directory, embedder=embedder) as s:
        s.add(CORPUS[:4])
        saved = SavedBM25(str(directory.resolve()), "corrective_rag")
        # a non-empty directory where the log should go makes the append fail for real
        os.replace(saved.log, str(tmp_path / "saved.log"))
        os.mkdir(saved.log)
        (Path(saved.log) / "keep").write_text("x")
        with pytest.raises(StoreError, match="rolled back"):
            s.add(CORPUS[4:])
        with pytest.raises(StoreError, match="rolled back"):
            s.upsert([Document("cat", "A changed cat text.")])
        assert 4 == s._dense.count() == len(s)
        assert CORPUS[2].text == s.get(["cat"])[0].text
        assert "cat" == s.search("domestic carnivorous", leg="bm25")[0].document.id


def test_closed_store_refuses_calls(embedder) -> None:
    """After close, every call raises StoreError."""
    s = HybridStore.in_memory(embedder=embedder)
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.retrieve("anything")


def test_tokenizer_folds_plurals_for_bm25() -> None:
    """The store's tokenizer lower-cases, drops stop words and folds plurals."""
    assert ["owl", "bird", "prey"] == tokenize("The Owls are birds of prey")


def test_retrieve_many_is_retrieve_of_each_query(embedder: SentenceTransformerEmbedder) -> None:
    """``retrieve_many`` returns what ``retrieve`` returns for each query, in order."""
    docs = [
        Document("bees", "Bees make honey from nectar."),
        Document("nile", "The Nile flows north."),
        Document("yeast", "Yeast makes bread rise."),
    ]
    queries = ["honey bees", "river flowing north", "bread"]
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(docs)
        one_by_one = [store.retrieve(q, top_k=2) for q in queries]
        together = store.retrieve_many(queries, top_k=2)
    assert [[(h.document.id, h.rank) for h in hits] for hits in one_by_one] == [
        [(h.document.id, h.rank) for h in hits] for hits in together
    ]


def test_retrieve_many_refuses_a_bare_string(embedder: SentenceTransformerEmbedder) -> None:
    """A single string is no list of queries: InputError, not a search per letter."""
    with HybridStore.in_memory(embedder=embedder) as store, pytest.raises(InputError):
        store.retrieve_many("honey", top_k=2)


class OtherLetters(LetterEmbedder):
    """The same vectors under another name: a store cannot tell it wrote the stored ones."""


def test_stored_vectors_of_another_embedder_are_not_given(tmp_path: Path) -> None:
    """A store reopened with another embedder than the one that wrote its vectors gives none
    (its label names the writer); reopened with the writer's kind, it gives them; closed, it
    refuses."""
    docs = [Document("a", "Ganymede is a moon."), Document("b", "Bees make honey.")]
    with HybridStore.open(str(tmp_path / "s"), embedder=LetterEmbedder()) as s:
        s.add(docs)
    with HybridStore.open(str(tmp_path / "s"), embedder=OtherLetters(), create=False) as s:
        assert [None, None] == s.vectors(docs)
    with HybridStore.open(str(tmp_path / "s"), embedder=LetterEmbedder(), create=False) as s:
        got = s.vectors(docs)
    expected = LetterEmbedder().embed([d.text for d in docs])
    assert [pytest.approx(row.tolist()) for row in expected] == [
        None if v is None else v.tolist() for v in got
    ]
    with pytest.raises(StoreError, match="closed"):
        s.vectors(docs)
