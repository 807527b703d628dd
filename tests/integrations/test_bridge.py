"""The framework-free conversions the adapters share."""

from __future__ import annotations

import pytest

from corrective_rag.errors import InputError
from corrective_rag.integrations.bridge import (
    document_id,
    flat_metadata,
    ranked_hits,
    where_matches,
    with_limits,
)
from corrective_rag.types import Document

META = {"lang": "en", "year": 2021, "draft": False, "score": 0.5}


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"lang": "en"}, True),
        ({"lang": "fr"}, False),
        ({"year": {"$gte": 2021}}, True),
        ({"year": {"$gt": 2021}}, False),
        ({"year": {"$lt": 2030}, "lang": "en"}, True),
        ({"lang": {"$in": ["fr", "en"]}}, True),
        ({"lang": {"$nin": ["fr", "en"]}}, False),
        ({"lang": {"$ne": "fr"}}, True),
        ({"missing": {"$ne": "fr"}}, True),  # as chroma: $ne is the negation of $eq
        ({"missing": {"$nin": ["fr"]}}, True),
        ({"missing": "fr"}, False),
        ({"missing": {"$in": ["fr"]}}, False),
        ({"year": 2021.0}, True),  # numbers compare by value
        ({"year": {"$in": [2021.0]}}, True),
        ({"year": {"$ne": 2021.0}}, False),
        ({"draft": {"$ne": 0}}, True),
        ({"draft": {"$ne": False}}, False),
        ({"score": {"$gt": 0.25}}, True),
        ({"score": {"$lte": 0.25}}, False),
        ({"draft": 0}, False),  # a bool is not the number 0
        ({"lang": {"$gt": 1}}, False),  # ranges compare numbers only
        ({"$or": [{"lang": "fr"}, {"year": 2021}]}, True),
        ({"$and": [{"lang": "en"}, {"year": 2020}]}, False),
    ],
)
def test_where_matches_reads_filters_as_the_stores_do(where, expected):
    """Each chroma-style filter matches this metadata exactly when chroma's would."""
    assert expected == where_matches(where, META)


@pytest.mark.parametrize(
    "where",
    [{}, {"$not": {"a": 1}}, {"a": {"$like": "x"}}, {"$or": []}, {"a": [1]}, {"a": {"$gt": "x"}}],
)
def test_an_invalid_filter_is_an_input_error(where):
    """Unknown operators, empty lists and non-scalar operands are refused, not matched."""
    with pytest.raises(InputError, match="invalid metadata filter"):
        where_matches(where, META)


def test_documents_get_an_id_and_flat_metadata():
    """The framework's id wins, then metadata[id_key], then a stable digest of the text."""
    assert "a" == document_id("a", {"id": "b"}, "id", "text")
    assert "b" == document_id(None, {"id": "b"}, "id", "text")
    digest = document_id(None, {}, "id", "text")
    assert digest == document_id("", None, "id", "text") and digest.startswith("sha1:")
    assert {"a": 1, "b": "x"} == flat_metadata({"a": 1, "b": "x", "c": None, "d": [1], 2: 3})


def test_ranked_hits_rank_dedupe_cut_and_fill_missing_scores():
    """Hits are ranked in order, an id repeats only at its first place, and 1/rank stands in."""
    a, b, c = (Document(i, f"text {i}") for i in "abc")
    hits = ranked_hits([(a, 0.9), (a, 0.8), (b, None), (c, 0.1)], top_k=2)
    assert [("a", 0.9, 1), ("b", 0.5, 2)] == [(h.document.id, h.score, h.rank) for h in hits]


def test_with_limits_copies_only_declared_fields():
    """Only fields the model declares are set, on a copy; the user's object is unchanged."""
    from pydantic import BaseModel

    class Model(BaseModel):
        temperature: float = 0.7

    model = Model()
    copy = with_limits(model, {"temperature": 0.0, "max_tokens": 10})
    assert (0.7, 0.0) == (model.temperature, copy.temperature)
    assert model is with_limits(model, {"max_tokens": 10})


def test_verdict_keys_are_what_verdict_metadata_adds():
    """VERDICT_KEYS (kept out of LlamaIndex's answering prompt) name every key the verdict adds."""
    from corrective_rag.integrations.bridge import VERDICT_KEYS, verdict_metadata
    from corrective_rag.types import KeptDocument, Relevance, Verdict

    doc = Document("d", "text", {"kind": "bee"})
    verdict = Verdict("d", True, Relevance.HIGH, 0.9, 0.8, reasoning="says so")
    meta = verdict_metadata(KeptDocument(doc, verdict, iteration=2, rank=1), "run")
    assert set(VERDICT_KEYS) == set(meta) - {"kind"}
    assert ("d", 0.9, 0.8, "high", "says so", 2, 1, "run") == tuple(meta[k] for k in VERDICT_KEYS)
