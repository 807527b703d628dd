"""The Qdrant backend in qdrant-client's local mode: its BM25 maths, its folder, the CLI, the alias.

What every backend must do is in test_backends.py; this file holds what is Qdrant's own.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from test_hybrid import CORPUS

from corrective_rag.errors import ConfigError, InputError, StoreError
from corrective_rag.protocols import Retriever
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.sparse_bm25 import K1, B, bm25_idf, document_vector, term_index
from corrective_rag.text import tokenize
from corrective_rag.types import Document

pytest.importorskip(
    "qdrant_client", reason="needs the qdrant extra: pip install 'corrective_rag[qdrant]'"
)

from corrective_rag.store.qdrant import QdrantBackend

QUERY = "programming language cat tea moon"


@pytest.fixture(scope="module")
def stores(embedder):
    """The same corpus in a store on Qdrant and one on chromadb."""
    with (
        HybridStore.qdrant(":memory:", embedder=embedder) as q,
        HybridStore.in_memory(embedder=embedder) as h,
    ):
        q.add(CORPUS)
        h.add(CORPUS)
        yield q, h


def test_hits_carry_both_legs_and_the_dense_leg_matches_hybridstore(stores) -> None:
    """Hits are ranked 1..n with each leg's rank; the dense leg equals HybridStore's."""
    q, h = stores
    assert isinstance(q, Retriever)
    hits = q.retrieve("which programming language is memory safe", top_k=3)
    assert "rs" == hits[0].document.id
    assert [1, 2, 3] == [hit.rank for hit in hits]
    assert {"bm25", "dense"} == {leg.leg for leg in hits[0].legs}
    assert {"kind": "lang", "year": 2015} == dict(hits[0].document.metadata)
    ours = [(x.document.id, round(x.score, 5)) for x in q.search(QUERY, leg="dense", top_k=8)]
    theirs = [(x.document.id, round(x.score, 5)) for x in h.search(QUERY, leg="dense", top_k=8)]
    assert theirs == ours


def test_bm25_leg_scores_are_bm25_with_qdrant_idf(stores) -> None:
    """Each sparse score equals BM25 (k1 1.5, b 0.75, idf ln(1+(N-n+.5)/(n+.5))) worked out here."""
    q, _ = stores
    docs = {d.id: tokenize(d.text) for d in CORPUS}
    avgdl = sum(map(len, docs.values())) / len(docs)
    terms = tokenize("programming language planet")

    def bm25(tokens: list[str]) -> float:
        tf = Counter(tokens)
        total = 0.0
        for t in terms:
            n = sum(t in d for d in docs.values())
            if tf[t]:
                norm = K1 * (1 - B + B * len(tokens) / avgdl)
                total += bm25_idf(len(docs), n) * tf[t] * (K1 + 1) / (tf[t] + norm)
        return total

    expected = sorted(((bm25(t), i) for i, t in docs.items() if bm25(t) > 0), reverse=True)
    got = q.search("programming language planet", leg="bm25", top_k=8)
    assert [i for _, i in expected] == [x.document.id for x in got]
    assert pytest.approx([s for s, _ in expected], rel=1e-5) == [x.score for x in got]
    assert pytest.approx(bm25_idf(8, 2)) == q.idf("programming")
    assert 0.0 == q.idf("the") == q.idf("nonexistentword")


def test_qdrant_settings_and_filters_are_checked(stores) -> None:
    """Bad Qdrant settings and filters Qdrant cannot read raise ConfigError/InputError.

    (The checks every backend makes are in test_backends.py.)
    """
    q, _ = stores
    for bad_where in ({"kind": {"$in": "lang"}}, {"kind": [1]}):
        with pytest.raises(InputError):
            q.retrieve("cat", where=bad_where)
    for bad in ({"candidates": 0}, {"avgdl": 0}, {"collection": ""}):
        with pytest.raises(ConfigError):
            HybridStore.qdrant(":memory:", **bad)
    with pytest.raises(ConfigError):
        QdrantBackend(object(), avgdl=0)


def test_a_folder_store_reopens_with_its_bm25_length_norm(tmp_path, embedder) -> None:
    """A local-mode folder keeps documents and the avgdl measured on the first write."""
    with HybridStore.qdrant(str(tmp_path), embedder=embedder) as q:
        q.add(CORPUS)
        first = q.search("programming language", leg="bm25")
    with HybridStore.qdrant(str(tmp_path), embedder=embedder) as q:
        assert len(CORPUS) == len(q)
        again = q.search("programming language", leg="bm25")
        # A later writer weighs a new document by the recorded avgdl, not by its own batch.
        q.add([Document("py2", CORPUS[0].text)])
        scores = {x.document.id: x.score for x in q.search("programming language", leg="bm25")}
        assert pytest.approx(scores["py"], rel=1e-6) == scores["py2"]
    assert [(x.document.id, x.score) for x in first] == [(x.document.id, x.score) for x in again]
    with HybridStore.qdrant(":memory:", embedder=embedder) as empty:
        assert [] == empty.retrieve("anything") and 0 == len(empty) and [] == empty.ids()
    empty_check = HybridStore.qdrant(":memory:", embedder=embedder)
    empty_check.close()
    with pytest.raises(StoreError, match="closed"):
        empty_check.retrieve("cat")


def test_sparse_vectors_merge_colliding_terms_and_weigh_length() -> None:
    """Document weights follow BM25's tf part; indices are unique and sorted; longer is lower."""
    indices, values = document_vector(["cat", "cat", "dog"], avgdl=3.0)
    assert sorted({term_index("cat"), term_index("dog")}) == indices
    by_index = dict(zip(indices, values, strict=True))
    assert pytest.approx(2 * 2.5 / (2 + 1.5)) == by_index[term_index("cat")]
    short = dict(zip(*document_vector(["cat"], avgdl=3.0), strict=True))
    long = dict(zip(*document_vector(["cat"] + ["x"] * 8, avgdl=3.0), strict=True))
    assert short[term_index("cat")] > long[term_index("cat")]
    with pytest.raises(ValueError):
        document_vector(["cat"], avgdl=0)
    assert np.isclose(bm25_idf(10, 10), np.log(1 + 0.5 / 10.5))


def test_cli_indexes_into_a_qdrant_folder_and_refuses_mixed_stores(tmp_path, capsys) -> None:
    """`index --qdrant DIR` fills a local-mode store; --qdrant with --store is a usage error."""
    from corrective_rag.cli.main import main

    (tmp_path / "a.txt").write_text("Owls are nocturnal birds of prey with silent flight.")
    folder = str(tmp_path / "q")
    assert 0 == main(["index", str(tmp_path / "a.txt"), "--qdrant", folder, "--no-progress"])
    with HybridStore.qdrant(folder, create=False) as q:
        assert 1 == q.count()
        assert "Owls" in q.search("owls", leg="bm25")[0].document.text
    assert 2 == main(["run", "owls?", "--qdrant", folder, "--store", str(tmp_path)])
    assert "--qdrant alone" in capsys.readouterr().err
    assert 1 == main(["run", "owls?", "--qdrant", str(tmp_path / "missing")])
    assert "qdrant folder not found" in capsys.readouterr().err
