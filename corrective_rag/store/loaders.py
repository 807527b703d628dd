"""Turn files into Documents: plain text, Markdown, JSONL records and BEIR corpora.

* ``.txt`` / ``.md`` / ``.markdown``: the whole file is one text; chunk ids are ``PATH#0``,
  ``PATH#1``, ...
* ``.jsonl``: one JSON object per line, with ``id`` and ``text`` fields, or BEIR's ``_id``,
  ``title`` and ``text`` (the title is indexed in front of the text, and kept as metadata). A
  record's flat ``metadata`` object is kept. A record that fits one window keeps its id; a longer
  one becomes ``ID#0``, ``ID#1``, ...
* a directory: every supported file below it, in sorted order.

Long texts are split into overlapping token windows (:meth:`TiktokenCounter.windows`). Every
chunk's metadata says where it came from: ``source`` (the path), ``chunk`` (0-based), ``start``
and ``end`` (character offsets into the file's text or the record's text) and, for JSONL,
``line`` (1-based).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import structlog

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import check_int, is_int
from corrective_rag.models.tokens import TiktokenCounter
from corrective_rag.types import Document

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_OVERLAP",
    "chunk_text",
    "iter_documents",
    "load_documents",
]

# 256 tokens is what all-MiniLM-L6-v2 reads before truncating; a longer chunk would be embedded
# only in part. 32 tokens of overlap keep a sentence cut at a boundary whole in one of the two.
DEFAULT_CHUNK_TOKENS = 256
DEFAULT_OVERLAP = 32
TEXT_SUFFIXES = (".txt", ".md", ".markdown")
JSONL_SUFFIXES = (".jsonl",)

PathArg = str | os.PathLike[str]

log = structlog.get_logger(__name__)


class EmptyRecordError(InputError):
    """A JSONL record with neither title nor text (skipped with ``skip_empty=True``)."""


def _expand(paths: PathArg | Iterable[PathArg]) -> Iterator[Path]:
    if isinstance(paths, str | os.PathLike):
        items: list[Any] = [paths]
    elif isinstance(paths, bytes) or not isinstance(paths, Iterable):
        raise InputError(f"paths must be a path or an iterable of paths, got {paths!r}")
    else:
        items = list(paths)
    for item in items:
        if not isinstance(item, str | os.PathLike) or not str(item):
            raise InputError(f"expected a file or folder path, got {item!r}")
        path = Path(item)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and child.suffix.lower() in TEXT_SUFFIXES + JSONL_SUFFIXES:
                    yield child
        elif path.is_file():
            yield path
        else:
            raise InputError(f"{path}: no such file or directory")


def _chunks(
    base_id: str,
    text: str,
    meta: Mapping[str, Any],
    *,
    counter: TiktokenCounter | None,
    size: int | None,
    overlap: int,
    always_number: bool,
) -> Iterator[Document]:
    if size is None or counter is None:
        windows = [(0, len(text), text)]
    else:
        windows = [(w.start, w.end, w.text) for w in counter.windows(text, size, overlap)]
    windows = [w for w in windows if w[2].strip()]
    single = len(windows) == 1 and not always_number
    for i, (start, end, chunk) in enumerate(windows):
        doc_id = base_id if single else f"{base_id}#{i}"
        yield Document(doc_id, chunk, {**meta, "chunk": i, "start": start, "end": end})


def _check_window(chunk_tokens: object, overlap: object) -> None:
    size = check_int(chunk_tokens, "chunk_tokens", minimum=1)
    step_back = check_int(overlap, "overlap")
    if not 0 <= step_back < size:
        raise ConfigError(f"overlap must be in 0..{size - 1}, got {step_back}")


def chunk_text(
    base_id: str,
    text: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    counter: TiktokenCounter | None = None,
) -> list[Document]:
    """Split one text (a fetched web page, say) the way files are split: ids ``BASE#0``, ...

    Each chunk's metadata is ``metadata`` plus ``chunk``, ``start`` and ``end``.

    Raises:
        ConfigError: ``chunk_tokens`` or ``overlap`` out of range.
        InputError: an id or a text a Document cannot hold.
    """
    _check_window(chunk_tokens, overlap)
    options: dict[str, Any] = {
        "counter": counter or TiktokenCounter(),
        "size": chunk_tokens,
        "overlap": overlap,
    }
    return list(_chunks(base_id, text, metadata or {}, always_number=True, **options))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc})") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc


def _record(path: Path, number: int, line: str) -> tuple[str, str, dict[str, Any]]:
    where = f"{path}:{number}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: invalid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise InputError(f"{where}: JSON nested too deeply") from exc
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    doc_id = obj.get("_id", obj.get("id"))
    if is_int(doc_id):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise InputError(f"{where}: needs a non-empty string 'id' (or BEIR '_id')")
    text = obj.get("text", "")
    title = obj.get("title", "")
    if not isinstance(text, str) or not isinstance(title, str):
        raise InputError(f"{where}: 'text' and 'title' must be strings")
    full = f"{title}\n{text}" if title.strip() and text.strip() else (text or title)
    if not full.strip():
        raise EmptyRecordError(f"{where}: record {doc_id!r} has no text")
    meta: dict[str, Any] = {}
    extra = obj.get("metadata") or {}
    if not isinstance(extra, dict):
        raise InputError(f"{where}: 'metadata' must be an object")
    for key, value in extra.items():
        if isinstance(value, str | int | float | bool):
            meta[str(key)] = value
    if title.strip():
        meta["title"] = title
    meta.update({"source": str(path), "line": number})
    return doc_id, full, meta


def iter_documents(
    paths: PathArg | Iterable[PathArg],
    *,
    chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    counter: TiktokenCounter | None = None,
    skip_empty: bool = False,
) -> Iterator[Document]:
    """Yield Documents from files, one file (and one JSONL line) at a time.

    Args:
        paths: a file, a directory, or several of them.
        chunk_tokens: window size in tokens; ``None`` keeps every text whole (benchmarks, where
            ids must match the relevance judgements).
        overlap: tokens shared by consecutive windows (0..chunk_tokens-1).
        counter: the tokenizer that measures windows (cl100k_base by default).
        skip_empty: skip (and log) JSONL records with no text instead of raising; some public
            corpora (Cranfield) have a few.

    Raises:
        InputError: a file is missing, unreadable, not UTF-8, of an unknown kind, a JSONL line
            is bad, a text holds NUL or invalid Unicode, or a document id repeats (the message
            names the file and line).
        ConfigError: ``chunk_tokens`` or ``overlap`` out of range.
    """
    if chunk_tokens is not None:
        _check_window(chunk_tokens, overlap)
        counter = counter or TiktokenCounter()
    options: dict[str, Any] = {"counter": counter, "size": chunk_tokens, "overlap": overlap}
    seen: dict[str, str] = {}  # id -> where it came from: a repeated id would overwrite silently
    for doc, where in _located(_expand(paths), options, skip_empty):
        if doc.id in seen:
            raise InputError(f"{where}: duplicate document id {doc.id!r} (first at {seen[doc.id]})")
        seen[doc.id] = where
        yield doc


def _located(
    files: Iterable[Path], options: dict[str, Any], skip_empty: bool
) -> Iterator[tuple[Document, str]]:
    """Each file's documents with the place (file, or file:line) each one came from."""
    for path in files:
        suffix = path.suffix.lower()
        if suffix in TEXT_SUFFIXES:
            text = _read_text(path)
            if not text.strip():
                raise InputError(f"{path}: file is empty")
            try:
                for doc in _chunks(
                    str(path), text, {"source": str(path)}, always_number=True, **options
                ):
                    yield doc, str(path)
            except InputError as exc:  # NUL or an unencodable character in the text
                raise InputError(f"{path}: {exc}") from exc
        elif suffix in JSONL_SUFFIXES:
            try:
                with path.open(encoding="utf-8") as fh:
                    for number, line in enumerate(fh, start=1):
                        if not line.strip():
                            continue
                        try:
                            doc_id, text, meta = _record(path, number, line)
                        except EmptyRecordError as exc:
                            if not skip_empty:
                                raise
                            log.info("empty_record_skipped", detail=str(exc))
                            continue
                        try:
                            chunks = list(
                                _chunks(doc_id, text, meta, always_number=False, **options)
                            )
                        except InputError as exc:  # a bad id or text, named with its line
                            raise InputError(f"{path}:{number}: {exc}") from exc
                        for doc in chunks:
                            yield doc, f"{path}:{number}"
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}: not UTF-8 text ({exc})") from exc
        else:
            raise InputError(f"{path}: unsupported file type {suffix or '(none)'!r}")


def load_documents(
    paths: PathArg | Iterable[PathArg],
    *,
    chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    counter: TiktokenCounter | None = None,
    skip_empty: bool = False,
) -> list[Document]:
    """All Documents from ``paths`` as a list (see :func:`iter_documents`)."""
    return list(
        iter_documents(
            paths,
            chunk_tokens=chunk_tokens,
            overlap=overlap,
            counter=counter,
            skip_empty=skip_empty,
        )
    )
