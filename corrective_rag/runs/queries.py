"""A batch's questions: the queries file read and validated, and the split into shards."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import check_query, is_int
from corrective_rag.runs.jsonl import iter_jsonl

__all__ = ["Query", "check_shard", "in_shard", "parse_shard", "read_queries"]


@dataclass(frozen=True, slots=True)
class Query:
    """One line of a queries file.

    Attributes:
        id: unique, non-empty.
        query: the question, non-empty.
        line: 1-based line number in the file (0 when built in code).
        extra: any other fields of the line, kept as given.
    """

    id: str
    query: str
    line: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InputError(f"query id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.query, str) or not self.query.strip():
            raise InputError(f"query {self.id!r}: question must be a non-empty string")
        check_query(self.id, what="query id")
        check_query(self.query, what=f"query {self.id!r}")


def _pick(obj: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in obj:
            return obj[name]
    return None


def read_queries(path: str | os.PathLike[str]) -> list[Query]:
    """Read and validate a queries JSONL file.

    Each non-blank line must be a JSON object with a non-empty string ``id`` (or ``_id``) and
    ``query`` (or ``text``); numbers as ids are accepted and turned into strings.

    Raises:
        InputError: naming the file and line, for a missing file, a line that is not a JSON
            object, a missing or empty id or query, or an id seen on an earlier line.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"queries file not found: {p}")
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(p):
        where = f"{p}: line {lineno}"
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a JSON object")
        qid = _pick(obj, "id", "_id")
        if is_int(qid):
            qid = str(qid)
        if not isinstance(qid, str) or not qid.strip():
            raise InputError(f"{where}: missing or empty 'id'")
        text = _pick(obj, "query", "text")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}: missing or empty 'query'")
        if qid in seen:
            raise InputError(f"{where}: duplicate id {qid!r} (first on line {seen[qid]})")
        seen[qid] = lineno
        extra = {k: v for k, v in obj.items() if k not in ("id", "_id", "query", "text")}
        try:
            queries.append(Query(qid, text, lineno, extra))
        except InputError as exc:  # NUL, invalid Unicode or an oversized question
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
