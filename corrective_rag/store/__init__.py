"""The hybrid store: BM25 and dense legs over the same documents, fused."""

from corrective_rag.store.fusion import ConvexFusion, Fusion, RRFusion
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.loaders import iter_documents, load_documents

__all__ = [
    "ConvexFusion",
    "Fusion",
    "HybridStore",
    "RRFusion",
    "iter_documents",
    "load_documents",
]
