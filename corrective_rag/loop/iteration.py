"""One iteration of the corrective loop, stage by stage, and the run of iterations.

:func:`iterate` is the loop as the mission states it; each line is one stage, a function with
one job in a module of its own:

* lanes: which queries to search (:mod:`corrective_rag.loop.lanes`);
* retrieve, evaluate, filter: one source's step (:mod:`corrective_rag.loop.step`);
* CRAG action and fallback (:mod:`corrective_rag.loop.fallback`);
* keep: the run's kept documents (:meth:`~corrective_rag.loop.state.RunState.keep`);
* stop: every stop reason (:mod:`corrective_rag.loop.stopping`);
* rewrite, with the feedback lane's query (:mod:`corrective_rag.loop.rewriting`);
* record: the iteration's :class:`~corrective_rag.types.IterationRecord`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from corrective_rag.calls.scope import raise_if_cancelled
from corrective_rag.loop.fallback import Corrected, correct
from corrective_rag.loop.lanes import lane_queries
from corrective_rag.loop.rewriting import next_query
from corrective_rag.loop.state import Parts, RunState, Step
from corrective_rag.loop.step import judge_source
from corrective_rag.loop.stopping import Facts, Moment, Stop, decide_stop, full_at
from corrective_rag.observe.spans import traced_iteration
from corrective_rag.types import (
    IterationRecord,
    PhaseUsage,
    Retrieved,
    Rewrite,
    Usage,
    record_fields,
)

__all__ = ["iterate", "iterations"]


@traced_iteration
def iterate(
    parts: Parts, st: RunState, index: int, query: str, *, last: bool
) -> tuple[IterationRecord, Stop | None]:
    """Iteration ``index``, searching ``query``: its record, and why the run stops (if it does)."""
    started = time.perf_counter()
    lanes = lane_queries(st.question, query, st.feedback)
    local = judge_source(parts, st, parts.retriever, lanes)
    crag = correct(parts, st, local, lanes, index)
    st.keep(crag.steps, index)
    ended = decide_stop(_judged(parts, st, crag.steps, index, last=last), parts.policy)
    rewrite = None
    if ended is None:
        rewrite, ended = next_query(parts, st, crag.steps, index)
    return _record(index, query, lanes, crag, rewrite, started=started), ended


def iterations(parts: Parts, st: RunState, most: int) -> tuple[list[IterationRecord], str, Stop]:
    """Iterate until a stop reason, at the latest after iteration ``most``.

    Returns the iterations' records, the last query searched and why the run stopped.
    """
    history: list[IterationRecord] = []
    query, index = st.question, 0
    while True:
        index += 1
        raise_if_cancelled()  # a cancelled run (Ctrl-C, a cancelled arun) ends even with no LLM
        ended = decide_stop(Facts(Moment.BEFORE_ITERATION, index, spent=st.spent()), parts.policy)
        if ended is not None:
            return history, query, ended
        record, ended = iterate(parts, st, index, query, last=index == most)
        history.append(record)
        st.log.info("iteration_finished", **record_fields(record))
        if ended is not None:
            return history, query, ended
        query = st.carry(record.rewrite, query)


def _judged(parts: Parts, st: RunState, steps: Sequence[Step], index: int, *, last: bool) -> Facts:
    """What the stop decision knows once the iteration's documents are judged and kept."""
    return Facts(
        Moment.JUDGED,
        index,
        spent=st.spent(),
        kept=tuple(k.verdict for k in st.kept.values()),
        new=sum(len(s.verdicts) for s in steps),
        kept_new=sum(len(s.kept) for s in steps),
        full=full_at(parts.evaluator, st.judged.values()),  # a capped judge keeps no more
        rejected=st.rejected,
        retrieved=st.retrieved_sets[-1],  # this iteration's, kept by RunState.keep
        earlier=tuple(st.retrieved_sets[:-1]),
        last=last,
    )


def _record(
    index: int,
    query: str,
    lanes: Mapping[str, str],
    crag: Corrected,
    rewrite: Rewrite | None,
    *,
    started: float,
) -> IterationRecord:
    """The iteration's record: every source's documents, in the order they were searched."""
    steps = crag.steps
    return IterationRecord(
        index=index,
        query=query,
        searched=tuple(lanes.values()),
        retrieved=tuple(Retrieved.from_hit(h) for s in steps for h in s.hits),
        skipped_ids=tuple(i for s in steps for i in s.skipped),
        verdicts=tuple(v for s in steps for v in s.verdicts),
        kept_ids=tuple(i for s in steps for i in s.kept),
        dropped_ids=tuple(i for s in steps for i in s.dropped),
        ungraded_ids=tuple(i for s in steps for i in s.ungraded),
        action=crag.action,
        fallback=crag.fallback,
        rewrite=rewrite,
        usage=PhaseUsage(
            grading=sum((s.usage for s in steps), Usage()),
            rewriting=rewrite.usage if rewrite else Usage(),
        ),
        seconds=time.perf_counter() - started,
    )
