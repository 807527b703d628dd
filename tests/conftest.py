"""Shared test set-up: offline hub, quiet tokenizers, shared heavy fixtures."""

from __future__ import annotations

import os

# Tests never reach a model hub: a wrong model name fails at once instead of retrying the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import pytest

from corrective_rag.models.embeddings import SentenceTransformerEmbedder


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The real default embedding model, loaded once per test session."""
    return SentenceTransformerEmbedder()
