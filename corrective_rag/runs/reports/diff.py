"""What changed between two iterations of one run, or between two runs of the same question."""

from __future__ import annotations

from dataclasses import dataclass

from corrective_rag.errors import InputError
from corrective_rag.inputs import check_int
from corrective_rag.text.display import printable
from corrective_rag.types import RunResult, Verdict

__all__ = ["diff_iterations", "diff_runs"]


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
