"""Indexing a user's files into a store, one file as one unit.

A file's chunks are replaced together: after a file is indexed, its chunks from an earlier
indexing that the new text no longer has (the file shrank) are deleted, so the store holds
exactly the file's current chunks. A file larger than one write is stored in several; until its
last chunk is stored, its chunks carry ``incomplete: True`` metadata, so that an interrupted
index leaves them marked (and indexing the file again finishes it and clears the mark).

With ``prune=True``, documents of files that were indexed
from one of the given folders but are no longer found there are deleted too. Files are known by
their canonical path (:func:`~corrective_rag.store.loaders.canonical_path`), kept in each
chunk's ``source`` metadata.

BEIR corpora (a folder holding ``corpus.jsonl``, or a file named ``corpus.jsonl``) are indexed
with whole documents, so that ids match the collection's relevance judgements.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrective_rag.errors import InputError
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.chunking import Windower
from corrective_rag.store.loaders import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_OVERLAP,
    PathArg,
    canonical_path,
    iter_documents,
)
from corrective_rag.types import Document

__all__ = [
    "DEFAULT_WRITE_BATCH",
    "INCOMPLETE",
    "IndexReport",
    "index_documents",
    "index_paths",
    "input_bytes",
    "read_paths",
]

log: Any = get_logger(__name__)

DEFAULT_WRITE_BATCH = 256  # documents per store write: bounded memory, one progress step
# Metadata on the chunks of a file whose last chunk is not stored yet (a file larger than one
# write, while it is indexed): an interrupted index leaves them so marked, and indexing the
# file again replaces them. Filter them out with ``where={"incomplete": {"$ne": True}}``.
INCOMPLETE = "incomplete"


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What :func:`index_paths` did."""

    files: int  # files read
    documents: int  # documents written (added or replaced)
    replaced: int  # chunks deleted because their file no longer has them
    pruned: int  # documents deleted because their file is gone
    # (path, reason) of each file skipped as unreadable (``skip_unreadable=True``); what the
    # store held of it is left as it was
    skipped: tuple[tuple[str, str], ...] = ()


def beir_corpus(path: Path) -> Path | None:
    """``corpus.jsonl`` of a BEIR folder (not its queries.jsonl), or None for other paths."""
    if path.is_dir() and (path / "corpus.jsonl").is_file():
        return path / "corpus.jsonl"
    return path if path.name == "corpus.jsonl" else None


def _documents(
    paths: list[Path],
    chunk_tokens: int | None,
    overlap: int,
    counter: Windower | None,
    skip_unreadable: Callable[[Path, str], None] | None = None,
) -> Iterator[Document]:
    beir = [c for c in map(beir_corpus, paths) if c is not None]
    files = [p for p in paths if beir_corpus(p) is None]
    if beir:  # whole documents: ids must match the relevance judgements
        yield from iter_documents(beir, chunk_tokens=None, skip_empty=True)
    if files:
        yield from iter_documents(
            files,
            chunk_tokens=chunk_tokens,
            overlap=overlap,
            counter=counter,
            skip_unreadable=skip_unreadable,
        )


def read_paths(
    paths: PathArg | Iterable[PathArg],
    *,
    chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    counter: Windower | None = None,
    skip_unreadable: Callable[[Path, str], None] | None = None,
) -> Iterator[Document]:
    """The documents :func:`index_paths` writes, file after file, read as they are consumed.

    ``skip_unreadable``: called with each file that cannot be read as text and why, which is
    then skipped whole (see :func:`~corrective_rag.store.loaders.iter_documents`); without it
    such a file raises :class:`~corrective_rag.store.loaders.UnreadableFileError`.

    Raises:
        InputError: a path does not exist (raised at once, before any file is read).
    """
    resolved = _resolved(paths)
    return _documents(resolved, chunk_tokens, overlap, counter, skip_unreadable)


def input_bytes(paths: PathArg | Iterable[PathArg]) -> int:
    """The size in bytes of every file ``paths`` names or holds (what progress is measured in)."""
    total = 0
    for item in [paths] if isinstance(paths, str | os.PathLike) else list(paths):
        path = Path(item)
        files = (p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            try:
                total += file.stat().st_size
            except OSError:  # gone or unreadable: the reading reports it
                continue
    return total


def _resolved(paths: PathArg | Iterable[PathArg]) -> list[Path]:
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    resolved = [Path(canonical_path(p)) for p in items]
    for path in resolved:
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
    return resolved


def index_paths(
    store: Any,
    paths: PathArg | Iterable[PathArg],
    *,
    chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    counter: Windower | None = None,
    prune: bool = False,
    batch: int = DEFAULT_WRITE_BATCH,
    progress: Callable[[int], None] | None = None,
    skip_unreadable: bool = False,
) -> IndexReport:
    """Index files and folders into ``store`` (a :class:`~corrective_rag.store.hybrid.HybridStore`).

    Args:
        store: where to write; needs ``upsert``, ``delete``, ``ids(where=...)`` and ``sources()``.
        paths: files, folders, BEIR corpora.
        chunk_tokens: window size in the embedding model's tokens (``None``: whole texts).
        overlap: tokens shared by consecutive windows.
        counter: the tokenizer (as for :func:`~corrective_rag.store.loaders.iter_documents`).
        prune: also delete documents of files under the given folders that are gone.
        batch: documents per store write.
        progress: called with the number of documents after each write.
        skip_unreadable: skip a file that cannot be read as text (not UTF-8, empty, holding
            NUL) instead of stopping there; the report lists it, and what the store held of it
            is left as it was (pruning does not count it as gone).

    Raises:
        InputError: a path is missing or holds no documents (nothing is deleted then);
            :class:`~corrective_rag.store.loaders.UnreadableFileError` for an unreadable file
            without ``skip_unreadable`` (the files before it are indexed).
    """
    skipped: list[tuple[str, str]] = []
    documents = read_paths(
        paths,
        chunk_tokens=chunk_tokens,
        overlap=overlap,
        counter=counter,
        skip_unreadable=(lambda p, why: skipped.append((str(p), why))) if skip_unreadable else None,
    )
    return index_documents(
        store,
        documents,
        roots=paths,
        prune=prune,
        batch=batch,
        progress=progress,
        skipped=skipped,
    )


def index_documents(
    store: Any,
    documents: Iterable[Document],
    *,
    roots: PathArg | Iterable[PathArg] = (),
    prune: bool = False,
    batch: int = DEFAULT_WRITE_BATCH,
    progress: Callable[[int], None] | None = None,
    skipped: Sequence[tuple[str, str]] = (),
) -> IndexReport:
    """Write :func:`read_paths`' documents, replacing each file's chunks as one unit.

    Args:
        store: as for :func:`index_paths`.
        documents: documents grouped by ``source`` metadata (each file's chunks in a row).
        roots: the paths they were read from (folders among them are pruned).
        prune: delete documents of files under a folder of ``roots`` that were not read.
        batch: documents per store write.
        progress: called with the number of documents after each write.
        skipped: (path, reason) of the files the reading skipped as unreadable, filled while
            ``documents`` is consumed: pruning leaves their documents alone, and the report
            lists them.
    """
    pending: list[Document] = []
    finished: dict[str, set[str]] = {}  # source -> its ids, for files read whole into pending
    seen: dict[str, set[str]] = {}
    early: dict[str, list[Document]] = {}  # chunks stored flagged INCOMPLETE, by source
    written = replaced = 0

    def flush() -> None:
        nonlocal written, replaced
        if pending:
            # A file not yet read to its end is stored flagged; once its last chunk is stored,
            # its flagged chunks are written again plainly (same text: not re-embedded).
            unfinished = current if current not in finished else None
            batch = [_flagged(d) if _source(d) == unfinished else d for d in pending]
            redo = [d for source in finished for d in early.pop(source, [])]
            store.upsert(batch + redo)
            if unfinished is not None:
                early.setdefault(unfinished, []).extend(
                    d for d in pending if _source(d) == unfinished
                )
            written += len(pending)
            if progress is not None:
                progress(len(pending))
            pending.clear()
        for source, ids in finished.items():
            stale = [i for i in store.ids(where={"source": source}) if i not in ids]
            replaced += store.delete(stale) if stale else 0
        finished.clear()

    current: str | None = None
    for doc in documents:
        source = _source(doc)
        if source != current:
            if current is not None:
                finished[current] = seen[current]
            current = source
            seen.setdefault(source, set())
        seen[source].add(doc.id)
        pending.append(doc)
        if len(pending) >= batch:
            flush()
    if current is not None:
        finished[current] = seen[current]
    flush()
    resolved = _resolved(roots)
    if not seen:
        also = f" ({len(skipped)} unreadable files skipped)" if skipped else ""
        raise InputError(f"no documents found in {', '.join(map(str, resolved))}{also}")
    kept = set(seen) | {path for path, _ in skipped}  # a skipped file is not gone
    # nor is anything under a skipped folder (one that could not be listed)
    unlisted = tuple(path + os.sep for path, _ in skipped)
    pruned = _prune(store, resolved, kept, unlisted) if prune else 0
    report = IndexReport(len(seen), written, replaced, pruned, tuple(skipped))
    log.info("indexed", files=report.files, documents=written, replaced=replaced, pruned=pruned)
    return report


def _source(doc: Document) -> str:
    return str(doc.metadata.get("source", ""))


def _flagged(doc: Document) -> Document:
    """``doc`` marked as part of a file whose last chunk is not stored yet."""
    return Document(doc.id, doc.text, {**doc.metadata, INCOMPLETE: True})


def _prune(store: Any, roots: list[Path], present: set[str], unlisted: tuple[str, ...]) -> int:
    """Delete documents whose source lies under one of the folders ``roots`` but was not read.

    Sources in ``present`` or under a folder of ``unlisted`` (each ending in a separator) stay.
    """
    folders = [str(r) + os.sep for r in roots if r.is_dir()]
    if not folders:
        return 0
    gone = [
        s
        for s in store.sources()
        if s not in present and not s.startswith(unlisted) and s.startswith(tuple(folders))
    ]
    deleted = 0
    for source in gone:
        deleted += store.delete(store.ids(where={"source": source}))
    if gone:
        log.info("pruned", files=len(gone), documents=deleted)
    return deleted
