"""A batch's questions: the queries file read and validated, and the split into shards."""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import MAX_QUERY_BYTES, check_query, is_blank, is_int
from corrective_rag.runs.records.jsonl import iter_jsonl
from corrective_rag.types import MAX_ID_LENGTH

# A line holds one question (at most MAX_QUERY_BYTES of UTF-8, up to 6 bytes per character once
# escaped as JSON), its id and a few extra fields; a file, a million of them.
MAX_QUERIES_LINE_BYTES = 6 * MAX_QUERY_BYTES + (64 << 10)
MAX_QUERIES_BYTES = 4 << 30

__all__ = ["Query", "check_ids", "check_shard", "in_shard", "parse_shard", "read_queries"]


@dataclass(frozen=True, slots=True)
class Query:
    """One line of a queries file.

    Attributes:
        id: unique, non-empty, at most 512 characters (as document ids).
        query: the question, not blank (not only whitespace and invisible characters).
        line: 1-based line number in the file (0 when built in code).
        extra: any other fields of the line, kept as given.
    """

    id: str
    query: str
    line: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or is_blank(self.id):
            raise InputError(f"query id must be a non-empty string, got {self.id!r}")
        if len(self.id) > MAX_ID_LENGTH:
            raise InputError(
                f"query id longer than {MAX_ID_LENGTH} characters: {self.id[:40]!r}..."
            )
        if not isinstance(self.query, str) or is_blank(self.query):
            raise InputError(f"query {self.id!r}: question must be a non-empty string")
        check_query(self.id, what="query id")
        check_query(self.query, what=f"query {self.id!r}")


def _pick(obj: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in obj:
            return obj[name]
    return None


def _id_key(query_id: str) -> str:
    """What a reader sees of an id: ids equal here look the same in every table and log."""
    return unicodedata.normalize("NFC", query_id).strip()


def _lookalike(qid: str, first: str, where: str, first_where: str) -> InputError:
    if qid == first:
        return InputError(f"{where}: duplicate id {qid!r} (first {first_where})")
    return InputError(
        f"{where}: id {qid!r} looks the same as {first!r} ({first_where}): they differ only in "
        "Unicode normalisation or surrounding spaces; give them distinct ids"
    )


def check_ids(queries: Sequence[Query]) -> None:
    """Raise :class:`InputError` when two queries share an id or ids that look the same.

    Ids that differ only in Unicode normalisation (``"é"`` as one character or two) or in
    surrounding spaces print the same, so a reader could not tell their results apart.
    """
    seen: dict[str, Query] = {}
    for q in queries:
        first = seen.setdefault(_id_key(q.id), q)
        if first is not q:
            where = f"line {q.line}" if q.line else f"query {q.id!r}"
            raise _lookalike(q.id, first.id, where, f"on line {first.line}" if first.line else "")


def read_queries(path: str | os.PathLike[str]) -> list[Query]:
    """Read and validate a queries JSONL file.

    Each non-blank line must be a JSON object with a non-empty string ``id`` (or ``_id``) and
    ``query`` (or ``text``); numbers as ids are accepted and turned into strings.

    The file is read through :mod:`corrective_rag.inputs.files`: a FIFO or a device is refused
    unread, and a line longer than a question can be (:data:`MAX_QUERIES_LINE_BYTES`) before it
    is held whole.

    Raises:
        InputError: naming the file and line, for a missing file or one that is not a regular
            file, a line too long, not UTF-8 or nested too deeply, a line that is not a JSON
            object, a missing or blank id or query, an id over 512 characters, or an id seen
            on an earlier line, or one that looks the same (see :func:`check_ids`).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"queries file not found: {p}")
    queries: list[Query] = []
    seen: dict[str, tuple[str, int]] = {}  # id key -> (id, line)
    lines = iter_jsonl(p, max_bytes=MAX_QUERIES_BYTES, max_line_bytes=MAX_QUERIES_LINE_BYTES)
    for lineno, obj in lines:
        where = f"{p}: line {lineno}"
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object")
        qid = _pick(obj, "id", "_id")
        if is_int(qid):
            qid = str(qid)
        if not isinstance(qid, str) or is_blank(qid):
            raise InputError(f"{where}: missing or empty 'id'")
        text = _pick(obj, "query", "text")
        if not isinstance(text, str) or is_blank(text):
            raise InputError(f"{where}: missing or empty 'query'")
        if _id_key(qid) in seen:
            first, first_line = seen[_id_key(qid)]
            raise _lookalike(qid, first, where, f"on line {first_line}")
        seen[_id_key(qid)] = (qid, lineno)
        extra = {k: v for k, v in obj.items() if k not in ("id", "_id", "query", "text")}
        try:
            queries.append(Query(qid, text, lineno, extra))
        except InputError as exc:  # NUL, invalid Unicode, an oversized question or id
            raise InputError(f"{where}: {exc}") from exc
    return queries


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``"I/N"`` (0 <= I < N) into ``(I, N)``.

    Raises:
        ConfigError: when the text is not of that form.
    """
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError as exc:
        raise ConfigError(f"shard must look like I/N (e.g. 0/4), got {text!r}") from exc
    check_shard((i, n))
    return i, n


def check_shard(shard: tuple[int, int]) -> None:
    """Raise :class:`ConfigError` unless ``shard`` is ``(i, n)`` with ``0 <= i < n``."""
    if not isinstance(shard, tuple) or len(shard) != 2 or not all(is_int(x) for x in shard):
        raise ConfigError(f"shard must be a tuple (i, n) of two ints, got {shard!r}")
    i, n = shard
    if n < 1 or not 0 <= i < n:
        raise ConfigError(f"shard I/N needs N >= 1 and 0 <= I < N, got {i}/{n}")


def in_shard(query_id: str, shard: tuple[int, int] | None) -> bool:
    """True when ``query_id`` belongs to shard ``(i, n)``.

    The share is a stable hash of the id (BLAKE2b, not Python's salted ``hash``), so every
    machine computes the same split and the shards of a batch are disjoint and complete.
    """
    if shard is None:
        return True
    i, n = shard
    digest = hashlib.blake2b(query_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n == i
