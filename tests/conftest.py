"""Shared test set-up: offline hub, quiet tokenizers, shared heavy fixtures."""

from __future__ import annotations

import os
import tempfile

# Tests never reach a model hub: a wrong model name fails at once instead of retrying the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# The command line reads the judge profile judge-check wrote (~/.config/corrective-rag/...): the
# tests' commands read none but the ones they write themselves.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="corrective-rag-tests-config-")
os.environ.pop("CORRECTIVE_RAG_CALIBRATION", None)

from collections.abc import Iterator

import pytest
import structlog

from corrective_rag.models.embeddings import SentenceTransformerEmbedder

_STRUCTLOG = structlog.get_config()  # as a user's process starts: nothing configured


@pytest.fixture(autouse=True)
def _structlog_as_configured_at_start() -> Iterator[None]:
    """A test that runs the CLI in-process configures structlog (filtering level, renderer):
    put the start's configuration back, so a later test's ``capture_logs`` sees every event."""
    yield
    if structlog.get_config() != _STRUCTLOG:
        structlog.configure(**_STRUCTLOG)


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The real default embedding model, loaded once per test session."""
    return SentenceTransformerEmbedder()
