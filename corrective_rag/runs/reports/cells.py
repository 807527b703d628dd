"""Table cells shared by the run table and the run reports, so both print a field alike."""

from __future__ import annotations

from corrective_rag.types import IterationRecord

__all__ = ["NONE", "rewrite_cell"]

# What every table prints for a field with no value (no action, no rewrite, no score).
NONE = "-"


def rewrite_cell(record: IterationRecord) -> str:
    """The iteration's rewrite: ``-``, ``rejected: why``, or ``-> query (rationale)``."""
    if record.rewrite is None:
        return NONE
    if record.rewrite.query is None:
        return f"rejected: {record.rewrite.rejected or 'no query'}"
    rationale = f" ({record.rewrite.rationale})" if record.rewrite.rationale else ""
    return f"-> {record.rewrite.query}{rationale}"
