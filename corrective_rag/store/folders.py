"""What a store's folder may be, checked before anything is written into it (every backend).

A folder is a store when it holds its engine's marker file (chromadb's ``chroma.sqlite3``,
qdrant-client's ``meta.json``). Only ``index`` creates a store, in a new or empty folder; every
other command needs an existing store; a folder of other files is refused either way. No file a
command writes may lie inside the store it reads (:func:`check_outside_store`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from corrective_rag.errors import ConfigError, InputError, StoreError
from corrective_rag.store.persist import LOCK_NAME

__all__ = [
    "NewFolder",
    "check_outside_store",
    "check_store_folder",
    "is_store",
    "store_state",
]

# Files a folder may hold and still count as empty: our writer lock, and qdrant-client's
# own lock (it writes it on open, before any collection exists).
_LOCKS = frozenset({LOCK_NAME, ".lock"})
# The marker files of every backend's folder (chroma_open.MARKER, qdrant.QDRANT_MARKER): kept
# here as names, so that this module imports neither engine.
_MARKERS = frozenset({"chroma.sqlite3", "meta.json"})


def store_state(directory: str, marker: str) -> str:
    """What ``directory`` is: a ``"store"``, ``"empty"``, ``"missing"``, ``"file"`` or ``"other"``.

    A store holds ``marker``; a folder holding only lock files counts as empty; ``"other"`` is a
    folder of other files.
    """
    if not os.path.exists(directory):
        return "missing"
    if not os.path.isdir(directory):
        return "file"
    names = set(os.listdir(directory))
    if marker in names:
        return "store"
    return "empty" if names <= _LOCKS else "other"


def is_store(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds a store of any backend (chromadb or Qdrant local mode)."""
    names = set(os.listdir(directory)) if os.path.isdir(directory) else set()
    return bool(names & _MARKERS)


def check_store_folder(directory: str, marker: str, *, create: bool, read_only: bool) -> str:
    """Refuse a ``directory`` that is not a store (or, to create one, empty or missing).

    Returns:
        The folder's :func:`store_state`.

    Raises:
        ConfigError: ``directory`` is a file and the store was to be created.
        StoreError: ``directory`` is a file, a folder that is not a store, or (``create=False``
            or ``read_only``) holds no store.
    """
    state = store_state(directory, marker)
    if state == "file":  # a bad argument for a writer; for a reader, no store to read
        error = ConfigError if create and not read_only else StoreError
        raise error(f"store not found: {directory} exists and is not a directory")
    if state == "other":
        raise StoreError(
            f"{directory} is not a corrective_rag store: it holds other files "
            "(index into a new or empty folder)"
        )
    if state != "store" and (read_only or not create):
        raise StoreError(f"store not found: {directory} (create it with 'corrective-rag index')")
    return state


def check_outside_store(
    outputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
    store: str | os.PathLike[str] | None,
) -> None:
    """Refuse an output path that lies inside the ``store`` folder being read.

    Writing there would overwrite or corrupt the store's own files (a summary written over
    ``chroma.sqlite3`` destroys the store). Paths are compared after resolving links.

    Args:
        outputs: ``(option name, path)`` pairs a command writes (``None`` paths are skipped).
        store: the store's folder (``None``: no local store, nothing to check).

    Raises:
        InputError: an output lies inside the store's folder.
    """
    if store is None:
        return
    folder = Path(store).resolve()
    for name, path in outputs:
        if path is None:
            continue
        target = Path(path).resolve()
        if target == folder or folder in target.parents:
            raise InputError(
                f"{name} {path} lies inside the store folder {store}: writing there would "
                "destroy the store (choose a path outside it)"
            )


class NewFolder:
    """What a folder held before a store was made in it, so that a failed first write can undo it.

    Args:
        directory: the store's folder; ``fresh`` when it is missing or holds only lock files.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path: Path = Path(directory)
        self.existed: bool = self.path.exists()
        self.before: set[str] = set(os.listdir(self.path)) if self.path.is_dir() else set()
        self.fresh: bool = not self.existed or (self.path.is_dir() and self.before <= _LOCKS)

    def remove(self) -> None:
        """Remove what was made since (the folder itself if it was missing); fresh folders only."""
        if not self.fresh or not self.path.is_dir():
            return
        if not self.existed:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        for name in set(os.listdir(self.path)) - self.before:
            target = self.path / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)
