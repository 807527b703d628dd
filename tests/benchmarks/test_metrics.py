"""Retrieval metrics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.metrics import bootstrap_interval, ndcg_at_k, recall_at_k
from corrective_rag.errors import ConfigError, InputError


def test_ndcg_binary_hand_value() -> None:
    """Binary nDCG@3 with hits at ranks 1 and 3 of three relevant is 1.5 / (1 + 1/log2 3 + 1/2)."""
    value = ndcg_at_k(["a", "b", "c", "d"], {"a": 1, "c": 1, "e": 1}, 3)
    assert pytest.approx(1.5 / (1 + 1 / math.log2(3) + 0.5)) == value
    assert pytest.approx(0.703918, abs=1e-6) == value


def test_ndcg_graded_hand_value() -> None:
    """Graded nDCG uses linear gain: grades (1, 2) score (1 + 2/log2 3) / (2 + 1/log2 3)."""
    value = ndcg_at_k(["a", "b"], {"a": 1, "b": 2}, 2)
    assert pytest.approx(0.859719, abs=1e-6) == value


def test_ndcg_perfect_and_empty_rankings() -> None:
    """The ideal ranking scores 1.0 and a ranking without relevant ids 0.0."""
    assert 1.0 == ndcg_at_k(["b", "a", "x"], {"a": 1, "b": 2}, 10)
    assert 0.0 == ndcg_at_k(["x", "y"], {"a": 1}, 10)


def test_recall_binary_and_graded() -> None:
    """Recall counts relevant ids (grade > 0) in the first k, over all relevant ids."""
    assert pytest.approx(2 / 3) == recall_at_k(["a", "b", "c", "d"], {"a": 1, "c": 1, "e": 1}, 3)
    assert 0.5 == recall_at_k(["a", "b"], {"a": 1, "b": 2, "z": 0}, 1)


def test_repeated_ids_count_once() -> None:
    """An id repeated in a ranking counts at its first position only."""
    assert 0.5 == recall_at_k(["a", "a", "b"], {"a": 1, "c": 1}, 2)
    assert pytest.approx(1 / (1 + 1 / math.log2(3))) == ndcg_at_k(["a", "a"], {"a": 1, "c": 1}, 2)


def test_metrics_reject_unjudged_queries_and_bad_k() -> None:
    """Qrels without a relevant document and a k below 1 are refused."""
    with pytest.raises(InputError):
        ndcg_at_k(["a"], {"a": 0}, 10)
    with pytest.raises(ConfigError):
        recall_at_k(["a"], {"a": 1}, 0)


def test_bootstrap_interval_resamples_queries_and_repeats_with_a_seed() -> None:
    """Identical arms give (0, 0); a statistic over the drawn queries moves; a seed repeats."""
    values = np.array([0.0, 1.0, 0.0, 1.0, 1.0])
    assert (0.0, 0.0) == bootstrap_interval(lambda i: float(values[i].mean() - values[i].mean()), 5)
    low, high = bootstrap_interval(lambda i: float(values[i].mean()), 5)
    assert 0.0 <= low < 0.6 < high <= 1.0
    assert (low, high) == bootstrap_interval(lambda i: float(values[i].mean()), 5)
    with pytest.raises(ConfigError):
        bootstrap_interval(lambda i: 0.0, 0)
    with pytest.raises(ConfigError):
        bootstrap_interval(lambda i: 0.0, 5, level=1.0)
