"""The fast BM25 is what a plain install gets, with a clean fallback where it is missing."""

from __future__ import annotations

import sys

import pytest
from setuptools.config.setupcfg import read_configuration

from corrective_rag.store.bm25 import BM25Index
from corrective_rag.text import tokenize

DOCS = {"a": "the moon orbits the earth", "b": "mars has two small moons", "c": "bread and honey"}


def test_plain_install_requires_the_fast_bm25_where_it_has_wheels() -> None:
    """install_requires names rank-bm25-rs, limited to the machines its wheels are built for."""
    requires = read_configuration("setup.cfg")["options"]["install_requires"]
    (fast,) = [r for r in requires if r.startswith("rank-bm25-rs")]
    for machine in ("x86_64", "AMD64", "aarch64", "arm64"):
        assert f'platform_machine == "{machine}"' in fast
    assert any(r.startswith("rank-bm25>=") for r in requires)  # the reference and the fallback


def test_missing_fast_bm25_falls_back_to_rank_bm25(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where rank_bm25_rs cannot be imported the index uses rank_bm25, with the same scores."""
    fast = BM25Index()
    fast.upsert(DOCS.items())
    monkeypatch.setitem(sys.modules, "rank_bm25_rs", None)  # import now raises ImportError
    slow = BM25Index()
    slow.upsert(DOCS.items())
    assert "rank_bm25_rs" == fast.implementation
    assert "rank_bm25" == slow.implementation
    query = tokenize("moon of mars")
    (fast_ids, fast_scores), (slow_ids, slow_scores) = fast.scores(query), slow.scores(query)
    assert fast_ids == slow_ids
    assert fast_scores.tolist() == slow_scores.tolist()
