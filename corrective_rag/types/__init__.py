"""Frozen values that flow through the loop: documents, hits, verdicts, usage, records, results.

Everything here is immutable (``frozen=True, slots=True``) and holds only JSON-friendly fields
(str, int, float, bool, None, enums of str, tuples and mappings of those), so that
:mod:`corrective_rag.runs.records.history` can round-trip a whole run through JSON without loss.

This is the face: import every value from ``corrective_rag.types`` (or the root). Each concept
has a module of its own: ``documents`` (what is retrieved), ``verdicts`` (what a judge says, on
the one score scale), ``usage`` (what a model call returns and costs), ``rewrites`` (what a
rewriter takes and returns) and ``runs`` (what a run records and returns).
"""

from corrective_rag.types.documents import MAX_ID_LENGTH, Hit, LegScore, Retrieved
from corrective_rag.types.documents import Document as Document
from corrective_rag.types.rewrites import Rewrite as Rewrite
from corrective_rag.types.rewrites import RewriteRequest as RewriteRequest
from corrective_rag.types.rewrites import RewriteSource
from corrective_rag.types.runs import (
    Answer,
    CragAction,
    FallbackMode,
    KeptDocument,
    Strip,
    record_fields,
)
from corrective_rag.types.runs import IterationRecord as IterationRecord
from corrective_rag.types.runs import RunResult as RunResult
from corrective_rag.types.runs import StopReason as StopReason
from corrective_rag.types.usage import ChatReply, PhaseUsage, TokenLogprob, Usage
from corrective_rag.types.verdicts import (
    HIGH_FROM,
    MAX_MISSING_CHARS,
    MAX_MISSING_ITEMS,
    MAX_RAW_CHARS,
    MAX_REASONING_CHARS,
    RELEVANT_FROM,
    SCORE_SOURCES,
    Judged,
    Proposal,
    missing_items,
)
from corrective_rag.types.verdicts import Evaluation as Evaluation
from corrective_rag.types.verdicts import Relevance as Relevance
from corrective_rag.types.verdicts import Verdict as Verdict

# The root's names (Document, Verdict, ...) are imported `as` themselves: re-exported for
# `from corrective_rag.types import Verdict`, but listed in the root's __all__, not here.
__all__ = [  # noqa: RUF022 (plainly sorted, as tests/test_exported_members.py reads it)
    "Answer",
    "ChatReply",
    "CragAction",
    "FallbackMode",
    "HIGH_FROM",
    "Hit",
    "Judged",
    "KeptDocument",
    "LegScore",
    "MAX_ID_LENGTH",
    "MAX_MISSING_CHARS",
    "MAX_MISSING_ITEMS",
    "MAX_RAW_CHARS",
    "MAX_REASONING_CHARS",
    "PhaseUsage",
    "Proposal",
    "RELEVANT_FROM",
    "Retrieved",
    "RewriteSource",
    "SCORE_SOURCES",
    "Strip",
    "TokenLogprob",
    "Usage",
    "missing_items",
    "record_fields",
]
