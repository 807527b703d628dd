"""Shared fixtures of the model tests: one float32 ONNX export, made once per session."""

from __future__ import annotations

import pytest

from corrective_rag.models.onnx_embedder import OnnxEmbedder


@pytest.fixture(scope="session")
def float32_dir(tmp_path_factory):
    """A cache folder holding the float32 export (and its record)."""
    folder = tmp_path_factory.mktemp("onnx-float32")
    OnnxEmbedder(cache_dir=folder, precision="float32").embed(["export"])
    return folder
