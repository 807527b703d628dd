"""The free feedback lane's query: the kept documents' bridge names, made with no LLM call.

A model whose rewrites add nothing (it proposes the question plus a word) would leave the loop
with the question's next hits only, which is single shot in slices. What made the offline loop
gain on multi-hop questions is free: the :class:`~corrective_rag.rewrite.local.LocalRewriter`'s
query from the kept documents (their bridge names and terms). After every rewrite the loop makes
that query too and searches it in the next iteration as a lane of its own (``feedback``,
:mod:`corrective_rag.loop.lanes`), where it earns slots by what it finds; it is recorded in
:attr:`~corrective_rag.types.Rewrite.feedback`.

The query is offered only when it names something new: a name of two or more content words that
neither the question nor a kept document's title holds (generic terms from kept abstracts search
what the question's own next hits already cover; a bridge name opens a new hop). None is made
before a document is kept, nor when the rewriter's call failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from corrective_rag.rewrite.guard import normalise_query
from corrective_rag.rewrite.local import LocalRewriter, document_title
from corrective_rag.text import content_terms
from corrective_rag.text.lexical import name_phrases
from corrective_rag.types import Rewrite, RewriteRequest

__all__ = ["feedback_query"]


def feedback_query(local: LocalRewriter, request: RewriteRequest, rewrite: Rewrite) -> str | None:
    """The feedback lane's next query beside ``rewrite`` (the rewriter's answer), or ``None``.

    Args:
        local: makes the query (its ``idf`` is the lane policy's, :class:`~.lanes.Lanes`).
        request: what the rewriter was asked.
        rewrite: its answer, before the loop's own checks of the query.
    """
    if rewrite.usage.failed_calls or not request.kept():
        return None  # a failed call says nothing new; with nothing kept there is nothing to mine
    tried = (*request.tried_queries, *([rewrite.query] if rewrite.query else []))
    query = local.rewrite(replace(request, tried_queries=tried, proposal=None)).query
    if query is None or normalise_query(query) == normalise_query(rewrite.query or ""):
        return None
    titles = [document_title(j) for j in request.kept()]
    return query if names_a_new_entity(query, request.question, titles) else None


def names_a_new_entity(query: str, question: str, titles: Sequence[str]) -> bool:
    """Whether ``query`` holds a name of two or more content words that ``question`` lacks.

    A kept document's own title (``titles``) is no new entity: searching it finds that
    document again, and the others on its topic the question's own hits already cover.
    """
    asked = content_terms(question)
    owned = [content_terms(t) for t in titles if t]
    return any(
        len(terms := content_terms(name)) > 1
        and not terms <= asked
        and not any(terms <= own for own in owned)
        for name in name_phrases(query)
    )
