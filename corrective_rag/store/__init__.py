"""The hybrid store: BM25 and dense legs over the same documents, fused.

The store itself and its loader are :class:`corrective_rag.HybridStore` and
:func:`corrective_rag.load_documents` (their home is the root); here: the fusions and
:func:`iter_documents`.
"""

from corrective_rag.store.fusion import ConvexFusion, Fusion, RRFusion
from corrective_rag.store.loaders import iter_documents

__all__ = [
    "ConvexFusion",
    "Fusion",
    "RRFusion",
    "iter_documents",
]
