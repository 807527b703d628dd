"""Turn files into Documents: plain text, Markdown, JSONL records and BEIR corpora.

* ``.txt`` / ``.md`` / ``.markdown``: the whole file is one text; chunk ids are ``PATH#0``,
  ``PATH#1``, ...
* ``.jsonl``: one JSON object per line, with ``id`` and ``text`` fields, or BEIR's ``_id``,
  ``title`` and ``text`` (the title is indexed in front of the text, and kept as metadata). A
  record's flat ``metadata`` object is kept. A record that fits one window keeps its id; a longer
  one becomes ``ID#0``, ``ID#1``, ... A UTF-8 byte-order mark at the start is skipped.
* a directory: every supported file below it, in sorted order; a file named twice (directly and
  through its folder) is read once.

**Canonical ids.** ``PATH`` is the file's canonical path: absolute, with symbolic links,
``.`` and ``..`` resolved (:meth:`pathlib.Path.resolve`). ``in/a.txt``, ``./in/a.txt`` and
``$PWD/in/a.txt`` are the same file and give the same ids, so indexing a file again replaces
its chunks instead of adding a second copy. Moving a folder changes its files' ids.

Texts are split into overlapping windows measured in the embedding model's own tokens
(:class:`~corrective_rag.models.tokenizer.ModelTokenizer`, special tokens included), so that
no chunk is longer than what the model reads: the default of 256 is all-MiniLM-L6-v2's
``max_seq_length``. Files are read and windowed in blocks (:mod:`corrective_rag.store.chunking`):
memory does not grow with a file's size. Every chunk's metadata says where it came from:
``source`` (the canonical path), ``chunk`` (0-based), ``start`` and ``end`` (character offsets
into the file's text or the record's text) and, for JSONL, ``line`` (1-based).
"""

from __future__ import annotations

import codecs
import io
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import check_int, open_regular, read_bounded, read_bounded_lines
from corrective_rag.inputs.files import loads_bounded
from corrective_rag.models.tokenizer import ModelTokenizer
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.checks import MAX_TEXT_CHARS
from corrective_rag.store.chunking import WINDOW_CHARS, Windower, bounded_windows, stream_windows
from corrective_rag.types import Document

# load_documents: its home is corrective_rag
# iter_documents: its home is corrective_rag.store
__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_OVERLAP",
    "UnreadableFileError",
    "canonical_path",
    "chunk_text",
    "unreadable_reason",
]

# 256 tokens (with [CLS] and [SEP]) is what all-MiniLM-L6-v2 reads before truncating; a longer
# chunk would be embedded only in part. The library and the CLI share these two defaults.
# 32 tokens of overlap keep a sentence cut at a boundary whole in one of the two windows.
DEFAULT_CHUNK_TOKENS = 256
DEFAULT_OVERLAP = 32
BLOCK_READ = 1 << 16  # characters per read(); chunking gathers them into larger blocks
# A JSONL record is held whole to be parsed: one record of more than 64 MB (64 documents of the
# most one holds) is refused with its line, before it is read whole. A text file is streamed.
MAX_RECORD_BYTES = 64 << 20
MAX_CORPUS_BYTES = 1 << 40  # one JSONL corpus file: read line by line, bounded all the same
TEXT_SUFFIXES = (".txt", ".md", ".markdown")
JSONL_SUFFIXES = (".jsonl",)

PathArg = str | os.PathLike[str]

log: Any = get_logger(__name__)


class EmptyRecordError(InputError):
    """A JSONL record with neither title nor text (skipped with ``skip_empty=True``)."""


class UnreadableFileError(InputError):
    """A file that cannot be read as text: not UTF-8, empty, holding NUL, or not readable."""


def unreadable_reason(path: Path, *, whole: bool = False) -> str | None:
    """Why ``path`` cannot be indexed as a text or JSONL file, or ``None`` when it can.

    Reads the file once, in blocks (a large file costs no memory): it must be UTF-8 (a BOM is
    fine), hold something besides white space, and hold no NUL character. With ``whole``
    (texts kept whole, not cut into windows), a text file must also fit in one document.
    """
    if path.suffix.lower() not in TEXT_SUFFIXES + JSONL_SUFFIXES:
        return f"unsupported file type {path.suffix.lower() or '(none)'!r}"
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    blank = True
    chars = 0
    try:
        with open_regular(path) as fh:
            while block := fh.read(BLOCK_READ):
                text = decoder.decode(block)
                if "\x00" in text:
                    return "holds NUL characters (binary?)"
                blank = blank and not text.strip()
                chars += len(text)
            blank = blank and not decoder.decode(b"", final=True).strip()
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc})"
    except InputError as exc:  # not a regular file (a FIFO, a device), or cannot be opened
        return str(exc).removeprefix(f"{path}: ")
    except OSError as exc:
        return f"cannot read ({exc})"
    if whole and chars > MAX_TEXT_CHARS and path.suffix.lower() in TEXT_SUFFIXES:
        return _too_long(chars)
    return "file is empty" if blank else None


def _too_long(chars: int) -> str:
    return (
        f"{chars} characters, more than one document holds ({MAX_TEXT_CHARS}), "
        "and texts are kept whole (no chunk_tokens)"
    )


def path_name(path: PathArg) -> str:
    """A file's path as it appears in ids, ``source`` metadata and messages.

    File names are data: a control character (newline, ESC), DEL or an undecodable byte in a
    name is written as its Python escape (backslash n, backslash x1b, ...), so that such a file is
    indexed under a valid id and no name can move the cursor of a terminal that prints it.
    """
    text = str(path)
    if all(" " <= c != "\x7f" and not "\ud800" <= c <= "\udfff" for c in text):
        return text
    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if c < " " or c == "\x7f" or "\ud800" <= c <= "\udfff"
        else c
        for c in text
    )


def canonical_path(path: PathArg) -> str:
    """The spelling-independent form of a file's path used in ids and ``source``.

    Absolute, with symbolic links, ``.`` and ``..`` resolved.
    """
    return str(Path(path).resolve())


def _expand(
    paths: PathArg | Iterable[PathArg], unreadable: Callable[[Path, str], None] | None = None
) -> Iterator[Path]:
    seen: set[Path] = set()
    for path in _walk(paths, unreadable):
        canonical = path.resolve()
        if canonical not in seen:
            seen.add(canonical)
            yield canonical


def _walk(
    paths: PathArg | Iterable[PathArg], unreadable: Callable[[Path, str], None] | None
) -> Iterator[Path]:
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
            for child in _files_under(path, unreadable):
                if child.is_file() and child.suffix.lower() in TEXT_SUFFIXES + JSONL_SUFFIXES:
                    yield child
        elif path.exists():  # a file named on its own: one that is not regular is refused
            yield path
        else:
            raise InputError(f"{path}: no such file or directory")


def _files_under(folder: Path, unreadable: Callable[[Path, str], None] | None) -> list[Path]:
    """Every file under ``folder``, sorted; a folder that cannot be listed is never passed over.

    Without ``unreadable`` it raises :class:`UnreadableFileError`; with it, it is reported
    there like an unreadable file (so that nothing under it counts as gone), and the walk goes on.
    """
    found: list[Path] = []

    def failed(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else folder
        reason = f"cannot read folder ({exc.strerror or exc})"
        if unreadable is None:
            raise UnreadableFileError(f"{path_name(where)}: {reason}") from exc
        log.warning("folder_skipped", path=path_name(where), reason=reason)
        unreadable(where, reason)

    for root, _dirs, names in os.walk(folder, onerror=failed):
        found.extend(Path(root, name) for name in names)
    return sorted(found)


def _chunks(
    base_id: str,
    text: str,
    meta: Mapping[str, Any],
    *,
    counter: Windower | None,
    size: int | None,
    overlap: int,
    always_number: bool,
) -> Iterator[Document]:
    if size is None or counter is None:
        windows = [(0, len(text), text)]
    else:
        cut = bounded_windows(counter.windows(text, size, overlap), WINDOW_CHARS)
        windows = [(w.start, w.end, w.text) for w in cut]
    windows = [w for w in windows if w[2].strip()]
    single = len(windows) == 1 and not always_number
    for i, (start, end, chunk) in enumerate(windows):
        doc_id = base_id if single else f"{base_id}#{i}"
        yield Document(doc_id, chunk, {**meta, "chunk": i, "start": start, "end": end})


def _file_chunks(path: Path, options: dict[str, Any]) -> Iterator[Document]:
    """A text file's chunks ``PATH#i``, read and windowed block by block."""
    name = path_name(path)
    meta = {"source": name}
    counter, size, overlap = options["counter"], options["size"], options["overlap"]
    if size is None or counter is None:
        text = _read_text(path)
        if len(text) > MAX_TEXT_CHARS:
            raise UnreadableFileError(_too_long(len(text)))
        yield from _chunks(name, text, meta, always_number=True, **options)
        return
    try:
        with open_regular(path, error=UnreadableFileError) as raw:
            fh = io.TextIOWrapper(raw, encoding="utf-8-sig")
            blocks = iter(lambda: fh.read(BLOCK_READ), "")
            number = 0
            for w in stream_windows(blocks, counter, size, overlap):
                if w.text.strip():
                    chunk_meta = {**meta, "chunk": number, "start": w.start, "end": w.end}
                    yield Document(f"{name}#{number}", w.text, chunk_meta)
                    number += 1
    except UnicodeDecodeError as exc:
        raise UnreadableFileError(f"not UTF-8 text ({exc})") from exc
    except OSError as exc:
        raise UnreadableFileError(f"cannot read ({exc})") from exc


def _read_text(path: Path) -> str:
    """A text kept whole: at most what one document holds (4 UTF-8 bytes a character)."""
    try:
        raw = read_bounded(path, max_bytes=4 * MAX_TEXT_CHARS + 3, error=UnreadableFileError)
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFileError(f"not UTF-8 text ({exc})") from exc


def _record(path: Path, number: int, line: bytes) -> tuple[str, str, dict[str, Any]]:
    where = f"{path_name(path)}:{number}"
    obj = loads_bounded(line, where)  # not UTF-8, not JSON, nested too deeply: one line
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    doc_id = obj.get("_id", obj.get("id"))
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
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
    meta.update({"source": path_name(path), "line": number})
    return doc_id, full, meta


def _check_window(chunk_tokens: object, overlap: object, counter: Windower | None) -> Windower:
    """Validate a window; return the tokenizer that measures it (the default model's if None)."""
    size = check_int(chunk_tokens, "chunk_tokens", minimum=1)
    step_back = check_int(overlap, "overlap")
    if not 0 <= step_back < size:
        raise ConfigError(f"overlap must be in 0..{size - 1}, got {step_back}")
    counter = counter or ModelTokenizer()
    limit = getattr(counter, "max_tokens", None)
    if isinstance(limit, int) and size > limit:
        raise ConfigError(f"chunk_tokens {size} is more than the embedding model reads ({limit})")
    return counter


def chunk_text(
    base_id: str,
    text: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    counter: Windower | None = None,
) -> list[Document]:
    """Split one text (a fetched web page, say) the way files are split: ids ``BASE#0``, ...

    Each chunk's metadata is ``metadata`` plus ``chunk``, ``start`` and ``end``.

    Raises:
        ConfigError: ``chunk_tokens`` or ``overlap`` out of range.
        InputError: an id or a text a Document cannot hold.
    """
    options: dict[str, Any] = {
        "counter": _check_window(chunk_tokens, overlap, counter),
        "size": chunk_tokens,
        "overlap": overlap,
    }
    return list(_chunks(base_id, text, metadata or {}, always_number=True, **options))


def iter_documents(
    paths: PathArg | Iterable[PathArg],
    *,
    chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    counter: Windower | None = None,
    skip_empty: bool = False,
    skip_unreadable: Callable[[Path, str], None] | None = None,
) -> Iterator[Document]:
    """Yield Documents from files, one file (and one JSONL line) at a time.

    Args:
        paths: a file, a directory, or several of them.
        chunk_tokens: window size in tokens; ``None`` keeps every text whole (benchmarks, where
            ids must match the relevance judgements).
        overlap: tokens shared by consecutive windows (0..chunk_tokens-1).
        counter: the tokenizer that measures windows: the default embedding model's
            (:class:`~corrective_rag.models.tokenizer.ModelTokenizer`) unless given; pass
            ``SentenceTransformerEmbedder(name).tokenizer()`` for another model. A tokenizer
            with ``max_tokens`` refuses a ``chunk_tokens`` above it.
        skip_empty: skip (and log) JSONL records with no text instead of raising; some public
            corpora (Cranfield) have a few.
        skip_unreadable: skip a whole file that cannot be read as text
            (:func:`unreadable_reason`: not UTF-8, empty, holding NUL, unreadable or of an
            unknown kind), calling this with its path and the reason, instead of raising
            :class:`UnreadableFileError`. Each file is then read twice (checked first, so that
            none is half indexed). A folder that cannot be listed is reported the same way.

    Raises:
        InputError: a file is missing, unreadable, not UTF-8, of an unknown kind, a JSONL line
            is bad, a text holds NUL or invalid Unicode, or a document id repeats (the message
            names the file and line).
        ConfigError: ``chunk_tokens`` or ``overlap`` out of range.
    """
    if chunk_tokens is not None:
        counter = _check_window(chunk_tokens, overlap, counter)
    options: dict[str, Any] = {"counter": counter, "size": chunk_tokens, "overlap": overlap}
    seen: dict[str, str] = {}  # id -> where it came from: a repeated id would overwrite silently
    files = _expand(paths, skip_unreadable)
    if skip_unreadable is not None:
        files = _readable(files, skip_unreadable, whole=chunk_tokens is None)
    for doc, where in _located(files, options, skip_empty):
        if doc.id in seen:
            raise InputError(f"{where}: duplicate document id {doc.id!r} (first at {seen[doc.id]})")
        seen[doc.id] = where
        yield doc


def _readable(
    files: Iterable[Path], skipped: Callable[[Path, str], None], *, whole: bool
) -> Iterator[Path]:
    """``files`` without those :func:`unreadable_reason` refuses, each reported to ``skipped``."""
    for path in files:
        reason = unreadable_reason(path, whole=whole)
        if reason is None:
            yield path
        else:
            log.warning("file_skipped", path=path_name(path), reason=reason)
            skipped(path, reason)


def _located(
    files: Iterable[Path], options: dict[str, Any], skip_empty: bool
) -> Iterator[tuple[Document, str]]:
    """Each file's documents with the place (file, or file:line) each one came from."""
    for path in files:
        suffix = path.suffix.lower()
        name = path_name(path)
        if suffix in TEXT_SUFFIXES:
            try:
                empty = True
                for doc in _file_chunks(path, options):
                    empty = False
                    yield doc, name
            except InputError as exc:  # unreadable, or NUL or an unencodable character in it
                said = str(exc)  # the bounded reader's messages name the file already
                raise UnreadableFileError(
                    said if said.startswith(name) else f"{name}: {said}"
                ) from exc
            if empty:
                raise UnreadableFileError(f"{name}: file is empty")
        elif suffix in JSONL_SUFFIXES:
            lines = read_bounded_lines(
                path,
                max_bytes=MAX_CORPUS_BYTES,
                max_line_bytes=MAX_RECORD_BYTES,
                error=UnreadableFileError,
            )
            for number, line in lines:
                try:
                    doc_id, text, meta = _record(path, number, line)
                except EmptyRecordError as exc:
                    if not skip_empty:
                        raise
                    log.info("empty_record_skipped", detail=str(exc))
                    continue
                try:
                    chunks = list(_chunks(doc_id, text, meta, always_number=False, **options))
                except InputError as exc:  # a bad id or text, named with its line
                    raise InputError(f"{name}:{number}: {exc}") from exc
                for doc in chunks:
                    yield doc, f"{name}:{number}"
        else:
            raise UnreadableFileError(f"{name}: unsupported file type {suffix or '(none)'!r}")


def load_documents(
    paths: PathArg | Iterable[PathArg],
    *,
    chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
    counter: Windower | None = None,
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
