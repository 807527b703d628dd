"""One write applied to a backend and the BM25 index kept beside it, or to neither.

A write changes the dense side, then BM25, then commits. In memory, committing drops the BM25
index's recorded changes; on disk it saves them under a fresh stamp (BM25 file first, then the
chroma collection's stamp). If any step fails, both sides, and the files, are put back as they
were before the write and the error is raised as :class:`StoreError`; if putting them back fails
too, :class:`StoreConsistencyError` says to reopen the store, which repairs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corrective_rag.errors import StoreConsistencyError, StoreError
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.backend import Backend, Record, Stamped
from corrective_rag.store.bm25 import BM25Index
from corrective_rag.store.persist import SavedBM25, new_stamp
from corrective_rag.types import Document

__all__ = ["Before", "Sides", "apply_write", "delete_documents", "write_documents"]

log: Any = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Sides:
    """Both sides of a store, and where the BM25 side is saved (``None``: in memory only)."""

    dense: Backend
    bm25: BM25Index
    saved: SavedBM25 | None


@dataclass(frozen=True, slots=True)
class Before:
    """What a write is about to change, kept to put both sides back if it fails.

    Attributes:
        ids: every id the write touches.
        previous: the dense records among ``ids`` before the write.
        old_tokens: the BM25 tokens among ``ids`` before the write.
    """

    ids: Sequence[str]
    previous: Mapping[str, Record]
    old_tokens: Mapping[str, list[str]]


def write_documents(
    sides: Sides,
    docs: Sequence[Document],
    embeddings: np.ndarray,
    previous: Mapping[str, Record],
    stamp: str | None,
) -> str | None:
    """Write ``docs`` and their ``embeddings`` to both sides, or to neither.

    ``previous`` holds the stored records among ``docs``' ids, which the write replaces.
    """
    ids = [d.id for d in docs]
    old_tokens = {i: sides.bm25.tokens(i) for i in ids if i in sides.bm25}

    def change() -> None:
        sides.dense.write(docs, embeddings, previous)
        sides.bm25.upsert((d.id, d.text) for d in docs)

    return apply_write(change, Before(ids, previous, old_tokens), sides, stamp)


def delete_documents(sides: Sides, previous: Mapping[str, Record], stamp: str | None) -> str | None:
    """Delete the stored documents ``previous`` from both sides, or from neither."""
    gone = list(previous)
    old_tokens = {i: sides.bm25.tokens(i) for i in gone}

    def change() -> None:
        sides.dense.delete(gone)
        sides.bm25.delete(gone)

    return apply_write(change, Before(gone, previous, old_tokens), sides, stamp)


def apply_write(
    change: Callable[[], None], before: Before, sides: Sides, stamp: str | None
) -> str | None:
    """Run ``change`` on both sides and commit; on any failure put both sides back.

    Args:
        change: writes both sides (dense first, then BM25).
        before: what ``change`` is about to replace.
        sides: the store's two sides.
        stamp: the sides' committed stamp (``None`` in memory).

    Returns:
        The sides' new stamp (``stamp`` itself in memory).

    Raises:
        StoreError: the write failed and was rolled back.
        StoreConsistencyError: it could not be rolled back.
    """
    dense, bm25, saved = sides.dense, sides.bm25, sides.saved
    # Where a failed write cuts the BM25 log back to: its length before the write, then what
    # the commit reports (None: the commit wrote a snapshot instead).
    undo = saved.log_size() if saved is not None else None
    try:
        change()
        if saved is None:
            bm25.take_changes()
            return stamp
        new = new_stamp()
        undo = saved.commit(bm25, stamp or "", new)  # BM25 file first, then chroma
        _stamped(dense).set_stamp(new)
        return new
    except Exception as exc:
        _rollback(before, dense=dense, bm25=bm25, saved=saved, undo=undo, stamp=stamp)
        raise _wrapped(exc) from exc
    except BaseException:
        _rollback(before, dense=dense, bm25=bm25, saved=saved, undo=undo, stamp=stamp)
        raise


def _wrapped(exc: Exception) -> StoreError:
    """The error a failed, rolled-back write raises (keeps our own store errors as they are)."""
    if isinstance(exc, StoreError):
        return StoreError(f"write failed and was rolled back: {exc}")
    return StoreError(f"write failed and was rolled back: {type(exc).__name__}: {exc}")


def _rollback(
    before: Before,
    *,
    dense: Backend,
    bm25: BM25Index,
    saved: SavedBM25 | None,
    undo: int | None,
    stamp: str | None,
) -> None:
    try:
        _restore_dense(dense, before.ids, before.previous)
        bm25.delete([i for i in before.ids if i not in before.old_tokens])
        bm25.put_tokens(before.old_tokens)
        if saved is not None and stamp is not None:
            saved.undo(undo, bm25, stamp)
            _stamped(dense).set_stamp(stamp)
        else:
            bm25.take_changes()
    except Exception as exc:
        log.error("store_rollback_failed", error=str(exc))
        raise StoreConsistencyError(
            f"a failed write could not be rolled back ({exc}); reopen the store to repair it"
        ) from exc
    log.warning("store_write_rolled_back", documents=len(before.ids))


def _stamped(dense: Backend) -> Stamped:
    """The backend as one that keeps a stamp (only stores on disk, which always are, commit one)."""
    if not isinstance(dense, Stamped):
        raise StoreError("a store saved on disk needs a backend that keeps a stamp")
    return dense


def _restore_dense(dense: Backend, new_ids: Sequence[str], previous: Mapping[str, Record]) -> None:
    """Undo a dense write: delete ``new_ids`` new to it, put back the ``previous`` records."""
    dense.delete([i for i in new_ids if i not in previous])
    if previous:
        docs = [r.document for r in previous.values()]
        current = dense.fetch(list(previous))
        vectors = [r.embedding for r in previous.values() if r.embedding is not None]
        dense.write(docs, np.vstack(vectors), current)
