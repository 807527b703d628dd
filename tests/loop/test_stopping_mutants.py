"""decide_stop pinned branch by branch: each test kills mutants of loop/stopping.py that the
loop's own tests let live (issue 40; ``python3 -m mutmut run --max-children 1``, configured in
setup.cfg's ``[mutmut]`` section).

Pure and fast: the Facts of one moment in, the stop reason and its exact detail out.

The mutants left alive are equivalent (no input the package can build tells them apart):

* ``stop_rule``: ``Moment.JUDGED`` -> ``None``: decide_stop treats every moment but
  ``BEFORE_ITERATION`` and ``REWRITTEN`` as judged.
* ``stop_rule``: iteration ``2`` -> ``3``: only ``index > 1`` is read; the index is named only
  in the cap and budget details, and stop_rule sets neither ``last`` nor ``spent``.
* ``stop_rule``: ``new=1`` -> ``2``: only ``new > 0`` / ``new == 0`` are read.
* ``stop_rule``: ``kept_new`` ``1`` -> ``2`` (not stalled): only ``kept_new == 0`` is read.
* ``sureness``: the clamp ``min(..., 1.0)`` -> ``min(..., 2.0)``: a Verdict refuses a
  confidence above 1 (InputError), so nothing reaches the clamp above 1.
"""

from __future__ import annotations

from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.loop.stopping import Facts, Moment, decide_stop, stop_rule
from corrective_rag.types import Relevance, Rewrite, StopReason, Usage, Verdict

POLICY = FilterPolicy(min_relevant=2, stop_confidence=0.7)
SURE = "confidences summing to 1.80 >= 2 x 0.7 (2 of them at 0.7 or more)"


def keep(confidence: float = 0.9, missing: tuple[str, ...] = (), relevant: bool = True) -> Verdict:
    return Verdict("d", relevant, Relevance.HIGH, 0.9, confidence, missing=missing)


def judged(**fields: object) -> tuple[StopReason, str] | None:
    """decide_stop once an iteration is judged: iteration 2 with new documents, unless told."""
    facts = {"index": 2, "new": 3, "kept_new": 1, **fields}
    return decide_stop(Facts(Moment.JUDGED, **facts), POLICY)  # type: ignore[arg-type]


def rewritten(rewrite: Rewrite | None, *, grading_failed: bool) -> tuple[StopReason, str] | None:
    facts = Facts(Moment.REWRITTEN, 1, rewrite=rewrite, grading_failed=grading_failed)
    return decide_stop(facts, POLICY)


FAILED_CALL = Usage(llm_calls=1, failed_calls=1)


def test_a_rewrite_fails_the_run_only_when_grading_failed_too() -> None:
    """rewrite_failed needs both: every grading call failed and the rewriter's call failed."""
    dead = Rewrite(None, rejected="rewriter failed: timed out", usage=FAILED_CALL)
    assert (StopReason.REWRITE_FAILED, "rewriter failed: timed out") == rewritten(
        dead, grading_failed=True
    )
    # grading failed in iteration 1, the rewrite answered: the run goes on with the rewrite
    assert (
        rewritten(Rewrite("a better query", usage=Usage(llm_calls=1)), grading_failed=True) is None
    )
    # ... also when the rewrite needed a second try: one failed call, then an answer
    retried = Rewrite("a better query", usage=Usage(llm_calls=2, failed_calls=1))
    assert rewritten(retried, grading_failed=True) is None
    # the grading answered, the rewriter did not: the next iteration pages the question's hits
    assert rewritten(dead, grading_failed=False) is None


def test_a_rejected_rewrite_with_no_failed_call_does_not_end_the_run() -> None:
    """A rewrite refused without a failed call (the drift guard) is no dead model."""
    refused = Rewrite(None, rejected="drifted from the question", usage=Usage(llm_calls=1))
    assert rewritten(refused, grading_failed=True) is None
    assert rewritten(None, grading_failed=True) is None


def test_a_failed_rewrite_without_a_reason_says_rewriter_failed() -> None:
    """The detail falls back to 'rewriter failed' when the rewrite gives no reason."""
    dead = Rewrite(None, usage=FAILED_CALL)
    assert (StopReason.REWRITE_FAILED, "rewriter failed") == rewritten(dead, grading_failed=True)


def test_the_budget_stops_before_an_iteration_naming_it_and_the_limit() -> None:
    """Before an iteration only a spent budget stops, its detail naming the iteration."""
    spent = Facts(Moment.BEFORE_ITERATION, 3, spent="max_llm_calls=10 reached")
    assert (
        StopReason.BUDGET_EXHAUSTED,
        "before iteration 3: max_llm_calls=10 reached",
    ) == decide_stop(spent, POLICY)
    assert decide_stop(Facts(Moment.BEFORE_ITERATION, 3), POLICY) is None
    # enough kept does not stop before the iteration: that is decided once it is judged
    full = Facts(Moment.BEFORE_ITERATION, 3, kept=(keep(), keep()), new=0, last=True)
    assert decide_stop(full, POLICY) is None


def test_enough_relevant_says_how_many_how_sure_and_how_many_alone() -> None:
    """The success detail names the keeps, the sum, the bar and the keeps at the bar."""
    assert (StopReason.ENOUGH_RELEVANT, f"2 kept relevant >= min_relevant 2, {SURE}") == judged(
        kept=(keep(), keep())
    )
    mixed = judged(kept=(keep(0.95), keep(0.5), keep(0.1, relevant=False)))
    assert (
        StopReason.ENOUGH_RELEVANT,
        "2 kept relevant >= min_relevant 2, confidences summing to 1.45 >= 2 x 0.7 "
        "(1 of them at 0.7 or more)",
    ) == mixed


def test_enough_relevant_is_tried_first_even_on_the_last_iteration_with_budget_spent() -> None:
    """Success outranks every other stop that holds at the same moment."""
    got = judged(kept=(keep(), keep()), new=0, last=True, spent="max_tokens", rejected="drift")
    assert StopReason.ENOUGH_RELEVANT == got[0]  # type: ignore[index]


def test_kept_unconfident_needs_a_later_stalled_iteration() -> None:
    """Unsure keeps stop only after iteration 1, when new documents were judged and none kept."""
    unsure = (keep(0.4), keep(0.4))
    detail = (
        "2 kept >= min_relevant 2, but their confidences sum to only 0.80 < 2 x 0.7, "
        "and the last iteration kept nothing new"
    )
    assert (StopReason.KEPT_UNCONFIDENT, detail) == judged(kept=unsure, new=1, kept_new=0)
    assert judged(kept=unsure, index=1, new=1, kept_new=0) is None  # nothing earlier to stall on
    assert judged(kept=unsure, new=1, kept_new=1) is None  # it kept something new
    assert judged(kept=unsure, new=5, kept_new=2) is None


def test_no_new_documents_is_no_progress_not_kept_unconfident() -> None:
    """Judging nothing new is not stalling: no_progress says why, with the retrieved set."""
    unsure = (keep(0.4), keep(0.4))
    seen = frozenset({"a", "b"})
    got = judged(kept=unsure, new=0, kept_new=0, retrieved=seen, earlier=(frozenset("x"), seen))
    assert (
        StopReason.NO_PROGRESS,
        "no new documents to judge (same retrieved set as iteration 2)",
    ) == got


def test_no_progress_names_why_nothing_was_new() -> None:
    """The detail names the first earlier iteration with the same set, or which empty kind."""
    same = frozenset({"a"})
    first = judged(new=0, retrieved=same, earlier=(same, frozenset("b"), same))
    assert (
        StopReason.NO_PROGRESS,
        "no new documents to judge (same retrieved set as iteration 1)",
    ) == first
    judged_before = judged(new=0, retrieved=same, earlier=(frozenset("b"),))
    assert (
        StopReason.NO_PROGRESS,
        "no new documents to judge (every retrieved document already judged)",
    ) == judged_before
    empty = judged(new=0, earlier=(frozenset("b"),))
    assert (StopReason.NO_PROGRESS, "no new documents to judge (nothing retrieved)") == empty


def test_a_rejected_rewrite_ends_the_run_only_with_nothing_left_to_judge() -> None:
    """rewrite_failed (rejected) needs both a rejection and no new documents; its detail says so."""
    assert (
        StopReason.REWRITE_FAILED,
        "rewrite rejected (drifted) and the question has no unjudged hits left",
    ) == judged(new=0, rejected="drifted")
    assert judged(new=1, rejected="drifted") is None
    assert judged(new=1, kept_new=0, rejected="drifted") is None


def test_the_iteration_cap_and_the_budget_stop_after_judging() -> None:
    """The last iteration stops on the cap, naming it; a spent budget stops before the rewrite."""
    assert (StopReason.ITERATION_CAP, "reached max_iterations=2") == judged(last=True)
    assert (StopReason.ITERATION_CAP, "reached max_iterations=2") == judged(
        last=True, spent="max_tokens=5"
    )
    assert (StopReason.BUDGET_EXHAUSTED, "before rewrite 2: max_tokens=5") == judged(
        spent="max_tokens=5"
    )
    assert judged() is None


def test_a_shared_missing_part_blocks_stalling_but_not_a_full_evaluator() -> None:
    """Every keep missing one part: a stalled run goes on; a full evaluator stops, listing it."""
    missing = (keep(0.9, ("Manon",)), keep(0.9, ("manon", "acts")))
    assert judged(kept=missing, new=2, kept_new=0) is None
    got = judged(kept=missing, full=2)
    cap = "; the evaluator keeps at most 2 documents a question and has judged 2 relevant"
    assert (StopReason.KEPT_UNCONFIDENT, f"2 kept, every one missing manon{cap}") == got


def test_a_keep_that_misses_nothing_unblocks_whatever_order_it_comes_in() -> None:
    """One keep with no missing item clears the block, first, between or last."""
    blocked = keep(0.9, ("manon",))
    for kept in (
        (keep(), blocked, blocked),
        (blocked, keep(), blocked),
        (blocked, blocked, keep()),
    ):
        assert StopReason.ENOUGH_RELEVANT == judged(kept=kept)[0]  # type: ignore[index]


def test_a_full_evaluator_with_too_few_keeps_is_no_progress_naming_the_cap() -> None:
    """A capped judge done with fewer than min_relevant keeps: no_progress, whatever else holds."""
    cap = "; the evaluator keeps at most 2 documents a question and has judged 2 relevant"
    got = judged(kept=(keep(),), full=2, new=0, rejected="drifted", last=True)
    assert (StopReason.NO_PROGRESS, f"1 kept < min_relevant 2{cap}") == got


def test_stop_rule_is_a_later_iteration_that_judged_new_documents() -> None:
    """stop_rule is decide_stop for a later iteration with one new document, kept unless stalled."""
    unsure = [keep(0.4), keep(0.4)]
    assert stop_rule(unsure, POLICY) is None
    assert StopReason.KEPT_UNCONFIDENT == stop_rule(unsure, POLICY, stalled=True)[0]  # type: ignore[index]
    assert stop_rule([keep()], POLICY) is None  # neither no_progress nor a cap


def test_a_relevant_keep_at_confidence_zero_adds_nothing_and_is_not_sure() -> None:
    """Confidence 0 counts as 0 (not as unknown, nor as sure) in the sum and in the detail."""
    assert judged(kept=(keep(0.0), keep(1.0))) is None  # sums to 1.0 < 1.4
    got = judged(kept=(keep(1.0), keep(1.0), keep(0.0)))
    assert (
        StopReason.ENOUGH_RELEVANT,
        "3 kept relevant >= min_relevant 2, confidences summing to 2.00 >= 2 x 0.7 "
        "(2 of them at 0.7 or more)",
    ) == got


def test_a_sum_a_rounding_error_below_the_bar_still_stops() -> None:
    """Confidences summing to the bar less 1e-9 (float rounding) count as reaching it."""
    one = FilterPolicy(min_relevant=1, stop_confidence=0.7)
    at_the_edge = Facts(Moment.JUDGED, 2, kept=(keep(1 * 0.7 - 1e-9),), new=1, kept_new=1)
    assert StopReason.ENOUGH_RELEVANT == decide_stop(at_the_edge, one)[0]  # type: ignore[index]
    below = Facts(Moment.JUDGED, 2, kept=(keep(0.7 - 2e-9),), new=1, kept_new=1)
    assert decide_stop(below, one) is None
