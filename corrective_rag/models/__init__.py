"""Embedding models and token counting: loaded lazily, shared by store, judge and loop."""

from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.models.tokens import TiktokenCounter

__all__ = [
    "SentenceTransformerEmbedder",
    "TiktokenCounter",
]
