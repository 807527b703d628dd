"""Keeping a persistent store's two sides together on disk: the writer lock and the open check.

A persistent store is a directory holding chromadb's files and ``bm25-<collection>.json``. Each
committed write stamps both sides with the same fresh version stamp (the JSON file and the chroma
collection's metadata). At open, a BM25 file whose stamp or ids differ from chroma's is rebuilt
from the documents chroma stores, and the repair is logged; if even that fails the store refuses
to open (:class:`~corrective_rag.errors.StoreConsistencyError`) rather than serve a stale index.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable

import structlog

from corrective_rag.errors import StoreConsistencyError, StoreLockedError
from corrective_rag.store.bm25 import BM25Index
from corrective_rag.store.dense import DenseIndex

__all__ = [
    "WriterLock",
    "bm25_path",
    "load_consistent",
    "new_stamp",
    "readable_copy",
    "rebuild",
    "store_state",
]

log = structlog.get_logger(__name__)

LOCK_NAME = ".corrective_rag.lock"
MARKER = "chroma.sqlite3"  # a folder holding it is a store (chroma writes it at the first open)


def store_state(directory: str) -> str:
    """What ``directory`` is: a ``"store"``, ``"empty"``, ``"missing"``, ``"file"`` or ``"other"``.

    A folder holding only our lock file counts as empty; ``"other"`` is a folder of other files.
    """
    if not os.path.exists(directory):
        return "missing"
    if not os.path.isdir(directory):
        return "file"
    names = set(os.listdir(directory))
    if MARKER in names:
        return "store"
    return "empty" if names <= {LOCK_NAME} else "other"


def readable_copy(directory: str) -> tuple[str, Callable[[], None]]:
    """A folder chromadb can open for reading ``directory``, and how to clean it up.

    chromadb writes to its database even to read (it opens it for writing), so a folder this
    process cannot write to is copied to a temporary folder first (logged: it costs the size
    of the store). A writable folder is used in place.
    """
    if os.access(directory, os.W_OK) and os.access(os.path.join(directory, MARKER), os.W_OK):
        return directory, lambda: None
    tmp = tempfile.mkdtemp(prefix="crag-readonly-")
    copy = os.path.join(tmp, "store")
    shutil.copytree(directory, copy, ignore=shutil.ignore_patterns(LOCK_NAME))
    for root, dirs, files in os.walk(copy):  # copies keep the read-only modes
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o700 if name in dirs else 0o600)
    os.chmod(copy, 0o700)
    log.info("store_read_from_copy", directory=directory, copy=copy)
    return copy, lambda: shutil.rmtree(tmp, ignore_errors=True)


def new_stamp() -> str:
    """A fresh version stamp."""
    return uuid.uuid4().hex


def bm25_path(directory: str, collection: str) -> str:
    """Where the BM25 side of ``collection`` is saved inside ``directory``."""
    return os.path.join(directory, f"bm25-{collection}.json")


class WriterLock:
    """An exclusive ``fcntl.flock`` on ``DIR/.corrective_rag.lock``, held until :meth:`release`.

    flock locks belong to an open file, so a second store on the same directory is refused even
    inside the same process, and the lock vanishes with the process if it dies.
    """

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LOCK_NAME)
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


def rebuild(dense: DenseIndex, *, prefer_fast: bool = True) -> BM25Index:
    """Build the BM25 side from the documents chroma stores."""
    index = BM25Index(prefer_fast=prefer_fast)
    try:
        index.upsert(dense.iter_all())
    except Exception as exc:
        raise StoreConsistencyError(
            f"cannot rebuild BM25 from the dense side's documents: {exc}"
        ) from exc
    return index


def load_consistent(
    directory: str,
    collection: str,
    dense: DenseIndex,
    *,
    prefer_fast: bool = True,
    read_only: bool = False,
) -> tuple[BM25Index, str | None]:
    """Load the saved BM25 side, checked against chroma; repair it (logged) when they disagree.

    Returns the index and the stamp both sides now carry. With ``read_only`` a repair is made
    in memory only and nothing is written.
    """
    path = bm25_path(directory, collection)
    dense_stamp = dense.stamp
    reason: str | None = None
    if os.path.exists(path):
        try:
            index, stamp = BM25Index.load(path, prefer_fast=prefer_fast)
        except StoreConsistencyError as exc:
            reason = str(exc)
        else:
            if stamp != dense_stamp:
                reason = f"stamp {stamp} differs from chroma's {dense_stamp}"
            elif set(index.ids()) != dense.all_ids():
                reason = "document ids differ from chroma's"
            else:
                return index, stamp
    elif dense.count() or dense_stamp is not None:
        reason = f"{path} is missing"
    if reason is None:  # a new, empty store
        index = BM25Index(prefer_fast=prefer_fast)
    else:
        index = rebuild(dense, prefer_fast=prefer_fast)
        log.warning(
            "bm25_repaired", path=path, reason=reason, documents=len(index), saved=not read_only
        )
    if read_only:
        return index, dense_stamp
    stamp = new_stamp()
    try:
        index.save(path, stamp)
        dense.set_stamp(stamp)
    except Exception as exc:
        raise StoreConsistencyError(f"cannot write the repaired BM25 side {path}: {exc}") from exc
    return index, stamp
