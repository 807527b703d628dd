"""Reading JSONL files line by line with errors that name the file and line.

Append-only files (a batch's results, a
:class:`~corrective_rag.runs.records.history.HistoryStore`) share one corruption policy,
:func:`iter_appended`: their writers end every line with a newline, so whatever follows the last
newline is a write cut short by a crash (a torn last line) and is skipped with a warning; any
other line that does not decode is damage, an error naming the line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corrective_rag.errors import InputError
from corrective_rag.inputs import surrogate_at
from corrective_rag.observe.logs import get_logger

__all__ = ["decode_line", "iter_appended", "iter_jsonl", "torn_tail"]

log: Any = get_logger(__name__)


UTF8_BOM = b"\xef\xbb\xbf"


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, decoded value)`` for every non-blank line of a JSONL file.

    A UTF-8 byte order mark at the start of the file is read as what it is, not as text.

    Raises:
        InputError: when the file is missing or a line is not UTF-8 or not valid JSON (names
            the line).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"file not found: {p}")
    with p.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            # Notepad and PowerShell start a UTF-8 file with a byte order mark
            raw = line[len(UTF8_BOM) :] if lineno == 1 and line.startswith(UTF8_BOM) else line
            if not raw.strip():
                continue
            yield lineno, decode_line(raw, f"{p}: line {lineno}")


def decode_line(raw: bytes, where: str) -> Any:
    """Decode one JSONL line (bytes) or raise :class:`InputError` naming ``where``.

    Catches what ``json.loads`` raises beyond ``JSONDecodeError`` on hostile input: bytes that
    are not UTF-8 and nesting deep enough to exhaust the recursion limit.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 text (byte {exc.start})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise InputError(f"{where}: JSON nested too deeply") from exc


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


def torn_tail(data: bytes) -> bytes:
    """What follows the last newline of an append-only file's bytes: a torn line, or ``b""``."""
    return data[data.rfind(b"\n") + 1 :]


def iter_appended(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    r"""Yield ``(line number, decoded value)`` for every whole line of an append-only JSONL file.

    A torn last line (no newline after it) is skipped with a ``jsonl_torn_line_skipped``
    warning; a blank line is skipped. A lone surrogate escape (``"\udcff"``, which the batch
    writer uses for text it cannot encode) is read as that escape's text, so that every reader
    can print and export it.

    Raises:
        InputError: the file is missing, or a whole line is not UTF-8 JSON (names the line).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"file not found: {p}")
    data = p.read_bytes()
    lines = data.split(b"\n")
    if lines.pop().strip():  # whatever follows the last newline: b"" when the file ends cleanly
        log.warning("jsonl_torn_line_skipped", path=str(p), line=len(lines) + 1)
    if lines and lines[0].startswith(UTF8_BOM):  # as iter_jsonl reads it: Notepad's mark
        lines[0] = lines[0][len(UTF8_BOM) :]
    for lineno, raw in enumerate(lines, start=1):
        if raw.strip():
            yield lineno, _readable(raw, f"{p}: line {lineno}")
