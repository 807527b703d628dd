"""The hybrid store: BM25 and dense legs over the same documents, fused."""
