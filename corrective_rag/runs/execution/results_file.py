"""The results file as a batch writes and resumes it.

:class:`ResultsWriter` is the one place a batch writes: whole lines appended, each in one
``write`` and (by default) one ``fsync``, secrets cleared first, the file locked against a second
batch. :func:`done_ids` reads the file back on resume: a torn last line cut off, the ids done
before (as the same question) skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from corrective_rag.errors import InputError
from corrective_rag.observe.logs import get_logger
from corrective_rag.runs.execution.queries import Query
from corrective_rag.runs.records.jsonl import MAX_RECORD_LINE_BYTES
from corrective_rag.runs.records.results import (
    ResultRecord,
    error_line,
    read_results,
    repair_torn_tail,
)
from corrective_rag.text.secrets import redact_tree

__all__ = ["ResultsWriter", "done_ids"]

log: Any = get_logger(__name__)


class ResultsWriter:
    """Appends whole lines to the results file, one ``write`` and one ``fsync`` per line.

    Every string of a line (query, documents, replies, error messages) is cleared of
    ``secrets`` first: this is the one place a batch writes, so nothing else can leak them.
    """

    def __init__(self, path: Path, *, fsync: bool, secrets: Sequence[str] = ()) -> None:
        if path.is_dir():
            raise InputError(f"results path {path} is a folder, not a file")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fsync = fsync
        self._secrets = tuple(secrets)
        self.path = path
        try:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - not POSIX: no lock, documented
            pass
        except OSError as exc:
            os.close(self._fd)
            raise InputError(f"another batch is writing to {path}") from exc

    def write(self, obj: Mapping[str, Any]) -> None:
        """Append ``obj`` as one line; a line too long for a reader becomes its error line."""
        data = self._encoded(obj)
        if len(data) > MAX_RECORD_LINE_BYTES:  # a line no reader would take back: say so
            too_long = InputError(
                f"the run's result is {len(data):,} bytes as JSON, more than a results line "
                f"holds ({MAX_RECORD_LINE_BYTES:,})"
            )
            data = self._encoded(error_line(obj["id"], obj["query"], too_long, obj["seconds"]))
        view = memoryview(data)
        while view:  # os.write may write less than asked; never leave half a line behind
            view = view[os.write(self._fd, view) :]
        if self._fsync:
            os.fsync(self._fd)

    def _encoded(self, obj: Mapping[str, Any]) -> bytes:
        obj = redact_tree(dict(obj), self._secrets)
        try:
            return (json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in an error message: escape, never crash
            return (json.dumps(obj, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")

    def close(self) -> None:
        """Close the file (and so release its lock)."""
        os.close(self._fd)


_CHANGED_SHOWN = 20  # ids named in the warning; the count says how many more


def done_ids(
    path: Path, mine: Sequence[Query], *, rerun_errors: bool, rerun_changed: bool
) -> tuple[set[str], list[ResultRecord]]:
    """Ids of ``mine`` that resume skips, and the records the file holds already.

    Skipped: done before, as the same question. An id whose question changed since its line
    was written keeps its old answer (with a warning naming it), unless ``rerun_changed``.
    """
    if not path.exists():
        return set(), []
    repair_torn_tail(path)
    earlier = read_results(path)
    last = {rec.id: rec for rec in earlier}
    done = {qid for qid, rec in last.items() if rec.ok or not rerun_errors}
    changed = [q.id for q in mine if q.id in done and last[q.id].query != q.query]
    if changed:
        log.warning(
            "batch_questions_changed",
            count=len(changed),
            ids=changed[:_CHANGED_SHOWN],
            action="running them again"
            if rerun_changed
            else "kept the answers to the old "
            "questions; pass rerun_changed=True (CLI: --rerun-changed) to run them again",
        )
    return (done - set(changed) if rerun_changed else done), earlier
