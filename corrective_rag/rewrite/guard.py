"""The drift guard every rewriter passes its candidate through.

A rewrite is rejected when it repeats a query already tried (compared on normalised text and on
content terms) or shares no content term with the original question: such a query cannot find
anything new, or has drifted off the user's topic.
"""

from __future__ import annotations

from collections.abc import Sequence

from corrective_rag.text import content_terms

__all__ = ["MAX_QUERY_CHARS", "REPEATED", "check_rewrite", "normalise_query", "repeats"]

MAX_QUERY_CHARS = 2000  # longer rewrites are prompt soup, not queries
REPEATED = "rewrite repeats a query already tried"


def normalise_query(query: str) -> str:
    """Collapse whitespace and case, for comparing queries."""
    return " ".join(query.lower().split())


def repeats(candidate: str, question: str, tried: Sequence[str]) -> bool:
    """True when ``candidate`` is the question or a tried query (same text or content terms)."""
    norm = normalise_query(candidate)
    terms = content_terms(candidate)
    return any(
        norm == normalise_query(query) or (terms and terms == content_terms(query))
        for query in (question, *tried)
    )


def check_rewrite(candidate: str, question: str, tried: Sequence[str]) -> str | None:
    """Return why ``candidate`` must be rejected, or ``None`` when it is acceptable."""
    if not candidate or not candidate.strip():
        return "empty rewrite"
    if len(candidate) > MAX_QUERY_CHARS:
        return f"rewrite longer than {MAX_QUERY_CHARS} characters"
    if repeats(candidate, question, tried):
        return REPEATED
    terms = content_terms(candidate)
    question_terms = content_terms(question)
    if question_terms and not terms & question_terms:
        return "rewrite shares no content term with the original question (drift)"
    return None
