"""The bridge keeps a framework's own scores, whatever real number type they come as."""

from __future__ import annotations

import numpy as np
import pytest

from corrective_rag.integrations.bridge import ranked_hits
from corrective_rag.types import Document

A, B, C = (Document(i, f"text {i}") for i in "abc")


@pytest.mark.parametrize("kind", [np.float32, np.float64, np.float16, np.int64, float, int])
def test_a_numpy_or_python_score_is_kept(kind: type) -> None:
    """A store's numpy float32 score is kept as its value, not replaced by 1/rank."""
    hits = ranked_hits([(A, kind(3)), (B, kind(2))], top_k=2)
    assert [3.0, 2.0] == [h.score for h in hits]
    assert all(type(h.score) is float for h in hits)


@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), True, np.bool_(True), "0.9"])
def test_no_usable_score_falls_back_to_one_over_rank(bad: object) -> None:
    """No score, a non-finite one, a bool or a string gives 1/rank."""
    hits = ranked_hits([(A, 0.9), (B, bad), (C, 0.1)], top_k=3)  # type: ignore[list-item]
    assert [0.9, 0.5, 0.1] == [h.score for h in hits]
