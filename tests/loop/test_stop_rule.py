"""The stop rule's edges: missing parts, a full evaluator, sureness clamps (pure, fast)."""

from __future__ import annotations

import pytest

from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.loop.stopping import confident, full_at, stop_rule, sureness
from corrective_rag.types import Relevance, StopReason, Verdict

POLICY = FilterPolicy(min_relevant=2, stop_confidence=0.7)


def keep(confidence: float, missing: tuple[str, ...] = (), relevant: bool = True) -> Verdict:
    return Verdict("d", relevant, Relevance.HIGH, 0.9, confidence, missing=missing)


def test_exactly_enough_confidence_stops_and_a_hair_less_does_not() -> None:
    """Confidences summing to min_relevant x stop_confidence stop; just below does not."""
    assert StopReason.ENOUGH_RELEVANT == stop_rule([keep(0.7), keep(0.7)], POLICY)[0]  # type: ignore[index]
    assert stop_rule([keep(0.7), keep(0.69)], POLICY) is None
    assert stop_rule([keep(1.0)], POLICY) is None  # one keep is not min_relevant 2


def test_a_part_every_keep_misses_blocks_both_stops_until_one_covers_it() -> None:
    """A missing item shared by all keeps (any case) blocks; one keep without it unblocks."""
    both = [keep(0.9, ("Second side",)), keep(0.9, ("second side",))]
    assert stop_rule(both, POLICY) is None
    assert stop_rule(both, POLICY, stalled=True) is None
    assert StopReason.ENOUGH_RELEVANT == stop_rule([both[0], keep(0.9)], POLICY)[0]  # type: ignore[index]


def test_stalled_with_unsure_keeps_is_kept_unconfident() -> None:
    """min_relevant unsure keeps and a stalled iteration: kept_unconfident, saying why."""
    reason, why = stop_rule([keep(0.4), keep(0.4)], POLICY, stalled=True)  # type: ignore[misc]
    assert StopReason.KEPT_UNCONFIDENT == reason
    assert "sum to only 0.80 < 2 x 0.7" in why and "kept nothing new" in why
    assert stop_rule([keep(0.4), keep(0.4)], POLICY) is None
    assert stop_rule([keep(0.4)], POLICY, stalled=True) is None


@pytest.mark.parametrize(
    ("kept", "reason", "said"),
    [
        ([keep(0.9), keep(0.9)], StopReason.ENOUGH_RELEVANT, "confidences summing to 1.80"),
        ([keep(0.4), keep(0.4)], StopReason.KEPT_UNCONFIDENT, "sum to only 0.80"),
        ([keep(0.9, ("x",)), keep(0.9, ("x",))], StopReason.KEPT_UNCONFIDENT, "missing x"),
        ([keep(0.9)], StopReason.NO_PROGRESS, "1 kept < min_relevant 2"),
    ],
)
def test_a_full_evaluator_always_stops_the_run(
    kept: list[Verdict], reason: StopReason, said: str
) -> None:
    """Once the evaluator keeps no more, the run stops, naming the cap, never as stalled."""
    got, why = stop_rule(kept, POLICY, full=2)  # type: ignore[misc]
    assert reason == got
    assert said in why
    assert "keeps at most 2 documents a question and has judged 2 relevant" in why
    assert "kept nothing new" not in why


def test_full_at_counts_relevant_verdicts_against_keeps_at_most() -> None:
    """full_at is the cap once that many verdicts say relevant, else None; no cap, never."""

    class Capped:
        keeps_at_most = 2

    class Flagged:
        keeps_at_most = True  # a bool is no cap

    no = keep(0.9, relevant=False)
    ungraded = Verdict.ungraded("u", "no grade")
    assert full_at(Capped(), [keep(0.9), no, ungraded]) is None
    assert 2 == full_at(Capped(), [keep(0.9), keep(0.1)])
    assert 2 == full_at(Capped(), [keep(0.9), keep(0.1), keep(0.5)])
    assert full_at(Flagged(), [keep(0.9)] * 3) is None
    assert full_at(object(), [keep(0.9)] * 3) is None


def test_sureness_counts_relevant_keeps_and_confident_needs_the_bar() -> None:
    """sureness sums relevant keeps' confidences only; confident needs stop_confidence."""
    assert (2, pytest.approx(1.3)) == sureness([keep(0.6), keep(0.7), keep(0.9, relevant=False)])
    assert confident(keep(0.7), POLICY) and not confident(keep(0.69), POLICY)
    assert not confident(keep(0.9, relevant=False), POLICY)


def test_details_name_the_cap_only_when_full_and_list_every_missing_part() -> None:
    """Without a full evaluator no cap is named; every shared missing part is listed."""
    _, why = stop_rule([keep(0.9), keep(0.9)], POLICY)  # type: ignore[misc]
    assert why.endswith("(2 of them at 0.7 or more)")
    _, unsure = stop_rule([keep(0.4), keep(0.4)], POLICY, stalled=True)  # type: ignore[misc]
    assert unsure.endswith(", and the last iteration kept nothing new")
    two = [keep(0.9, ("a", "b")), keep(0.9, ("b", "a"))]
    _, why = stop_rule(two, POLICY, full=2)  # type: ignore[misc]
    assert why.startswith("2 kept, every one missing a, b; the evaluator")


def test_different_missing_parts_do_not_block() -> None:
    """Keeps missing different parts share none: the run may stop."""
    kept = [keep(0.9, ("a",)), keep(0.9, ("b",))]
    assert StopReason.ENOUGH_RELEVANT == stop_rule(kept, POLICY)[0]  # type: ignore[index]
