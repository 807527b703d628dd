"""The BM25 leg: parity with rank_bm25 on real text, top-k, filters, lazy rebuild, persistence."""

from __future__ import annotations

import inspect
import json
import sys

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from corrective_rag.errors import ConfigError, StoreConsistencyError
from corrective_rag.store.bm25 import BM25Index
from corrective_rag.text import tokenize

QUERIES = [
    "parse command line arguments",
    "compress data with zlib",
    "thread pool executor future result",
    "regular expression match groups",
    "temporary files and directories",
]


@pytest.fixture(scope="module")
def stdlib_docs() -> dict[str, str]:
    """Docstrings of stdlib modules and their public functions: real English technical text."""
    import argparse
    import collections
    import concurrent.futures
    import csv
    import difflib
    import email
    import functools
    import gzip
    import heapq
    import itertools
    import json as json_mod
    import logging
    import os
    import pathlib
    import random
    import re
    import shutil
    import socket
    import sqlite3
    import statistics
    import string
    import subprocess
    import tempfile
    import textwrap
    import threading
    import zlib

    docs: dict[str, str] = {}
    for module in (
        argparse,
        collections,
        csv,
        difflib,
        functools,
        gzip,
        json_mod,
        logging,
        os,
        pathlib,
        re,
        shutil,
        socket,
        sqlite3,
        string,
        tempfile,
        textwrap,
        threading,
        zlib,
        concurrent.futures,
        email,
        heapq,
        itertools,
        random,
        statistics,
        subprocess,
        sys,
    ):
        for name, obj in [(module.__name__, module), *inspect.getmembers(module)]:
            doc = inspect.getdoc(obj) if not name.startswith("_") else None
            if doc and tokenize(doc):
                docs.setdefault(f"{module.__name__}.{name}", doc)
    assert len(docs) > 500
    return docs


@pytest.mark.parametrize("prefer_fast", [True, False])
def test_scores_equal_rank_bm25(stdlib_docs: dict[str, str], prefer_fast: bool) -> None:
    """Every document's score and every idf equal rank_bm25.BM25Okapi's over the same tokens."""
    index = BM25Index(prefer_fast=prefer_fast)
    index.upsert(stdlib_docs.items())
    reference = BM25Okapi([tokenize(t) for t in stdlib_docs.values()], k1=1.5, b=0.75, epsilon=0.25)
    for query in QUERIES:
        ids, scores = index.scores(tokenize(query))
        assert list(stdlib_docs) == ids
        np.testing.assert_allclose(reference.get_scores(tokenize(query)), scores, rtol=1e-12)
    for term in ["file", "thread", "compress", "the", "zzzunseen"]:
        assert pytest.approx(reference.idf.get(term, 0.0), rel=1e-12) == index.idf(term)


def test_fast_implementation_is_used_when_installed() -> None:
    """rank_bm25_rs, installed here as the 'fast' extra, is picked by default."""
    assert "rank_bm25_rs" == BM25Index().implementation
    assert "rank_bm25" == BM25Index(prefer_fast=False).implementation


def test_top_k_is_sorted_and_matches_full_scores(stdlib_docs: dict[str, str]) -> None:
    """top_k returns the k best positive scores, best first, as the full score vector ranks them."""
    index = BM25Index()
    index.upsert(stdlib_docs.items())
    ids, scores = index.scores(tokenize(QUERIES[0]))
    expected = [ids[i] for i in np.argsort(-scores, kind="stable")[:10]]
    top = index.top_k(QUERIES[0], 10)
    assert expected == [doc_id for doc_id, _ in top]
    assert all(s > 0 for _, s in top)


FILLER = [(f"f{i}", f"filler text number {i}") for i in range(6)]


def test_top_k_respects_allowed_ids_and_skips_non_matching() -> None:
    """Only allowed ids are returned, and documents matching no query token are left out."""
    index = BM25Index()
    index.upsert([("a", "red apples"), ("b", "green apples"), ("c", "blue sky"), ("d", "red car")])
    index.upsert(FILLER)  # rank_bm25 gives idf 0 to a term in exactly half the documents
    assert ["b"] == [i for i, _ in index.top_k("apples", 5, allowed={"b", "c"})]
    assert {"a", "b", "d"} == {i for i, _ in index.top_k("red apples", 10)}
    with pytest.raises(ConfigError):
        index.top_k("apples", 0)


def test_writes_rebuild_lazily_and_deletes_apply() -> None:
    """Upserts and deletes show in the next query; an empty index returns nothing."""
    index = BM25Index()
    assert [] == index.top_k("anything", 3)
    index.upsert([("a", "alpha beta"), ("b", "gamma"), *FILLER])
    assert ["a"] == [i for i, _ in index.top_k("alpha", 3)]
    index.upsert([("a", "delta")])
    index.delete(["b", "missing"])
    assert [] == index.top_k("alpha", 3)
    assert ["a"] + [i for i, _ in FILLER] == index.ids()


def test_save_and_load_round_trip(tmp_path) -> None:
    """A saved index loads back with the same tokens, scores and stamp."""
    index = BM25Index()
    index.upsert([("a", "Sorting algorithms compared"), ("b", "Hash tables and sorting")])
    path = str(tmp_path / "bm25.json")
    index.save(path, "stamp-1")
    loaded, stamp = BM25Index.load(path)
    assert "stamp-1" == stamp
    assert index.top_k("sorting hash", 2) == loaded.top_k("sorting hash", 2)


def test_load_rejects_corrupt_file(tmp_path) -> None:
    """A truncated or foreign file is reported as a consistency error."""
    path = tmp_path / "bm25.json"
    path.write_text('{"format": 1, "ids": [')
    with pytest.raises(StoreConsistencyError):
        BM25Index.load(str(path))
    path.write_text(json.dumps({"format": 99}))
    with pytest.raises(StoreConsistencyError):
        BM25Index.load(str(path))
