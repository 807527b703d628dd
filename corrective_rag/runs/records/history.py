"""Run history: exact JSON round trip, an append-only JSONL store, a table and diffs.

* :func:`result_to_json` / :func:`result_from_json`: ``result_from_json(result_to_json(r)) == r``.
* :class:`HistoryStore`: one run per line in a JSONL file; a torn last line (a crash mid-write)
  is skipped with a warning on reading and cut off before the next append; damage elsewhere is
  an error naming the line (the policy of ``read_results`` too).
* :func:`render_table`: one row per iteration.
* :func:`diff_iterations` / :func:`diff_runs`: what changed between two iterations of one run,
  or between two runs of the same question.
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import check_int
from corrective_rag.logs import get_logger
from corrective_rag.runs.records.codec import from_dict, to_dict
from corrective_rag.runs.records.jsonl import iter_appended, torn_tail
from corrective_rag.runs.reports.cells import NONE, cut, rewrite_cell
from corrective_rag.text.display import display_width, pad, printable
from corrective_rag.types import RunResult, Verdict

__all__ = [
    "HistoryStore",
    "diff_iterations",
    "diff_runs",
    "render_table",
    "result_from_json",
    "result_to_json",
]

try:  # POSIX advisory locks keep concurrent appends from interleaving; elsewhere, best effort
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = get_logger(__name__)


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


def _settle_tail(fh: IO[bytes], path: Path) -> None:
    """Before an append: cut a torn last line, so that it never ends up inside the file.

    A tail that is whole JSON lacks only its newline (written by hand, or by another tool): it
    gets one instead, and stays.
    """
    fh.seek(0)
    data = fh.read()
    tail = torn_tail(data)
    if not tail:
        return
    try:
        json.loads(tail)
    except (ValueError, RecursionError):
        fh.truncate(len(data) - len(tail))
        log.warning("history_torn_line_removed", path=str(path), bytes=len(tail))
    else:
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n")
    fh.seek(0, os.SEEK_END)


class HistoryStore:
    """An append-only JSONL file of run results, one per line.

    Args:
        path: the file; created (with its folder) on the first append.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, str | os.PathLike) or not str(path):
            raise ConfigError(f"history path must be a non-empty path, got {path!r}")
        self.path = Path(path)
        if self.path.is_dir():
            raise ConfigError(f"history path {self.path} is a directory")

    def append(self, result: RunResult) -> None:
        """Add ``result`` as one line, after fencing off a torn last line if there is one."""
        line = result_to_json(result) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as fh:
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
        """Stored runs of exactly ``question``, oldest first (for :func:`diff_runs`)."""
        return [r for r in self if r.question == question]


# -- table ---------------------------------------------------------------------------------

_COLUMNS = ("it", "query", "new", "kept", "drop", "ungr", "action", "rewrite", "calls/tokens", "s")


TABLE_CELL_WIDTH = 40  # columns of the query and rewrite cells


def render_table(result: RunResult, *, width: int = TABLE_CELL_WIDTH) -> str:
    """One row per iteration: query, new/kept/dropped/ungraded counts, action, rewrite, usage."""
    rows = [list(_COLUMNS)]
    for rec in result.history:
        usage = rec.usage.total
        action = rec.action.value if rec.action else NONE
        if rec.fallback:
            action += f"+{rec.fallback.value}"
        rows.append(
            [
                str(rec.index),
                cut(rec.query, width),
                str(len(rec.verdicts)),
                str(len(rec.kept_ids)),
                str(len(rec.dropped_ids)),
                str(len(rec.ungraded_ids)),
                action,
                cut(rewrite_cell(rec), width),
                f"{usage.llm_calls}/{usage.total_tokens}",
                f"{rec.seconds:.2f}",
            ]
        )
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(pad(cell, w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    total = result.usage.total
    lines.append(
        f"stop: {result.stop_reason.value} ({printable(result.stop_detail)}); "
        f"kept {len(result.kept)}; "
        f"{total.llm_calls} calls, {total.total_tokens} tokens, {result.seconds:.2f} s"
    )
    return "\n".join(line.rstrip() for line in lines)


# -- diffs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What a diff compares: a query, retrieved ids, verdicts by id and kept ids."""

    label: str
    query: str
    retrieved: tuple[str, ...]
    verdicts: dict[str, Verdict]
    kept: tuple[str, ...]


def _iteration_snapshot(result: RunResult, index: int) -> _Snapshot:
    check_int(index, "iteration", error=InputError)
    if not 1 <= index <= len(result.history):
        raise InputError(f"iteration {index} not in 1..{len(result.history)}")
    upto = result.history[:index]
    verdicts = {v.document_id: v for rec in upto for v in rec.verdicts}
    dropped = {i for rec in upto for i in rec.dropped_ids}
    kept = tuple(dict.fromkeys(i for rec in upto for i in rec.kept_ids if i not in dropped))
    rec = result.history[index - 1]
    return _Snapshot(
        f"iteration {index}",
        rec.query,
        tuple(r.document_id for r in rec.retrieved),
        verdicts,
        kept,
    )


def _run_snapshot(result: RunResult) -> _Snapshot:
    verdicts = {v.document_id: v for rec in result.history for v in rec.verdicts}
    retrieved = tuple(dict.fromkeys(r.document_id for rec in result.history for r in rec.retrieved))
    label = f"run {result.run_id}"
    return _Snapshot(label, result.final_query, retrieved, verdicts, result.kept_ids)


def _verdict_text(verdict: Verdict | None) -> str:
    if verdict is None:
        return "not judged"
    if not verdict.graded:
        return f"ungraded ({verdict.error})"
    label = verdict.label.value if verdict.label else "?"
    return f"{label} {verdict.score:.2f}/{verdict.confidence:.2f}"


def _diff(a: _Snapshot, b: _Snapshot) -> list[str]:
    lines = [f"--- {a.label}", f"+++ {b.label}"]
    if a.query == b.query:
        lines.append(f"  query: {a.query}")
    else:
        lines += [f"- query: {a.query}", f"+ query: {b.query}"]
    for name, before, after in (("retrieved", a.retrieved, b.retrieved), ("kept", a.kept, b.kept)):
        removed = [i for i in before if i not in after]
        added = [i for i in after if i not in before]
        lines.append(f"  {name}: {len(before)} -> {len(after)}")
        lines += [f"- {name} {i}" for i in removed] + [f"+ {name} {i}" for i in added]
    changed = 0
    for doc_id in dict.fromkeys([*a.verdicts, *b.verdicts]):
        va, vb = a.verdicts.get(doc_id), b.verdicts.get(doc_id)
        if va is not None and vb is not None and va != vb:
            changed += 1
            lines.append(f"~ verdict {doc_id}: {_verdict_text(va)} -> {_verdict_text(vb)}")
    if not changed:
        lines.append("  verdicts: no document judged differently")
    return lines


def diff_iterations(result: RunResult, i: int, j: int) -> str:
    """What changed from iteration ``i`` to ``j`` of one run (1-based).

    Queries and retrieved ids are those of the two iterations; kept ids are cumulative up to each
    iteration (a later CRAG replace can drop them); verdicts are every verdict so far (a document
    is judged once per run, so within one run verdicts only ever appear, never change).
    """
    lines = _diff(_iteration_snapshot(result, i), _iteration_snapshot(result, j))
    return printable("\n".join(lines), keep_newlines=True)


def diff_runs(a: RunResult, b: RunResult) -> str:
    """What changed between two runs: final query, retrieved and kept ids, changed verdicts."""
    lines = _diff(_run_snapshot(a), _run_snapshot(b))
    if a.question != b.question:
        lines.insert(2, f"! different questions: {a.question!r} vs {b.question!r}")
    if a.stop_reason != b.stop_reason:
        lines.append(f"- stop: {a.stop_reason.value}\n+ stop: {b.stop_reason.value}")
    return printable("\n".join(lines), keep_newlines=True)
