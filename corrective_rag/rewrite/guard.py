"""The drift guard every rewriter passes its candidate through.

A rewrite is rejected when it holds control characters (ESC, C1, bidirectional: what
:func:`corrective_rag.inputs.check_query` refuses in a question), repeats a query already tried
(compared on normalised text and on content terms) or shares no content term with the original
question: such a query cannot find anything new, or has drifted off the user's topic.
:func:`is_copied_sentence` tells a proposal that is a sentence copied from a document (a small
model's habit: it states the answer instead of searching for what is missing), and
:func:`pads_the_question` one that is the question plus a word; a caller can treat either as a
poor search.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from corrective_rag.inputs import control_at, surrogate_at
from corrective_rag.text import content_terms

# check_rewrite: its home is corrective_rag.rewrite
__all__ = [
    "MAX_QUERY_CHARS",
    "REPEATED",
    "is_copied_sentence",
    "normalise_query",
    "pads_the_question",
    "repeats",
]

MAX_QUERY_CHARS = 2000  # longer rewrites are prompt soup, not queries
REPEATED = "rewrite repeats a query already tried"
# A proposal of fewer words is a keyword query even when a document holds it (a name, a title);
# from this many on, one that a document holds nearly word for word is a copied sentence.
COPIED_MIN_WORDS = 6
COPIED_SHARE = 0.8  # of the proposal's word trigrams found in one document
_WORD = re.compile(r"\w+")


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


def pads_the_question(candidate: str, question: str) -> bool:
    """True when ``candidate`` is the question plus at most one more content term.

    Such a query (a weak model's "the question, plus background") searches what the question
    searches, re-ranked by one word: the hits it adds are the documents that match that word,
    not what the question lacks. Pure; content terms are compared, not the text.
    """
    asked = content_terms(question)
    terms = content_terms(candidate)
    return bool(asked) and asked <= terms and len(terms - asked) <= 1


def check_rewrite(candidate: str, question: str, tried: Sequence[str]) -> str | None:
    """Return why ``candidate`` must be rejected, or ``None`` when it is acceptable."""
    if not candidate or not candidate.strip():
        return "empty rewrite"
    if len(candidate) > MAX_QUERY_CHARS:
        return f"rewrite longer than {MAX_QUERY_CHARS} characters"
    unstorable = "\x00" in candidate or surrogate_at(candidate) is not None
    if not unstorable and control_at(candidate) is not None:
        # searched, sent to a web provider and shown: a query is plain text or nothing. NUL and
        # lone surrogates are refused later by check_query, which records an escaped candidate.
        return "rewrite holds control characters (ESC, C1, bidirectional)"
    if repeats(candidate, question, tried):
        return REPEATED
    terms = content_terms(candidate)
    question_terms = content_terms(question)
    if question_terms and not terms & question_terms:
        return "rewrite shares no content term with the original question (drift)"
    return None


def _trigrams(words: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def is_copied_sentence(proposal: str, documents: Iterable[str]) -> bool:
    """True when ``proposal`` is a sentence copied (nearly word for word) from one of ``documents``.

    Pure: words are compared lower-cased, punctuation ignored; a proposal of at least
    ``COPIED_MIN_WORDS`` words is copied when ``COPIED_SHARE`` of its word trigrams occur in a
    single document. Shorter proposals (keywords, a name) are never called copied.
    """
    words = _WORD.findall(proposal.lower())
    if len(words) < COPIED_MIN_WORDS:
        return False
    wanted = _trigrams(words)
    for text in documents:
        found = wanted & _trigrams(_WORD.findall(text.lower()))
        if len(found) >= COPIED_SHARE * len(wanted):
            return True
    return False
