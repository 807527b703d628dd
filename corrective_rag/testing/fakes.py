"""Scripted components for users' own tests: deterministic, in memory, counting their calls.

Each satisfies one protocol of :mod:`corrective_rag.protocols`::

    retriever = ListRetriever([Document("a", "the moon orbits the earth"), ...])
    evaluator = ScriptedEvaluator({"a": 0.9})          # id -> score, Verdict, or None (ungraded)
    rewriter = ScriptedRewriter(["moon orbit period"])  # then "script exhausted"
    generator = ScriptedGenerator("It does [a].")
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.text import tokenize
from corrective_rag.types import (
    Answer,
    Document,
    Evaluation,
    Hit,
    Proposal,
    Relevance,
    Rewrite,
    RewriteRequest,
    Usage,
    Verdict,
)

# what corrective_rag.testing re-exports from here is listed there, not here
__all__: list[str] = []

Script = float | Verdict | None

# One scripted LLM call of each kind: a plausible size, so token budgets have something to count.
EVALUATE_CALL = Usage(llm_calls=1, prompt_tokens=100, completion_tokens=20)
REWRITE_CALL = Usage(llm_calls=1, prompt_tokens=50, completion_tokens=10)
GENERATE_CALL = Usage(llm_calls=1, prompt_tokens=200, completion_tokens=40)


class ListRetriever:
    """An in-memory keyword retriever: ranks documents by how many query tokens they contain.

    Documents sharing no token with the query are not returned; ties keep insertion order.
    ``where`` filters on metadata equality (``{"lang": "en"}``). Every query is recorded in
    :attr:`queries`.
    """

    def __init__(self, documents: Iterable[Document]) -> None:
        self.documents: list[Document] = list(documents)
        ids = [d.id for d in self.documents]
        if len(ids) != len(set(ids)):
            raise ConfigError("ListRetriever: document ids must be unique")
        # token -> (position, occurrences) of each document holding it: a query reads only the
        # documents that share a token with it (scores as counting every token would give)
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for position, doc in enumerate(self.documents):
            for token, count in Counter(tokenize(doc.text)).items():
                self._postings.setdefault(token, []).append((position, count))
        self.queries: list[str] = []

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Return up to ``top_k`` documents sharing tokens with ``query``, best first."""
        if top_k <= 0:
            raise ConfigError(f"top_k must be > 0, got {top_k}")
        self.queries.append(query)
        counts: dict[int, int] = {}
        for term in set(tokenize(query)):
            for position, count in self._postings.get(term, ()):
                counts[position] = counts.get(position, 0) + count
        scored = []
        for position, count in counts.items():
            doc = self.documents[position]
            if where and any(doc.metadata.get(k) != v for k, v in where.items()):
                continue
            scored.append((-float(count), position, doc))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [
            Hit(document=doc, score=-neg, rank=rank)
            for rank, (neg, _, doc) in enumerate(scored[:top_k], start=1)
        ]


def _label(score: float) -> Relevance:
    if score >= 0.7:
        return Relevance.HIGH
    return Relevance.MEDIUM if score >= 0.4 else Relevance.LOW


class ScriptedEvaluator:
    """Verdicts from a mapping (document id -> script) or a callable ``(question, doc) -> script``.

    A script is a score (graded with ``confidence``), a ready :class:`Verdict`, or ``None``
    (ungraded). Ids missing from a mapping get ``default``. Each call to :meth:`evaluate` costs
    ``ceil(len(documents) / documents_per_call)`` LLM calls of ``usage_per_call`` each, like a
    batching LLM evaluator, so budgets can be tested. ``proposals`` (one next query per call,
    then none; ``None`` items propose nothing) make it a judge-and-propose evaluator.

    Attributes:
        documents_per_call: documents judged per LLM call (read by the orchestrator's budget);
            ``None`` for an evaluator that makes no LLM calls (like a local one): no usage.
        calls: how many times :meth:`evaluate` ran.
        evaluated: every ``(question, document id)`` pair judged, in order.
    """

    def __init__(
        self,
        script: Mapping[str, Script] | Callable[[str, Document], Script],
        *,
        default: Script = 0.0,
        confidence: float = 0.9,
        documents_per_call: int | None = 1,
        usage_per_call: Usage = EVALUATE_CALL,
        proposals: Sequence[str | None] = (),
    ) -> None:
        if documents_per_call is not None and documents_per_call < 1:
            raise ConfigError(f"documents_per_call must be >= 1, got {documents_per_call}")
        if not 0.0 <= confidence <= 1.0:
            raise ConfigError(f"confidence must be in 0..1, got {confidence}")
        self.script = script
        self.default = default
        self.confidence = confidence
        self.documents_per_call = documents_per_call
        self.usage_per_call = usage_per_call
        self.proposals: list[str | None] = list(proposals)
        self.calls: int = 0
        self.evaluated: list[tuple[str, str]] = []

    def _verdict(self, question: str, doc: Document) -> Verdict:
        if callable(self.script):
            item = self.script(question, doc)
        else:
            item = self.script.get(doc.id, self.default)
        if item is None:
            return Verdict.ungraded(doc.id, "scripted: no grade", raw="")
        if isinstance(item, Verdict):
            return item
        score = float(item)
        return Verdict(
            doc.id, score >= 0.5, _label(score), score, self.confidence, f"scripted {score}"
        )

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """Judge each document against ``question`` from the script."""
        self.calls += 1
        verdicts = []
        for doc in documents:
            self.evaluated.append((question, doc.id))
            verdicts.append(self._verdict(question, doc))
        usage = Usage()
        per_call = self.documents_per_call
        for _ in range(math.ceil(len(documents) / per_call) if per_call else 0):
            usage = usage + self.usage_per_call
        query = self.proposals[self.calls - 1] if self.calls <= len(self.proposals) else None
        proposal = Proposal(query, "scripted") if query is not None else None
        return Evaluation(tuple(verdicts), usage, proposal)


class ScriptedRewriter:
    """Rewrites from a list (one per call, then ``script exhausted``) or a callable.

    Items are a query string, a ready :class:`Rewrite`, or ``None`` (rejected). Every request is
    recorded in :attr:`requests`.
    """

    def __init__(
        self,
        script: Sequence[str | Rewrite | None] | Callable[[RewriteRequest], str | Rewrite | None],
        *,
        usage: Usage = REWRITE_CALL,
    ) -> None:
        self.script = script
        self.usage = usage
        self.requests: list[RewriteRequest] = []

    @property
    def reads_proposals(self) -> bool:
        """``False``: its rewrites are scripted (the loop asks for no proposal)."""
        return False

    def rewrite(self, request: RewriteRequest) -> Rewrite:
        """Return the next scripted rewrite for ``request``."""
        self.requests.append(request)
        if callable(self.script):
            item = self.script(request)
        elif len(self.requests) <= len(self.script):
            item = self.script[len(self.requests) - 1]
        else:
            return Rewrite(None, rejected="script exhausted", usage=self.usage)
        if item is None:
            return Rewrite(None, rejected="scripted rejection", usage=self.usage)
        if isinstance(item, Rewrite):
            return item
        return Rewrite(item, rationale=f"scripted rewrite {len(self.requests)}", usage=self.usage)


class ScriptedGenerator:
    """Answers with fixed text (or ``text(question, documents)``), citing every document given.

    Every call's ``(question, document ids)`` is recorded in :attr:`calls`.
    """

    def __init__(
        self,
        text: str | Callable[[str, Sequence[Document]], str] = "scripted answer",
        *,
        usage: Usage = GENERATE_CALL,
    ) -> None:
        self.text = text
        self.usage = usage
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def generate(self, question: str, documents: Sequence[Document]) -> Answer:
        """Return the scripted answer citing ``documents``."""
        ids = tuple(d.id for d in documents)
        self.calls.append((question, ids))
        text = self.text(question, documents) if callable(self.text) else self.text
        return Answer(text, cited_ids=ids, supported=True, usage=self.usage)
