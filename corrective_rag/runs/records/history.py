"""Run history: exact JSON round trip and an append-only JSONL store.

* :func:`result_to_json` / :func:`result_from_json`: ``result_from_json(result_to_json(r)) == r``.
* :class:`HistoryStore`: one run per line in a JSONL file; a torn last line (a crash mid-write)
  is skipped with a warning on reading and cut off before the next append; damage elsewhere is
  an error naming the line (the policy of ``read_results`` too).

What a stored run looks like on screen is drawn in :mod:`corrective_rag.runs.reports`: the
per-iteration table (:mod:`~corrective_rag.runs.reports.table`) and the diffs
(:mod:`~corrective_rag.runs.reports.diff`).
"""

from __future__ import annotations

import builtins
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.observe.logs import get_logger
from corrective_rag.runs.records.codec import from_dict, to_dict
from corrective_rag.runs.records.jsonl import (
    MAX_RECORD_LINE_BYTES,
    decode_line,
    iter_appended,
    torn_start,
)
from corrective_rag.types import RunResult

# HistoryStore and result_from_json and result_to_json: their home is corrective_rag.runs
__all__: list[str] = []

try:  # POSIX advisory locks keep concurrent appends from interleaving; elsewhere, best effort
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log: Any = get_logger(__name__)


def result_to_json(result: RunResult, *, indent: int | None = None) -> str:
    """Serialise a run result to JSON (one line unless ``indent`` is given)."""
    if not isinstance(result, RunResult):
        raise InputError(f"expected a RunResult, got {type(result).__name__}")
    try:
        return json.dumps(to_dict(result), ensure_ascii=False, indent=indent, allow_nan=False)
    except ValueError as exc:  # NaN or infinity somewhere: JSON cannot hold it exactly
        raise InputError(f"run result {result.run_id!r} cannot be written as JSON: {exc}") from exc


def result_from_json(text: str) -> RunResult:
    """Rebuild a run result from :func:`result_to_json` output.

    Raises:
        InputError: the text is not JSON or does not have the shape of a RunResult.
    """
    if not isinstance(text, str | bytes | bytearray):
        raise InputError(f"run result must be JSON text, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # also bytes that are not UTF-8, deep nesting
        raise InputError(f"run result is not valid JSON: {type(exc).__name__}: {exc}") from exc
    return from_dict(RunResult, data)


def _open_appending(path: Path) -> IO[bytes]:
    """``path`` opened to read and append, created if missing; refused unless a regular file.

    Opened without blocking first: a FIFO would make an appender wait for ever, and a device
    (``/dev/zero``) never end its tail.
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"history path {path} is not a regular file")
    if getattr(os, "O_NONBLOCK", 0):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "a+b")


def _settle_tail(fh: IO[bytes], path: Path) -> None:
    """Before an append: cut a torn last line, so that it never ends up inside the file.

    A tail that is whole JSON lacks only its newline (written by hand, or by another tool): it
    gets one instead, and stays. Only the tail is read (scanned back from the end).
    """
    size = fh.seek(0, os.SEEK_END)
    start = torn_start(fh, size)
    if start == size:
        return
    whole = size - start <= MAX_RECORD_LINE_BYTES
    if whole:
        fh.seek(start)
        try:
            decode_line(fh.read(size - start), str(path))
        except InputError:
            whole = False
    if whole:
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n")
    else:
        fh.truncate(start)
        log.warning("history_torn_line_removed", path=str(path), bytes=size - start)
    fh.seek(0, os.SEEK_END)


class HistoryStore:
    """An append-only JSONL file of run results, one per line.

    Args:
        path: the file; created (with its folder) on the first append.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, str | os.PathLike) or not str(path):
            raise ConfigError(f"history path must be a non-empty path, got {path!r}")
        self.path: Path = Path(path)
        if self.path.is_dir():
            raise ConfigError(f"history path {self.path} is a directory")

    def append(self, result: RunResult) -> None:
        """Add ``result`` as one line, after fencing off a torn last line if there is one."""
        line = result_to_json(result) + "\n"
        if len(line.encode("utf-8")) > MAX_RECORD_LINE_BYTES:  # what could never be read back
            raise InputError(
                f"run {result.run_id!r} is {len(line.encode('utf-8')):,} bytes as JSON, more "
                f"than a history line holds ({MAX_RECORD_LINE_BYTES:,})"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _open_appending(self.path) as fh:
            if fcntl is not None:
                fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                _settle_tail(fh, self.path)
                fh.write(line.encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
            finally:
                if fcntl is not None:
                    fcntl.flock(fh, fcntl.LOCK_UN)

    def __iter__(self) -> Iterator[RunResult]:
        """Yield stored runs in the order they were appended.

        The policy every reader of run files shares (``read_results`` too): a torn last line
        (a crash mid-write) is skipped with a warning; any other line that is not a run result
        raises InputError naming the line.
        """
        if not self.path.exists():
            return
        for number, data in iter_appended(self.path):
            try:
                yield from_dict(RunResult, data)
            except InputError as exc:
                raise InputError(f"{self.path}:{number}: not a run result: {exc}") from exc

    def list(self) -> list[RunResult]:
        """All stored runs, oldest first."""
        return list(self)

    def get(self, run_id: str) -> RunResult:
        """The run with ``run_id``.

        Raises:
            KeyError: no stored run has that id.
        """
        for result in self:
            if result.run_id == run_id:
                return result
        raise KeyError(run_id)

    def for_question(self, question: str) -> builtins.list[RunResult]:
        """Stored runs of exactly ``question``, oldest first (for ``reports.diff.diff_runs``)."""
        return [r for r in self if r.question == question]
