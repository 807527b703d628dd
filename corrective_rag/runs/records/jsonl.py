"""Reading JSONL files line by line with errors that name the file and line.

Append-only files (a batch's results, a
:class:`~corrective_rag.runs.records.history.HistoryStore`) share one corruption policy,
:func:`iter_appended`: their writers end every line with a newline, so whatever follows the last
newline is a write cut short by a crash (a torn last line) and is skipped with a warning; any
other line that does not decode is damage, an error naming the line.

Every file is read through :mod:`corrective_rag.inputs.files` (regular files only, each line
bounded before it is held, JSON depth bounded): a FIFO, a device, a line of 200 MB, bytes that
are not UTF-8 and 500,000 ``[`` are each one :class:`InputError` naming the file (and line).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from corrective_rag.errors import InputError
from corrective_rag.inputs import read_bounded_lines, surrogate_at
from corrective_rag.inputs.files import loads_bounded
from corrective_rag.observe.logs import get_logger

__all__ = [
    "MAX_RECORDS_BYTES",
    "MAX_RECORD_LINE_BYTES",
    "decode_line",
    "iter_appended",
    "iter_jsonl",
    "torn_start",
]

log: Any = get_logger(__name__)

# One line of a results or history file is one run: its question, verdicts (reasonings capped),
# kept documents and answer, kilobytes in practice; a run keeping dozens of megabyte documents
# still fits. The writers refuse a longer line, so what they write is always read back.
MAX_RECORD_LINE_BYTES = 64 << 20
MAX_RECORDS_BYTES = 64 << 30  # a results or history file: read line by line, bounded all the same


def iter_jsonl(
    path: str | os.PathLike[str], *, max_bytes: int, max_line_bytes: int
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, decoded value)`` for every non-blank line of a JSONL file.

    A UTF-8 byte order mark at the start of the file is read as what it is, not as text.

    Raises:
        InputError: the file is missing or not a regular file, is longer than ``max_bytes``, or
            a line is longer than ``max_line_bytes``, not UTF-8 or not valid JSON (names the
            line).
    """
    for lineno, raw in read_bounded_lines(path, max_bytes=max_bytes, max_line_bytes=max_line_bytes):
        yield lineno, decode_line(raw, f"{os.fsdecode(path)}: line {lineno}")


def decode_line(raw: bytes, where: str) -> Any:
    """Decode one JSONL line (bytes) or raise :class:`InputError` naming ``where``.

    Bytes that are not UTF-8 and nesting past ``inputs.files.MAX_JSON_DEPTH`` are refused as
    such, before ``json.loads`` could raise anything else.
    """
    return loads_bounded(raw, where)


# A \ud800-\udfff escape. json.loads joins a valid pair into one character but keeps a lone
# one: a string no file, CSV or terminal can take as UTF-8. The batch writer escapes what it
# cannot encode (an error message holding bytes that were not UTF-8, a model's stray escape),
# so such lines are ours too, not damage.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _readable(raw: bytes, where: str) -> Any:
    """A whole line of an append-only file, decoded, lone surrogates as their escape text."""
    value = decode_line(raw, where)
    if _SURROGATE_ESCAPE.search(raw) is None:  # the usual case: nothing to mend
        return value
    try:
        return _mend(value)
    except RecursionError as exc:  # pragma: no cover - json.loads refuses deeper nesting first
        raise InputError(f"{where}: JSON nested too deeply") from exc


def _mend(value: Any) -> Any:
    r"""``value`` with each lone surrogate written as its escape text (``\udcff``), readable."""
    if isinstance(value, str):
        if surrogate_at(value) is None:
            return value
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_mend(k): _mend(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mend(v) for v in value]
    return value


def torn_start(fh: IO[bytes], size: int) -> int:
    """Where the bytes after an open append-only file's last newline begin (``size``: none).

    Scanned backwards in blocks: the file is never held whole.
    """
    pos = size
    block = 1 << 16
    while pos > 0:
        start = max(0, pos - block)
        fh.seek(start)
        found = fh.read(pos - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        pos = start
    return 0


def iter_appended(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    r"""Yield ``(line number, decoded value)`` for every whole line of an append-only JSONL file.

    A torn last line (no newline after it) is skipped with a ``jsonl_torn_line_skipped``
    warning; a blank line is skipped. A lone surrogate escape (``"\udcff"``, which the batch
    writer uses for text it cannot encode) is read as that escape's text, so that every reader
    can print and export it. Lines are read one at a time, each at most
    :data:`MAX_RECORD_LINE_BYTES`.

    Raises:
        InputError: the file is missing or not a regular file, a line is longer than the cap,
            or a whole line is not UTF-8 JSON (names the line).
    """
    p = Path(path)
    lines = read_bounded_lines(
        p, max_bytes=MAX_RECORDS_BYTES, max_line_bytes=MAX_RECORD_LINE_BYTES, ends=True
    )
    for lineno, raw in lines:
        if not raw.endswith(b"\n"):  # whatever follows the last newline: a write cut short
            if raw.strip():
                log.warning("jsonl_torn_line_skipped", path=str(p), line=lineno)
            return
        if raw.strip():
            yield lineno, _readable(raw, f"{p}: line {lineno}")
