"""Reading JSONL files line by line with errors that name the file and line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corrective_rag.errors import InputError

__all__ = ["decode_line", "iter_jsonl"]


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
