"""The results JSONL file of a batch: one line per query, read back for resume, stats and plots.

The readers here also accept the orchestrator's ``HistoryStore`` files (one bare RunResult per
line), so every ``history`` command works on either.

Each line is one JSON object::

    {"id": "q1", "query": "...", "status": "ok", "seconds": 1.2, "result": {...RunResult...}}
    {"id": "q2", "query": "...", "status": "error", "seconds": 0.4,
     "error": {"type": "LLMTransportError", "message": "..."}}

``result`` is :func:`corrective_rag.runs.records.codec.to_dict` of the :class:`RunResult`. A file
may hold several lines for one id (an error, then the ok line of a rerun): the last line wins.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrective_rag.errors import InputError
from corrective_rag.inputs import is_number
from corrective_rag.observe.logs import get_logger
from corrective_rag.runs.records.codec import from_dict, to_dict
from corrective_rag.runs.records.jsonl import (
    MAX_RECORD_LINE_BYTES,
    decode_line,
    iter_appended,
    torn_start,
)
from corrective_rag.types import RunResult

# ResultRecord and read_results: their home is corrective_rag.runs
__all__ = ["error_line", "latest_records", "ok_line", "record_of", "repair_torn_tail"]

log: Any = get_logger(__name__)

STATUS_OK = "ok"
STATUS_ERROR = "error"


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """One line of a results file, decoded.

    Attributes:
        id: the query id.
        query: the question as given.
        status: ``"ok"`` or ``"error"``.
        seconds: wall time of the run (or of the failed attempt).
        result: the run's result when ``status == "ok"``.
        error: ``{"type": ..., "message": ...}`` when ``status == "error"``.
        line: 1-based line number in the file.
    """

    id: str
    query: str
    status: str
    seconds: float
    result: RunResult | None = None
    error: Mapping[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def ok(self) -> bool:
        """True when the query ran to a result."""
        return self.status == STATUS_OK


def ok_line(query_id: str, query: str, result: RunResult, seconds: float) -> dict[str, Any]:
    """The JSON object written for a query that ran to a result."""
    return {
        "id": query_id,
        "query": query,
        "status": STATUS_OK,
        "seconds": round(seconds, 6),
        "result": to_dict(result),
    }


def record_of(line: Mapping[str, Any], result: RunResult | None = None) -> ResultRecord:
    """The record ``line`` reads back as, without the file.

    ``result``: the run's result of an ok line, when the caller still holds it (it is what the
    line's ``result`` decodes to); without it the line is decoded.
    """
    if result is None or line.get("status") != STATUS_OK:
        return _decode(dict(line), 0, "results line")
    seconds = _seconds(line.get("seconds", 0.0), "results line")
    return ResultRecord(str(line["id"]), str(line.get("query") or ""), STATUS_OK, seconds, result)


def error_line(query_id: str, query: str, exc: BaseException, seconds: float) -> dict[str, Any]:
    """The JSON object written for a query that failed; the batch goes on."""
    return {
        "id": query_id,
        "query": query,
        "status": STATUS_ERROR,
        "seconds": round(seconds, 6),
        "error": {"type": type(exc).__name__, "message": str(exc)},
    }


def repair_torn_tail(path: str | os.PathLike[str]) -> int:
    """Cut a torn last line (no final newline) off a results file.

    A process killed in the middle of a write can leave a partial last line; everything before
    the last newline was written whole, so truncating there loses no finished result.

    Returns:
        The number of bytes removed (0 when the file ends cleanly or does not exist).
    """
    p = Path(path)
    if not p.exists():
        return 0
    with p.open("rb+") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise InputError(f"{p} is not a regular file: refusing to change it")
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        keep = torn_start(fh, size)
        if keep == size:
            return 0
        fh.seek(keep)
        tail = fh.read(min(size - keep, MAX_RECORD_LINE_BYTES + 1))
        fh.seek(0)
        first = fh.readline(MAX_RECORD_LINE_BYTES + 1) if keep else b""
        _check_torn(p, first, tail)
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    log.warning("results_torn_line_removed", path=str(p), bytes=size - keep)
    return size - keep


def _is_results_line(data: bytes) -> bool:
    try:
        obj = decode_line(data, "results line")
    except InputError:  # not UTF-8, not JSON, nested too deeply
        return False
    return isinstance(obj, dict) and "id" in obj and obj.get("status") in (STATUS_OK, STATUS_ERROR)


def _check_torn(path: Path, first: bytes, tail: bytes) -> None:
    """Refuse to cut anything off a file that is not a results file with a torn last line.

    Only a line this package's writer started and never finished is cut: it begins as every
    results line does and is not whole JSON; the file's first line must be a results line.
    """
    try:
        decode_line(tail, str(path))
        whole = True
    except InputError:
        whole = False
    start = b'{"id": '  # how every line the batch writer writes begins
    # Whole JSON lacking its newline is ours only when it is a results line (a write cut just
    # before the newline; readers skip it, resume runs its query again), else someone else's.
    ours = tail[: len(start)] == start[: len(tail)]
    torn = ours and (not whole or _is_results_line(tail))
    if not torn or (first and not _is_results_line(first)):
        raise InputError(
            f"{path} is not a results file (its last line is not an unfinished results line): "
            "refusing to change it; give --out a new file or an earlier results file"
        )


def _decode(obj: Any, lineno: int, where: str) -> ResultRecord:
    if not isinstance(obj, dict):
        raise InputError(f"{where}: line {lineno}: expected a JSON object")
    if "status" not in obj and "run_id" in obj and "history" in obj:
        # A HistoryStore line is a bare RunResult: show it under its run id.
        result = from_dict(RunResult, obj, where=f"{where}: line {lineno}")
        return ResultRecord(
            result.run_id, result.question, STATUS_OK, result.seconds, result, line=lineno
        )
    qid, query, status = obj.get("id"), obj.get("query"), obj.get("status")
    if not isinstance(qid, str) or not qid:
        raise InputError(f"{where}: line {lineno}: missing or empty 'id'")
    if status not in (STATUS_OK, STATUS_ERROR):
        raise InputError(f"{where}: line {lineno}: 'status' must be 'ok' or 'error'")
    seconds = _seconds(obj.get("seconds", 0.0), f"{where}: line {lineno}")
    if status == STATUS_OK:
        result = from_dict(RunResult, obj.get("result"), where=f"{where}: line {lineno}: result")
        return ResultRecord(qid, str(query or ""), status, seconds, result, line=lineno)
    error = obj.get("error") or {}
    if not isinstance(error, dict):
        raise InputError(f"{where}: line {lineno}: 'error' must be an object")
    err = {"type": str(error.get("type", "")), "message": str(error.get("message", ""))}
    return ResultRecord(qid, str(query or ""), status, seconds, None, err, lineno)


def _seconds(value: Any, where: str) -> float:
    """A line's ``seconds``: a finite number >= 0 (a hand-edited file may hold anything)."""
    if not is_number(value):
        raise InputError(f"{where}: 'seconds' must be a number")
    try:
        seconds = float(value)
    except OverflowError as exc:  # an integer of hundreds of digits
        raise InputError(f"{where}: 'seconds' out of range ({len(str(value))} digits)") from exc
    if not math.isfinite(seconds) or seconds < 0:
        raise InputError(f"{where}: 'seconds' must be a finite number >= 0, got {value!r}")
    return seconds


def read_results(path: str | os.PathLike[str]) -> list[ResultRecord]:
    """Read every line of a results file, in file order.

    The policy of :func:`corrective_rag.runs.records.jsonl.iter_appended`, shared with
    :class:`~corrective_rag.runs.records.history.HistoryStore`: a torn last line (a write cut
    short by a crash) is skipped with a warning; any other malformed line is an error naming it.

    Raises:
        InputError: when the file is missing or not a regular file (a FIFO, a device), a line
            is longer than ``jsonl.MAX_RECORD_LINE_BYTES``, or a complete line is not a valid
            record.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"results file not found: {p}")
    return [_decode(obj, lineno, str(p)) for lineno, obj in iter_appended(p)]


def latest_records(records: list[ResultRecord]) -> list[ResultRecord]:
    """Keep the last record of each id, in the order ids first appeared."""
    order: dict[str, ResultRecord] = {}
    for rec in records:
        order[rec.id] = rec  # dicts keep first-insertion order even when a value is replaced
    return list(order.values())
