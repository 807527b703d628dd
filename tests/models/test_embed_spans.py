"""Span pooling: a document's vector and its sentences' vectors from one pass of the model."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.models import SentenceTransformerEmbedder
from corrective_rag.models.source import default_model_path
from corrective_rag.text.lexical import MIN_SENTENCE_CHARS, sentence_spans

WAIT = 120.0  # seconds a thread may take on a loaded machine before the test gives up on it

VOLCANO = "Mount St. Helens erupted explosively in May 1980 in Washington state."
BREAD = "Sourdough bread rises through the fermentation of wild yeast and lactobacilli."
CHESS = "The queen's gambit is a chess opening in which white offers a pawn."
MIXED = f"{VOLCANO} {BREAD} {CHESS}"
# about 330 tokens of filler, so that a sentence after it lies past the model's 256 tokens
FILLER = " ".join(
    f"Paragraph {i} describes the ledger entries of the accounting office in plain words."
    for i in range(22)
)
LONG = f"{FILLER} {VOLCANO}"


def spans_of(text: str) -> list[tuple[int, int]]:
    return sentence_spans(text, min_chars=MIN_SENTENCE_CHARS)


@pytest.fixture(scope="module")
def exact() -> SentenceTransformerEmbedder:
    """The default model with float32 span passes and no cache."""
    return SentenceTransformerEmbedder(cache_size=0, span_precision="float32")


def test_text_vector_is_the_embedding_of_the_text(exact):
    """embed_spans gives each text the vector embed() gives it, also for a text past 256 tokens."""
    texts = [MIXED, LONG, VOLCANO, ""]
    vectors, _ = exact.embed_spans(texts, [spans_of(t) for t in texts])
    np.testing.assert_allclose(exact.embed(texts), vectors, atol=1e-6)
    assert exact.tokenizer().count(LONG) > exact.tokenizer().max_tokens


def test_pooled_sentence_is_unit_norm_and_closest_to_its_own_sentence(exact):
    """Each sentence's pooled vector has norm 1 and is nearest to that sentence embedded alone."""
    spans = spans_of(MIXED)
    _, (pooled,) = exact.embed_spans([MIXED], [spans])
    alone = exact.embed([MIXED[a:b] for a, b in spans])
    np.testing.assert_allclose(np.ones(3), np.linalg.norm(pooled, axis=1), atol=1e-5)
    assert [0, 1, 2] == np.argmax(pooled @ alone.T, axis=1).tolist()


def test_a_sentence_past_the_max_length_gets_its_own_tokens(exact):
    """A sentence beyond the first window is pooled from a later window, not the text's vector."""
    spans = spans_of(LONG)
    vectors, (pooled,) = exact.embed_spans([LONG], [spans])
    last = pooled[-1]
    volcano, ledger = exact.embed([VOLCANO, LONG[slice(*spans[0])]])
    assert VOLCANO == LONG[slice(*spans[-1])]
    assert float(last @ volcano) > 0.7
    assert float(last @ volcano) > float(last @ ledger)
    assert float(last @ volcano) > float(vectors[0] @ volcano)


def test_bfloat16_stays_within_a_hair_of_float32(exact):
    """bfloat16 span passes keep a cosine above 0.999 with float32 for texts and sentences."""
    fast = SentenceTransformerEmbedder(cache_size=0, span_precision="bfloat16")
    texts = [MIXED, LONG]
    spans = [spans_of(t) for t in texts]
    v32, p32 = exact.embed_spans(texts, spans)
    v16, p16 = fast.embed_spans(texts, spans)
    assert float(np.min(np.sum(v32 * v16, axis=1))) > 0.999
    for a, b in zip(p32, p16, strict=True):
        assert float(np.min(np.sum(a * b, axis=1))) > 0.999


def test_results_are_cached_per_text_and_spans(embedder):
    """A second call with the same text and spans runs no model; other spans do."""
    fresh = SentenceTransformerEmbedder(span_precision=embedder.span_precision)
    first = fresh.embed_spans([MIXED], [spans_of(MIXED)])
    assert 1 == fresh.texts_embedded
    again = fresh.embed_spans([MIXED], [spans_of(MIXED)])
    assert 1 == fresh.texts_embedded
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1][0], again[1][0])
    fresh.embed_spans([MIXED], [spans_of(MIXED)[:1]])
    assert 2 == fresh.texts_embedded
    assert ((0, fresh.dimension), []) == (fresh.embed_spans([], [])[0].shape, [])


def test_the_cache_is_bounded_by_the_vectors_it_holds(embedder):
    """cache_size counts vectors: a text with two spans holds three, and a fourth evicts it."""
    fresh = SentenceTransformerEmbedder(cache_size=4, span_precision=embedder.span_precision)
    two = [(0, len(VOLCANO)), (len(VOLCANO) + 1, len(VOLCANO) + 1 + len(BREAD))]
    fresh.embed_spans([MIXED], [two])
    fresh.embed_spans([MIXED], [two])
    assert 1 == fresh.texts_embedded
    fresh.embed_spans([VOLCANO], [[(0, 10)]])  # 3 + 2 vectors: the older entry goes
    fresh.embed_spans([MIXED], [two])
    assert 3 == fresh.texts_embedded


def test_threads_get_exactly_what_one_caller_gets(embedder):
    """Sixteen threads at once get, bit for bit, the vectors each text gets alone."""
    texts = [f"Question {i} about owls. {VOLCANO} {BREAD if i % 2 else CHESS}" for i in range(16)]
    spans = [spans_of(t) for t in texts]
    fresh = SentenceTransformerEmbedder(cache_size=0, span_precision=embedder.span_precision)
    alone = [fresh.embed_spans([t], [s]) for t, s in zip(texts, spans, strict=True)]
    got: dict[int, tuple[np.ndarray, list[np.ndarray]]] = {}
    start = threading.Barrier(16)

    def work(i: int) -> None:
        start.wait(WAIT)
        j = (i + 1) % 16
        got[i] = fresh.embed_spans([texts[i], texts[j]], [spans[i], spans[j]])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    for i in range(16):
        j = (i + 1) % 16
        assert np.array_equal(np.vstack([alone[i][0], alone[j][0]]), got[i][0])
        assert np.array_equal(alone[i][1][0], got[i][1][0])
        assert np.array_equal(alone[j][1][0], got[i][1][1])


def test_a_model_that_does_not_mean_pool_embeds_spans_separately(tmp_path: Path):
    """With CLS pooling the spans are embedded as texts of their own, matching embed()."""
    source = Path(default_model_path())
    for entry in source.iterdir():
        if entry.name != "1_Pooling":
            os.symlink(entry, tmp_path / entry.name)
    (tmp_path / "1_Pooling").mkdir()
    config = {"word_embedding_dimension": 384, "pooling_mode_cls_token": True}
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    cls = SentenceTransformerEmbedder(str(tmp_path), span_precision="float32")
    spans = spans_of(MIXED)
    vectors, (pooled,) = cls.embed_spans([MIXED], [spans])
    np.testing.assert_allclose(cls.embed([MIXED]), vectors, atol=1e-6)
    np.testing.assert_allclose(cls.embed([MIXED[a:b] for a, b in spans]), pooled, atol=1e-6)


def test_bad_arguments_are_refused(exact):
    """A bare string, unmatched span lists, a span outside its text or a bad precision fail."""
    with pytest.raises(ConfigError):
        exact.embed_spans("text", [[(0, 1)]])
    with pytest.raises(InputError):
        exact.embed_spans(["a", "b"], [[(0, 1)]])
    with pytest.raises(InputError):
        exact.embed_spans(["short"], [[(2, 40)]])
    with pytest.raises(ConfigError):
        SentenceTransformerEmbedder(span_precision="float16")
