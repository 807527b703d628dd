"""Reading JSONL files line by line with errors that name the file and line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corrective_rag.errors import InputError

__all__ = ["iter_jsonl"]


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, decoded value)`` for every non-blank line of a JSONL file.

    Raises:
        InputError: when the file is missing or a line is not valid JSON (names the line).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"file not found: {p}")
    with p.open(encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield lineno, json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InputError(f"{p}: line {lineno}: not valid JSON ({exc.msg})") from exc
