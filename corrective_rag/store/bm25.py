"""The BM25 leg: Okapi BM25 over :func:`corrective_rag.text.tokenize` tokens, by document id.

Scores are exactly those of ``rank_bm25.BM25Okapi`` (k1=1.5, b=0.75, epsilon=0.25). Where
``rank_bm25_rs`` is importable (a plain install brings it wherever it has a wheel) its drop-in
``BM25Okapi`` is used (same floats, ~50x faster queries); otherwise ``rank_bm25`` itself.
``tests/store/test_bm25.py`` checks the parity.

The index is rebuilt lazily: writes only mark it stale, and the next query or ``idf`` rebuilds it
once, so adding 10,000 documents one call at a time costs one rebuild, not 10,000.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np

from corrective_rag.errors import ConfigError, StoreConsistencyError
from corrective_rag.inputs import read_bounded_json
from corrective_rag.observe.logs import get_logger
from corrective_rag.text import tokenize

__all__ = ["BM25Index", "bm25_class"]

log: Any = get_logger(__name__)

K1 = 1.5  # rank_bm25's defaults, kept so that scores match the reference implementation
B = 0.75
EPSILON = 0.25
FORMAT_VERSION = 1
# How save() begins a snapshot: a file in its place that begins otherwise is refused unread.
SNAPSHOT_START = b'{"format": '
# A snapshot holds every document's tokens (about 1.5 KB per 256-token chunk): 64 GiB is tens
# of millions of chunks, far past what one process holds in memory anyway.
MAX_SNAPSHOT_BYTES = 64 << 30
# Bump when corrective_rag.text.tokenize changes: saved tokens of an older version are rebuilt.
TOKENIZER_VERSION = 1


def bm25_class(prefer_fast: bool = True) -> Any:
    """Return ``rank_bm25_rs.BM25Okapi`` when importable (and preferred), else ``rank_bm25``'s."""
    if prefer_fast:
        try:
            from rank_bm25_rs import BM25Okapi as FastOkapi

            return FastOkapi
        except ImportError:
            pass
    from rank_bm25 import BM25Okapi

    return BM25Okapi


class BM25Index:
    """An in-memory BM25 index keyed by document id.

    Args:
        prefer_fast: use ``rank_bm25_rs`` when it is installed (identical scores).
    """

    def __init__(self, *, prefer_fast: bool = True) -> None:
        self._tokens: dict[str, list[str]] = {}
        self._model: Any = None
        self._ids: list[str] = []
        self._position: dict[str, int] = {}
        self._stale = True
        self._lock = threading.RLock()
        self._cls = bm25_class(prefer_fast)
        # id -> tokens (None: deleted) since the last take_changes(); None: not tracked
        self._changes: dict[str, list[str] | None] | None = None

    def track_changes(self) -> None:
        """Start recording writes for :meth:`take_changes` (persistent stores save them)."""
        with self._lock:
            self._changes = {}

    def take_changes(self) -> dict[str, list[str] | None]:
        """The writes since the last call, ``id -> tokens`` (``None``: deleted); forgets them."""
        with self._lock:
            if self._changes is None:
                return {}
            changes, self._changes = self._changes, {}
            return changes

    @property
    def implementation(self) -> str:
        """Module of the BM25 class in use (``rank_bm25_rs`` or ``rank_bm25``)."""
        return str(self._cls.__module__).split(".")[0]

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._tokens

    def ids(self) -> list[str]:
        """Document ids in insertion order."""
        with self._lock:
            return list(self._tokens)

    def tokens(self, doc_id: str) -> list[str]:
        """The stored tokens of one document (a copy)."""
        return list(self._tokens[doc_id])

    def upsert(self, items: Iterable[tuple[str, str]]) -> None:
        """Index ``(id, text)`` pairs, replacing documents with the same id."""
        with self._lock:
            for doc_id, text in items:
                self._tokens[doc_id] = tokenize(text)
                if self._changes is not None:
                    self._changes[doc_id] = self._tokens[doc_id]
            self._stale = True

    def put_tokens(self, items: Mapping[str, list[str]]) -> None:
        """Index already tokenized documents (used when restoring a saved or older state)."""
        with self._lock:
            for doc_id, toks in items.items():
                self._tokens[doc_id] = list(toks)
                if self._changes is not None:
                    self._changes[doc_id] = self._tokens[doc_id]
            self._stale = True

    def delete(self, ids: Iterable[str]) -> None:
        """Remove documents; unknown ids are ignored."""
        with self._lock:
            for doc_id in ids:
                if self._tokens.pop(doc_id, None) is not None and self._changes is not None:
                    self._changes[doc_id] = None
            self._stale = True

    def _built(self) -> Any:
        with self._lock:
            if self._stale:
                self._ids = list(self._tokens)
                self._position = {doc_id: i for i, doc_id in enumerate(self._ids)}
                corpus = [self._tokens[i] for i in self._ids]
                self._model = self._cls(corpus, k1=K1, b=B, epsilon=EPSILON) if corpus else None
                self._stale = False
                log.debug("bm25_rebuilt", documents=len(corpus), implementation=self.implementation)
            return self._model

    def idf(self, term: str) -> float:
        """BM25 idf of one token as the index uses it (0.0 for an unseen token).

        ``term`` is compared as is: pass a token produced by :func:`~corrective_rag.text.tokenize`.
        """
        model = self._built()
        if model is None:
            return 0.0
        return float(model.idf.get(term, 0.0))

    def _snapshot(self) -> tuple[Any, list[str], dict[str, int]]:
        """The built model with its ids and positions, taken together under the lock.

        A write replaces these objects (never mutates them), so a reader keeps a consistent
        view after releasing the lock while a writer goes on.
        """
        with self._lock:
            model = self._built()
            return model, self._ids, self._position

    def scores(self, query_tokens: list[str]) -> tuple[list[str], np.ndarray]:
        """All documents' scores for the tokens: ``(ids, scores)`` in index order."""
        model, ids, _ = self._snapshot()
        if model is None or not query_tokens:
            return ids, np.zeros(len(ids))
        return ids, np.asarray(model.get_scores(query_tokens), dtype=np.float64)

    def top_k(
        self, query: str, k: int, *, allowed: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs for ``query``, best first.

        Documents that match no query token (score 0) are left out, so a leg never votes for a
        document it knows nothing about. ``allowed`` restricts the candidates (metadata filters).
        Ties are broken by insertion order. Safe to call from several threads, also while
        another thread writes (the query sees the index before or after the write).
        """
        if k <= 0:
            raise ConfigError(f"k must be > 0, got {k}")
        model, ids, position = self._snapshot()
        tokens = tokenize(query)
        if model is None or not ids:
            return []
        scores = (
            np.asarray(model.get_scores(tokens), dtype=np.float64) if tokens else np.zeros(len(ids))
        )
        if allowed is not None:
            rows = [position[i] for i in allowed if i in position]
            mask = np.zeros(len(ids), dtype=bool)
            mask[rows] = True
            scores = np.where(mask, scores, 0.0)
        positive = np.flatnonzero(scores > 0.0)
        if positive.size > k:
            # argpartition keeps this O(n) for big corpora; the final sort is over k items only
            part = positive[np.argpartition(-scores[positive], k - 1)[:k]]
            threshold = scores[part].min()
            positive = np.flatnonzero(scores >= threshold)
        order = positive[np.lexsort((positive, -scores[positive]))][:k]
        return [(ids[i], float(scores[i])) for i in order]

    # -- persistence -------------------------------------------------------------------------

    def save(self, path: str, stamp: str) -> None:
        """Write the tokens and ``stamp`` to ``path`` atomically (temp file + ``os.replace``)."""
        with self._lock:
            payload = {
                "format": FORMAT_VERSION,
                "tokenizer": TOKENIZER_VERSION,
                "stamp": stamp,
                "ids": list(self._tokens),
                "tokens": [" ".join(t) for t in self._tokens.values()],
            }
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(payload, fh, ensure_ascii=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    @classmethod
    def load(cls, path: str, *, prefer_fast: bool = True) -> tuple[BM25Index, str]:
        """Read an index written by :meth:`save`; return it with its stamp.

        Read through :mod:`corrective_rag.inputs.files`: a FIFO or a device in its place is
        refused unread, and a file that does not begin as :meth:`save` writes one is refused
        after its first bytes.

        Raises:
            StoreConsistencyError: the file is unreadable, not a regular file, of another
                format, or was tokenized by another tokenizer version (the caller rebuilds it
                from the dense side).
        """
        payload = read_bounded_json(
            path, max_bytes=MAX_SNAPSHOT_BYTES, error=StoreConsistencyError, start=SNAPSHOT_START
        )
        try:
            if payload.get("format") != FORMAT_VERSION:
                raise StoreConsistencyError(f"{path}: unknown BM25 format {payload.get('format')}")
            if payload.get("tokenizer") != TOKENIZER_VERSION:
                raise StoreConsistencyError(f"{path}: tokens come from another tokenizer version")
            ids, tokens, stamp = payload["ids"], payload["tokens"], str(payload["stamp"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StoreConsistencyError(f"cannot read BM25 index {path}: {exc}") from exc
        index = cls(prefer_fast=prefer_fast)
        # tokens never contain spaces (they are \w+ runs), so a space-joined string round-trips
        index.put_tokens({i: t.split() for i, t in zip(ids, tokens, strict=True)})
        return index, stamp
