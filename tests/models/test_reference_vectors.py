"""The reference vectors that ship with the package are the shipped model's, computed by torch."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.models.onnx_export import REFERENCE_TEXTS, SHIPPED_REFERENCE, shipped_reference
from corrective_rag.models.source import default_model_path


def test_the_shipped_vectors_are_torchs_vectors_of_the_reference_texts() -> None:
    """``reference_vectors.json`` holds what torch computes from the shipped weights, each text
    alone, for the reference texts the export checks; ``scripts/reference_vectors.py`` wrote it."""
    shipped = json.loads(SHIPPED_REFERENCE.read_text(encoding="utf-8"))
    weights = Path(default_model_path()) / shipped["weights"]
    assert shipped["weights_size"] == weights.stat().st_size
    assert shipped["weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert list(REFERENCE_TEXTS) == shipped["texts"]
    torch = SentenceTransformerEmbedder(cache_size=0, batch_size=1).embed(list(REFERENCE_TEXTS))
    np.testing.assert_allclose(torch, np.asarray(shipped["vectors"]), atol=1e-6)
    assert shipped["vectors"] == shipped_reference(default_model_path())


def test_another_model_folder_has_no_shipped_reference(tmp_path: Path) -> None:
    """A folder whose weights differ from the shipped ones (another model, another release) gets
    none: its reference is computed with torch instead."""
    (tmp_path / "model.safetensors").write_bytes(b"not the shipped weights")
    assert shipped_reference(str(tmp_path)) is None
    assert shipped_reference(str(tmp_path / "missing")) is None
