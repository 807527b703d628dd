"""Keeping a persistent store's two sides together on disk: the writer lock and the open check.

A persistent store is a directory holding chromadb's files and the BM25 side: a snapshot
``bm25-<collection>.json`` and an append-only log ``bm25-<collection>.log``. Each committed write
appends one line to the log, the write's changed tokens with the stamp before and after it, so
a write costs in proportion to its batch, not to the corpus. When the log outgrows the snapshot
(and :data:`COMPACT_MIN_BYTES`), the commit writes a fresh snapshot instead and empties the log:
snapshots are rewritten ever more rarely as the corpus grows, so bytes written stay linear.

Each committed write stamps both sides with the same fresh version stamp (the log line, or the
snapshot, and the chroma collection's metadata). At open, the snapshot is read and the log
replayed along its chain of stamps up to chroma's stamp; lines past it (a write chroma never
confirmed) or torn by a crash are dropped. A BM25 side whose stamp or ids still differ from
chroma's is rebuilt from the documents chroma stores, and the repair is logged; if even that
fails the store refuses to open (:class:`~corrective_rag.errors.StoreConsistencyError`) rather
than serve a stale index.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from typing import Any

from corrective_rag.errors import StoreConsistencyError, StoreLockedError
from corrective_rag.inputs import read_bounded_lines
from corrective_rag.inputs.files import loads_bounded
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.backend import Backend, Stamped, all_texts
from corrective_rag.store.bm25 import MAX_SNAPSHOT_BYTES, BM25Index

__all__ = [
    "SavedBM25",
    "WriterLock",
    "bm25_path",
    "load_bm25",
    "load_consistent",
    "new_stamp",
    "rebuild",
]

log: Any = get_logger(__name__)

LOCK_NAME = ".corrective_rag.lock"


def new_stamp() -> str:
    """A fresh version stamp."""
    return uuid.uuid4().hex


def bm25_path(directory: str, collection: str) -> str:
    """Where the BM25 snapshot of ``collection`` is saved inside ``directory``."""
    return os.path.join(directory, f"bm25-{collection}.json")


# Below 1 MB of log a snapshot is not worth rewriting; above it, the log is compacted once it
# is larger than the snapshot, so each byte of the corpus is rewritten O(1) times on average.
COMPACT_MIN_BYTES = 1 << 20


class SavedBM25:
    """The BM25 side of one collection on disk: a snapshot and an append-only log of writes."""

    def __init__(self, directory: str, collection: str) -> None:
        self.snapshot: str = bm25_path(directory, collection)
        self.log: str = os.path.join(directory, f"bm25-{collection}.log")

    def log_size(self) -> int:
        """The log's length in bytes (0 when there is none)."""
        return os.path.getsize(self.log) if os.path.isfile(self.log) else 0

    def exists(self) -> bool:
        """Whether anything has been saved."""
        return os.path.exists(self.snapshot)

    def load(
        self, target: str | None, *, prefer_fast: bool = True, writable: bool = True
    ) -> tuple[BM25Index, str]:
        """The snapshot with the log replayed up to stamp ``target`` (or to its end).

        Log lines after ``target``, or after a torn line, are cut off when ``writable``.

        Both files are read through :mod:`corrective_rag.inputs.files`. A log line longer than
        any commit writes (the snapshot's size, or ``COMPACT_MIN_BYTES``) is cut like a torn one.

        Raises:
            StoreConsistencyError: the snapshot cannot be read, or the log is not a regular
                file or cannot be read from its first line (the caller rebuilds the BM25 side).
        """
        index, stamp = BM25Index.load(self.snapshot, prefer_fast=prefer_fast)
        if not os.path.lexists(self.log):
            return index, stamp
        end = 0
        # A commit writes a snapshot instead of a log line longer than the snapshot (or than
        # COMPACT_MIN_BYTES): no whole line is longer, so a longer one is damage, cut unread.
        longest = max(os.path.getsize(self.snapshot), COMPACT_MIN_BYTES)
        lines = read_bounded_lines(
            self.log,
            max_bytes=MAX_SNAPSHOT_BYTES,
            max_line_bytes=longest,
            error=StoreConsistencyError,
            ends=True,
        )
        try:
            for _, raw in lines:
                if stamp == target:
                    break
                try:
                    if not raw.endswith(b"\n"):
                        raise ValueError("torn line")
                    entry = loads_bounded(raw, self.log)
                    prev, new, put, gone = entry["prev"], entry["stamp"], entry["put"], entry["del"]
                except (ValueError, KeyError, TypeError) as exc:  # InputError is a ValueError
                    log.warning("bm25_log_cut", path=self.log, offset=end, reason=str(exc))
                    break
                end += len(raw)
                if prev == stamp:  # lines before a compaction's snapshot are skipped
                    index.delete(gone)
                    index.put_tokens({i: t.split() for i, t in put.items()})
                    stamp = new
        except StoreConsistencyError as exc:
            if end == 0:  # not a regular file, or unreadable from its first line: rebuilt
                raise
            log.warning("bm25_log_cut", path=self.log, offset=end, reason=str(exc))
        if writable and os.path.getsize(self.log) > end:
            os.truncate(self.log, end)
        return index, stamp

    def snapshot_now(self, index: BM25Index, stamp: str) -> None:
        """Write a full snapshot with ``stamp`` and empty the log (the snapshot holds it all)."""
        index.save(self.snapshot, stamp)
        if os.path.isfile(self.log) and os.path.getsize(self.log):
            os.truncate(self.log, 0)

    def commit(self, index: BM25Index, prev: str, stamp: str) -> int | None:
        """Save the index's changes since the last commit as the write ``prev`` -> ``stamp``.

        Returns the log's length before the append (what :meth:`undo` cuts back to), or None
        when a snapshot was written instead.
        """
        changes = index.take_changes()
        put = {i: " ".join(t) for i, t in changes.items() if t is not None}
        line = (
            json.dumps(
                {
                    "prev": prev,
                    "stamp": stamp,
                    "put": put,
                    "del": [i for i, t in changes.items() if t is None],
                },
                ensure_ascii=False,
            ).encode("utf-8")
            + b"\n"
        )
        size = self.log_size()
        snapshot = os.path.getsize(self.snapshot) if os.path.isfile(self.snapshot) else 0
        if size + len(line) > max(snapshot, COMPACT_MIN_BYTES):
            self.snapshot_now(index, stamp)
            return None
        with open(self.log, "ab") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        return size

    def undo(self, undo: int | None, index: BM25Index, stamp: str) -> None:
        """Put the files back to the committed state ``stamp`` after a failed write.

        ``index`` must hold that state again; its recorded changes are dropped.
        """
        index.take_changes()
        if undo is None:
            self.snapshot_now(index, stamp)
        elif os.path.isfile(self.log) and os.path.getsize(self.log) > undo:
            os.truncate(self.log, undo)


class WriterLock:
    """An exclusive ``fcntl.flock`` on ``DIR/.corrective_rag.lock``, held until :meth:`release`.

    flock locks belong to an open file, so a second store on the same directory is refused even
    inside the same process, and the lock vanishes with the process if it dies.
    """

    def __init__(self, directory: str) -> None:
        self.path: str = os.path.join(directory, LOCK_NAME)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise StoreLockedError(
                f"store {directory!r} is open by another writer (lock file {self.path})"
            ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd: int | None = fd

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def rebuild(dense: Backend, *, prefer_fast: bool = True) -> BM25Index:
    """Build the BM25 side from the documents the backend stores."""
    index = BM25Index(prefer_fast=prefer_fast)
    try:
        index.upsert(all_texts(dense))
    except Exception as exc:
        raise StoreConsistencyError(
            f"cannot rebuild BM25 from the dense side's documents: {exc}"
        ) from exc
    return index


def load_consistent(
    directory: str,
    collection: str,
    dense: Backend,
    *,
    prefer_fast: bool = True,
    read_only: bool = False,
) -> tuple[BM25Index, str | None]:
    """Load the saved BM25 side, checked against chroma; repair it (logged) when they disagree.

    Returns the index and the stamp both sides now carry. With ``read_only`` a repair is made
    in memory only and nothing is written; otherwise the index records its changes for
    :meth:`SavedBM25.commit`.
    """
    if not isinstance(dense, Stamped):
        raise StoreConsistencyError("a backend whose folder holds the BM25 side must be Stamped")
    saved = SavedBM25(directory, collection)
    dense_stamp = dense.stamp
    reason: str | None = None
    if saved.exists():
        try:
            index, stamp = saved.load(dense_stamp, prefer_fast=prefer_fast, writable=not read_only)
        except (StoreConsistencyError, OSError) as exc:
            reason = str(exc)
        else:
            if stamp != dense_stamp:
                reason = f"stamp {stamp} differs from chroma's {dense_stamp}"
            elif set(index.ids()) != set(dense.ids(None)):
                reason = "document ids differ from chroma's"
            else:
                if not read_only:
                    index.track_changes()
                return index, stamp
    elif dense.count() or dense_stamp is not None:
        reason = f"{saved.snapshot} is missing"
    if reason is None:  # a new, empty store
        index = BM25Index(prefer_fast=prefer_fast)
    else:
        index = rebuild(dense, prefer_fast=prefer_fast)
        log.warning(
            "bm25_repaired",
            path=saved.snapshot,
            reason=reason,
            documents=len(index),
            saved=not read_only,
        )
    if read_only:
        return index, dense_stamp
    stamp = new_stamp()
    try:
        saved.snapshot_now(index, stamp)
        dense.set_stamp(stamp)
    except Exception as exc:
        raise StoreConsistencyError(
            f"cannot write the repaired BM25 side {saved.snapshot}: {exc}"
        ) from exc
    index.track_changes()
    return index, stamp


def load_bm25(
    dense: Backend,
    directory: str | None,
    collection: str,
    *,
    prefer_fast: bool = True,
    read_only: bool = False,
) -> tuple[BM25Index, str | None]:
    """The BM25 side for ``dense`` and the stamp both sides carry.

    Saved in ``directory`` (see :func:`load_consistent`), or, with no directory (a server or an
    in-memory store), built from the dense side's whole corpus, with no stamp.
    """
    if directory is None:
        return rebuild(dense, prefer_fast=prefer_fast), None
    return load_consistent(
        directory, collection, dense, prefer_fast=prefer_fast, read_only=read_only
    )
