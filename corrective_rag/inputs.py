r"""Checks shared by every entry point that takes user text: queries, ids and document text.

Python strings can hold what no file, HTTP body or database can store: lone surrogates (from
``json.loads('"\\ud800"')`` or from command-line bytes that were not UTF-8, which Python decodes
with ``surrogateescape``). Such text fails much later, deep inside chromadb, a tokenizer or the
results writer, so it is refused where it enters, with an :class:`InputError` naming the thing.
"""

from __future__ import annotations

from corrective_rag.errors import InputError

__all__ = ["MAX_QUERY_BYTES", "check_query", "surrogate_at"]

MAX_QUERY_BYTES = 1_048_576  # 1 MiB: a question beyond this is a pasted file, not a query


def surrogate_at(text: str) -> int | None:
    """Index of the first lone surrogate in ``text`` (not encodable as UTF-8), or ``None``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return int(exc.start)
    return None


def check_query(value: object, *, what: str = "question", max_bytes: int = MAX_QUERY_BYTES) -> str:
    """Return ``value`` if it is usable query text, else raise :class:`InputError`.

    Usable: a ``str`` (not bytes), not empty or only whitespace, no NUL character, valid
    Unicode (no lone surrogate), at most ``max_bytes`` bytes as UTF-8.
    """
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InputError(f"{what} is empty or only whitespace")
    if "\x00" in value:
        raise InputError(f"{what} contains NUL characters")
    position = surrogate_at(value)
    if position is not None:
        raise InputError(
            f"{what} is not valid Unicode text (lone surrogate at character {position}; "
            "was it read from bytes that are not UTF-8?)"
        )
    if len(value.encode("utf-8")) > max_bytes:
        raise InputError(f"{what} longer than {max_bytes} bytes")
    return value
