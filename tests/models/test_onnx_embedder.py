"""The ONNX Runtime embedder: torch's vectors within tolerance, from an export cached on disk."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.models import onnx_embedder
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.models.onnx_embedder import OnnxEmbedder, default_embedder
from corrective_rag.store.hybrid import HybridStore

# Real sentences of the kinds a store holds: a query, prose, a title line, text to strip, and a
# text past the model's 256 tokens (the model reads its first 256).
TEXTS = [
    "How do I create a temporary file?",
    "Mount St. Helens erupted explosively in May 1980 in Washington state, killing 57 people.",
    "Sourdough bread rises through the fermentation of wild yeast and lactobacilli.",
    "tempfile — Generate temporary files and directories",
    "   The queen's gambit is a chess opening in which white offers a pawn.  \n",
    " ".join(
        f"Paragraph {i} lists the ledger entries of the accounting office." for i in range(40)
    ),
]


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return SentenceTransformerEmbedder(cache_size=0).embed(TEXTS)


@pytest.fixture(scope="module")
def int8_dir(tmp_path_factory):
    """A cache folder holding the int8 export, made by the first embedder that needs it."""
    folder = tmp_path_factory.mktemp("onnx-int8")
    first = OnnxEmbedder(cache_dir=folder, precision="int8")
    first.embed(["export"])
    assert 1 == first.exports
    return folder


def test_int8_vectors_are_within_tolerance_of_torch(int8_dir, torch_vectors):
    """int8 vectors keep a cosine of at least 0.98 with torch's on each text, 0.99 on average."""
    vectors = OnnxEmbedder(cache_dir=int8_dir, precision="int8", cache_size=0).embed(TEXTS)
    cosines = np.sum(vectors * torch_vectors, axis=1)
    assert (len(TEXTS), 384) == vectors.shape
    assert cosines.min() >= 0.98, cosines
    assert cosines.mean() >= 0.99, cosines
    np.testing.assert_allclose(np.ones(len(TEXTS)), np.linalg.norm(vectors, axis=1), atol=1e-5)


def test_export_is_reused_from_the_cache(int8_dir):
    """A second embedder over the same cache folder loads the file and exports nothing."""
    again = OnnxEmbedder(cache_dir=int8_dir, precision="int8")
    again.embed(["no export this time"])
    assert 0 == again.exports
    assert [again.onnx_path()] == sorted(int8_dir.glob("*.onnx"))


def test_a_vector_does_not_depend_on_the_texts_beside_it(int8_dir):
    """By default each text's vector is the same embedded alone or among others, in order."""
    embedder = OnnxEmbedder(cache_dir=int8_dir, precision="int8", cache_size=0)
    together = embedder.embed(TEXTS)
    alone = np.vstack([embedder.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(alone, together, atol=1e-6)


def test_padded_batches_keep_order_and_tolerance(int8_dir, torch_vectors):
    """In padded batches sorted by length, each row is still its own text's vector."""
    embedder = OnnxEmbedder(cache_dir=int8_dir, precision="int8", cache_size=0, batch_size=4)
    cosines = np.sum(embedder.embed(TEXTS) * torch_vectors, axis=1)
    assert cosines.min() >= 0.98, cosines


def test_corrupt_cache_file_is_exported_again(tmp_path, torch_vectors):
    """A torn file under the export's name is exported again (float32: torch's vectors)."""
    embedder = OnnxEmbedder(cache_dir=tmp_path, precision="float32", cache_size=0)
    path = embedder.onnx_path()
    path.write_bytes(b"\x08\x07not a model, cut short")
    neighbour = tmp_path / "user-notes.txt"
    neighbour.write_text("kept", encoding="utf-8")
    vectors = embedder.embed(TEXTS)
    assert 1 == embedder.exports
    assert path.stat().st_size > 1_000_000
    np.testing.assert_allclose(torch_vectors, vectors, atol=2e-5)
    assert "kept" == neighbour.read_text(encoding="utf-8")
    assert [] == [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_embedding_from_a_cached_export_does_not_import_torch(float32_dir):
    """Once exported, the model embeds, and the offline judge's spans are pooled, without
    torch (seconds to import, unused by `index` and by `run` over a store)."""
    code = (
        "import sys\n"
        "from corrective_rag.models.onnx_embedder import OnnxEmbedder\n"
        f"embedder = OnnxEmbedder(cache_dir={str(float32_dir)!r})\n"
        "assert (1, 384) == embedder.embed(['tea']).shape and 0 == embedder.exports\n"
        "vectors, spans = embedder.embed_spans(['green tea. black tea.'], [[(0, 10), (11, 21)]])\n"
        "assert (1, 384) == vectors.shape and (2, 384) == spans[0].shape\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "False" == out.stdout.strip()


def test_unknown_model_name_goes_the_torch_path():
    """A model other than the shipped default is embedded by torch, as named."""
    named = default_embedder("sentence-transformers/no-such-model")
    assert isinstance(named, SentenceTransformerEmbedder)
    assert not isinstance(named, OnnxEmbedder)
    assert "sentence-transformers/no-such-model" == named.name


def test_default_store_embeds_through_onnx():
    """A store built without an embedder uses the float32 ONNX one (nothing loads yet)."""
    assert "float32" == default_embedder().precision
    with HybridStore.in_memory() as store:
        assert isinstance(store.embedder, OnnxEmbedder)


def test_a_hub_name_is_refused_by_the_onnx_embedder(tmp_path):
    """Exporting needs a local model folder: a hub name is a ConfigError, not a download."""
    with pytest.raises(ConfigError, match="local model folder"):
        OnnxEmbedder("sentence-transformers/no-such-model", cache_dir=tmp_path).embed(["x"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"precision": "int4"}, "precision"), ({"threads": 0}, "threads")],
)
def test_bad_settings_are_refused_early(kwargs, message):
    """A precision or thread count it cannot use is a ConfigError at construction."""
    with pytest.raises(ConfigError, match=message):
        OnnxEmbedder(**kwargs)


def _span_case(text: str) -> list[tuple[int, int]]:
    """Thirds of ``text``, the whole, its last character, and a span past the model's 256
    tokens when the text reaches that far."""
    n = len(text)
    cases = [(0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n), (0, n), (max(n - 1, 0), n)]
    return [*cases, (n - 200, n)] if n > 1500 else cases


def test_onnx_span_vectors_are_torchs(float32_dir):
    """Spans pooled from ONNX Runtime's token vectors are torch's (float32) within 1e-5: the
    same windows past the model's length, a whitespace-only span taking the text's vector."""
    texts = [*TEXTS, "   ", "tea"]
    spans = [_span_case(t) for t in texts]
    spans[-2] = [(0, 3), (1, 2)]  # nothing but whitespace: no token starts inside
    onnx = OnnxEmbedder(cache_dir=float32_dir, cache_size=0)
    assert "float32" == onnx.span_precision
    got_texts, got_spans = onnx.embed_spans(texts, spans)
    torch_ = SentenceTransformerEmbedder(cache_size=0, span_precision="float32")
    want_texts, want_spans = torch_.embed_spans(texts, spans)
    np.testing.assert_allclose(got_texts, want_texts, atol=1e-5)
    for got, want, asked in zip(got_spans, want_spans, spans, strict=True):
        assert (len(asked), 384) == got.shape
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert 1500 < len(TEXTS[-1])  # the text read in more than one window
    assert not np.allclose(got_spans[5][-1], got_texts[5], atol=1e-3)  # its own tokens


def test_bfloat16_spans_still_go_through_torch(float32_dir):
    """Asking for bfloat16 spans keeps torch's autocast path (for CPUs that multiply it)."""
    text = "subprocess.run: Run command with arguments. It returns a CompletedProcess instance."
    spans = [[(0, 40), (41, len(text))]]
    onnx = OnnxEmbedder(cache_dir=float32_dir, cache_size=0, span_precision="bfloat16")
    assert "bfloat16" == onnx.span_precision
    torch_ = SentenceTransformerEmbedder(cache_size=0, span_precision="bfloat16")
    got, want = onnx.embed_spans([text], spans), torch_.embed_spans([text], spans)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1][0], want[1][0])


def test_exporting_leaves_the_span_vectors_of_the_model_unchanged(tmp_path):
    """An embedder that exported its model gives the same torch span vectors (bfloat16 spans
    run on torch) as one that never did: the export traces a copy, not the model spans use."""
    text = "subprocess.run: Run command with arguments. It returns a CompletedProcess instance."
    spans = [[(0, 40), (41, len(text))]]
    exporter = OnnxEmbedder(
        cache_dir=tmp_path, precision="float32", cache_size=0, span_precision="bfloat16"
    )
    exporter.embed(["export"])
    assert 1 == exporter.exports
    after_export = exporter.embed_spans([text], spans)[0]
    plain = SentenceTransformerEmbedder(cache_size=0, span_precision="bfloat16")
    plain = plain.embed_spans([text], spans)[0]
    for expected, got in zip(plain, after_export, strict=True):
        np.testing.assert_allclose(np.asarray(expected), np.asarray(got), atol=1e-6)


def test_a_large_call_is_shared_out_to_single_threaded_sessions_with_the_same_vectors(
    float32_dir, monkeypatch
):
    """Indexing's calls run on one session per core; each text's vector is the one alone."""
    monkeypatch.setattr(onnx_embedder, "_cores", lambda: 2)
    texts = [f"{text} ({i})" for i in range(3) for text in TEXTS]  # PARALLEL_FROM or more
    assert len(texts) >= onnx_embedder.PARALLEL_FROM
    shared = OnnxEmbedder(cache_dir=float32_dir, cache_size=0)
    vectors = shared.embed(texts)
    assert shared._sessions is not None and 2 == len(shared._sessions)
    alone = OnnxEmbedder(cache_dir=float32_dir, cache_size=0, threads=1)
    expected = np.array([alone.embed([t])[0] for t in texts])
    assert alone._sessions is None  # a user's threads= keeps one session
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    few = OnnxEmbedder(cache_dir=float32_dir, cache_size=0)
    few.embed(texts[:2])
    assert few._sessions is None  # a query or two: one session, all its threads
