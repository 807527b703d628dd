"""Embedding models and token counting: loaded lazily, shared by store, judge and loop."""

from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.models.onnx_embedder import OnnxEmbedder, default_embedder
from corrective_rag.models.tokens import TiktokenCounter

__all__ = [
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "TiktokenCounter",
    "default_embedder",
]
