"""Which unjudged hits an iteration judges, when the question and a rewrite both searched.

Each query is a lane; a rewrite earns slots by the share of its documents that were kept. Pure:
the orchestrator passes the hits, what was judged and each lane's record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from corrective_rag.types import Hit, LegScore, Verdict

__all__ = ["take_turns"]


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
    wins slots by finding relevant documents, never just by being new.
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
    probation = sorted(n for n in lanes if n not in trusted)
    queues = {name: sorted(ranked) for name, ranked in lanes.items()}
    picked: dict[str, str] = {}
    for group, once in ((trusted, True), (probation, True), (trusted, False), (probation, False)):
        while len(picked) < cap and any(queues[name] for name in group):
            for name in group:
                queue = queues[name]
                while queue and queue[0][1] in picked:
                    queue.pop(0)
                if queue and len(picked) < cap:
                    picked[queue.pop(0)[1]] = name
            if once:
                break
    return picked


def _rate(record: Mapping[str, tuple[int, int]], lane: str) -> float:
    """Documents kept per document judged when ``lane`` was last judged (0 with no record)."""
    kept, seen = record.get(lane, (0, 0))
    return kept / seen if seen else 0.0
