"""The loop's search lanes: which queries an iteration searches, and which hits each may judge.

Every iteration searches up to three queries, each a lane:

* ``question``: the user's question, every iteration; a later iteration judges its next-best
  unjudged hits, what a single search would judge next;
* ``rewrite``: the next query, the evaluator's proposal or the rewriter's own
  (:class:`~corrective_rag.types.RewriteSource`);
* ``feedback``: a query from the kept documents' bridge names, made with no LLM call
  (:mod:`corrective_rag.loop.feedback`), for every rewriter but one whose rewrites are that
  query already (:class:`Lanes`).

A lane earns slots by the share of its documents that were kept (:func:`take_turns`). A new lane
is a name here (:data:`~corrective_rag.loop.multiquery.QUERY_LEGS`, ``FEEDBACK_LEG``), a text in
:func:`lane_queries`, and what makes that text (as ``loop/feedback.py`` makes the feedback lane's).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from corrective_rag.errors import ConfigError
from corrective_rag.loop.multiquery import FEEDBACK_LEG, QUERY_LEGS
from corrective_rag.protocols import FeedbackRewriter
from corrective_rag.types import Hit, LegScore, Verdict

# Lanes: its home is corrective_rag.loop
__all__ = ["lane_queries", "take_turns"]


@dataclass(frozen=True, slots=True)
class Lanes:
    """The lane policy: the feedback lane or not, its idf, and the lanes searched by BM25 alone.

    Attributes:
        feedback: search the free feedback lane (:mod:`corrective_rag.loop.feedback`).
            ``None`` (the default): yes, unless the rewriter says its rewrites are that query
            already (:class:`~corrective_rag.protocols.FeedbackRewriter`:
            :class:`~corrective_rag.rewrite.local.LocalRewriter` does).
        idf: ``term -> idf`` for the feedback query (for example the hybrid store's ``idf``);
            ``None``: the judged documents' document frequencies stand in.
        lexical: the lanes searched by BM25 alone where the retriever can (the hybrid store:
            ``HybridStore.retrieve_many(lexical=...)``): their queries cost no embedding.
            ``None`` (the default): the feedback lane, and the rewrite lane when a model writes
            it (any rewriter but one whose rewrites are the feedback query). Both are lists of
            keywords (the feedback lane's names and terms; a model is asked for "a few
            keywords"), which BM25 matches as well as both legs: first 50 questions, k=4,
            verdicts from the qrels, side by side (``benchmarks/peers.py --lexical``), all
            supporting paragraphs kept on HotpotQA 0.96 against 0.92 with every lane on both
            legs, recall on CISI 0.092 / 0.091, Cranfield 0.433 / 0.431, CACM 0.298 / 0.302,
            in 0.60-0.73 of the LangGraph CRAG design's time at 0 ms per LLM call against
            0.96-1.53 (the question alone goes through the embedding model). A
            ``LocalRewriter`` loop searches its rewrite lane on both legs, as its figures
            were measured. ``()``: every lane on both legs.

    Raises:
        ConfigError: ``feedback`` is not a bool or ``None``, ``idf`` is not callable, or
            ``lexical`` is not ``None`` or a collection of the loop's lane names
            (``question``, ``rewrite``, ``feedback``).
    """

    feedback: bool | None = None
    idf: Callable[[str], float] | None = None
    lexical: Collection[str] | None = None

    def __post_init__(self) -> None:
        if self.feedback is not None and not isinstance(self.feedback, bool):
            raise ConfigError(f"feedback must be a bool or None, got {self.feedback!r}")
        if self.idf is not None and not callable(self.idf):
            raise ConfigError("idf must be a callable term -> float")
        if self.lexical is not None:
            known = (*QUERY_LEGS, FEEDBACK_LEG)
            lanes = self.lexical
            if isinstance(lanes, str) or not isinstance(lanes, Collection):
                raise ConfigError(f"lexical must be a collection of lane names, got {lanes!r}")
            if not all(n in known for n in lanes):
                raise ConfigError(f"lexical must name lanes among {known}, got {lanes!r}")
            object.__setattr__(self, "lexical", frozenset(lanes))

    def feeds(self, rewriter: object) -> bool:
        """Whether a loop with ``rewriter`` searches the feedback lane."""
        if self.feedback is not None:
            return self.feedback
        return not _writes_feedback(rewriter)

    def searched_lexically(self, rewriter: object) -> frozenset[str]:
        """The lanes a loop with ``rewriter`` searches by BM25 alone (see ``lexical``)."""
        if self.lexical is not None:
            return frozenset(self.lexical)
        if _writes_feedback(rewriter):
            return frozenset({FEEDBACK_LEG})
        return frozenset({QUERY_LEGS[1], FEEDBACK_LEG})


def _writes_feedback(rewriter: object) -> bool:
    """Whether ``rewriter`` declares that its rewrites are the feedback lane's query."""
    return isinstance(rewriter, FeedbackRewriter) and rewriter.writes_feedback_query is True


def lane_queries(question: str, query: str, feedback: str | None) -> dict[str, str]:
    """Lane name -> query text for one iteration; a text already searched by a lane is dropped."""
    lanes: dict[str, str] = {}
    for name, text in zip((*QUERY_LEGS, FEEDBACK_LEG), (question, query, feedback), strict=True):
        if text is not None and text not in lanes.values():
            lanes[name] = text
    return lanes


def take_turns(
    hits: Sequence[Hit],
    judged: Mapping[str, Verdict],
    cap: int,
    *,
    fused: bool,
    record: Mapping[str, tuple[int, int]],
) -> dict[str, str]:
    """Up to ``cap`` unjudged hits, each mapped to the query lane that took it.

    With one query these are its first unjudged hits (lane ``question``). With the question and
    a rewrite, each lane offers its own next-best unjudged hits, and a rewrite must earn its
    slots: it gets one (its best hit, a probe) while the rest go to the question's next-best
    hits, the documents a single search of the question would judge next. A rewrite whose
    documents were kept at least as often per document judged as the question's, the last time
    each was judged (``record``: lane -> kept, judged), takes slots in turn with the question
    instead, first if its rate is higher. So a rewrite adds to what the question finds and
    wins slots by finding relevant documents, never just by being new. A lane never judged
    before gets its probe even with one slot (``cap`` 1), the rewrite before the feedback lane.
    """
    lanes: dict[str, list[tuple[int, str]]] = {}
    for hit in hits:
        if hit.document.id not in judged:
            # a fused hit's legs are the queries that found it; one query's hits are one lane.
            # A hit the question found too is the question's: only what a rewrite alone
            # finds can show that the rewrite adds something.
            legs = hit.legs if fused else (LegScore("question", hit.rank, hit.score),)
            mine = [leg for leg in legs if leg.leg == "question"] or legs
            for leg in mine:
                lanes.setdefault(leg.leg, []).append((leg.rank, hit.document.id))
    bar = _rate(record, "question")
    trusted = sorted(
        (
            n
            for n in lanes
            if n == "question" or (record.get(n, (0, 0))[0] and _rate(record, n) >= bar)
        ),
        key=lambda n: (-_rate(record, n), n != "question", n),
    )
    probation = _on_probation(lanes, trusted)
    # a lane never judged yet gets its probe even when the slots are too few for the question's
    # turn and a probe (top_k=1): one slot is held back from the trusted lanes' first turn
    fresh = any(n not in record for n in probation)
    queues = {name: sorted(ranked) for name, ranked in lanes.items()}
    picked: dict[str, str] = {}
    passes = ((trusted, True), (probation, True), (trusted, False), (probation, False))
    for number, (group, once) in enumerate(passes):
        limit = cap - 1 if number == 0 and fresh and cap > 0 else cap
        while len(picked) < limit and any(queues[name] for name in group):
            for name in group:
                queue = queues[name]
                while queue and queue[0][1] in picked:
                    queue.pop(0)
                if queue and len(picked) < limit:
                    picked[queue.pop(0)[1]] = name
            if once:
                break
    return picked


def _on_probation(lanes: Collection[str], trusted: Collection[str]) -> list[str]:
    """The lanes not trusted, the rewrite before the feedback lane (lane order).

    So a rewrite gets its probe whenever one probe fits.
    """
    order = (*QUERY_LEGS, FEEDBACK_LEG)
    return sorted(
        (n for n in lanes if n not in trusted),
        key=lambda n: (order.index(n) if n in order else len(order), n),
    )


def _rate(record: Mapping[str, tuple[int, int]], lane: str) -> float:
    """Documents kept per document judged when ``lane`` was last judged (0 with no record)."""
    kept, seen = record.get(lane, (0, 0))
    return kept / seen if seen else 0.0
