import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.policy import (
    PRESETS,
    Decision,
    FilterPolicy,
    crag_action,
    decide,
    get_policy,
)
from corrective_rag.types import CragAction, Relevance, Verdict

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def graded(score: float, confidence: float, doc_id: str = "d") -> Verdict:
    return Verdict(doc_id, score >= 0.5, Relevance.MEDIUM, score, confidence)


@st.composite
def policies(draw: st.DrawFn) -> FilterPolicy:
    medium, high = sorted([draw(unit), draw(unit)])
    lower, upper = sorted([draw(unit), draw(unit)])
    return FilterPolicy(
        high_score=high,
        high_confidence=draw(unit),
        medium_score=medium,
        medium_confidence=draw(unit),
        correct_at=upper,
        incorrect_below=lower,
    )


def test_high_score_with_confidence_is_kept() -> None:
    """A high score with ordinary confidence is kept under the general preset."""
    assert Decision.KEEP == decide(graded(0.9, 0.5), get_policy("general"))


def test_medium_score_needs_high_confidence() -> None:
    """A medium score is kept only when the evaluator is confident."""
    policy = get_policy("general")
    assert Decision.KEEP == decide(graded(0.6, 0.9), policy)
    assert Decision.DROP == decide(graded(0.6, 0.5), policy)


def test_low_score_is_dropped_however_confident() -> None:
    """A low score is dropped even at full confidence."""
    assert Decision.DROP == decide(graded(0.2, 1.0), get_policy("general"))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_not_relevant_verdict_is_dropped_whatever_its_score(name: str) -> None:
    """relevant:false with a high score and full confidence is dropped under every preset."""
    verdict = Verdict("d", False, Relevance.HIGH, 0.95, 1.0)
    assert Decision.DROP == decide(verdict, get_policy(name))
    assert CragAction.INCORRECT == crag_action([verdict], get_policy(name))


def test_ungraded_is_neither_kept_nor_dropped() -> None:
    """An ungraded verdict gets the UNGRADED decision under every preset."""
    verdict = Verdict.ungraded("d", "unparseable")
    assert {Decision.UNGRADED} == {decide(verdict, p) for p in PRESETS.values()}


@given(policies(), unit, unit)
def test_keeping_is_monotone_in_score_and_confidence(
    policy: FilterPolicy, score: float, confidence: float
) -> None:
    """Raising the score or the confidence never turns a kept document into a dropped one."""
    if decide(graded(score, confidence), policy) is Decision.KEEP:
        assert Decision.KEEP == decide(graded(min(1.0, score + 0.1), confidence), policy)
        assert Decision.KEEP == decide(graded(score, min(1.0, confidence + 0.1)), policy)


@given(policies(), unit, unit)
def test_below_medium_score_is_always_dropped(
    policy: FilterPolicy, score: float, confidence: float
) -> None:
    """A graded score below the medium threshold is dropped whatever the confidence."""
    if score < policy.medium_score:
        assert Decision.DROP == decide(graded(score, confidence), policy)


@given(policies(), st.lists(st.one_of(unit, st.none()), max_size=8))
def test_crag_action_follows_thresholds(policy: FilterPolicy, scores: list[float | None]) -> None:
    """CRAG's action is correct iff a relevant verdict's score reaches the upper threshold,
    incorrect iff all graded scores are below the lower one, a not-relevant verdict's counting
    as 0 (or nothing at all was judged)."""
    verdicts = [
        Verdict.ungraded(f"d{i}", "x") if s is None else graded(s, 0.9, f"d{i}")
        for i, s in enumerate(scores)
    ]
    graded_scores = [s if s >= 0.5 else 0.0 for s in scores if s is not None]
    action = crag_action(verdicts, policy)
    if not verdicts:
        assert CragAction.INCORRECT == action
    elif not graded_scores:
        assert CragAction.AMBIGUOUS == action
    elif max(graded_scores) >= policy.correct_at:
        assert CragAction.CORRECT == action
    elif max(graded_scores) < policy.incorrect_below:
        assert CragAction.INCORRECT == action
    else:
        assert CragAction.AMBIGUOUS == action


def test_presets_differ_in_strictness() -> None:
    """Medical is stricter than general, which is stricter than e-commerce."""
    general, medical, shop = get_policy("general"), get_policy("medical"), get_policy("ecommerce")
    assert medical.high_score > general.high_score > shop.high_score
    assert medical.medium_confidence > general.medium_confidence > shop.medium_confidence
    assert ["ecommerce", "general", "legal", "medical"] == sorted(PRESETS)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"high_score": 1.5},
        {"medium_confidence": -0.1},
        {"medium_score": 0.9, "high_score": 0.8},
        {"incorrect_below": 0.8, "correct_at": 0.7},
        {"min_relevant": 0},
        {"min_relevant": True},
        {"high_score": float("nan")},
        {"name": " "},
    ],
)
def test_bad_thresholds_raise_config_error(kwargs: dict[str, object]) -> None:
    """Thresholds outside 0..1 or out of order are refused when the policy is built."""
    with pytest.raises(ConfigError):
        FilterPolicy(**kwargs)  # type: ignore[arg-type]


def test_unknown_preset_raises_config_error() -> None:
    """Asking for a preset that does not exist names the known ones."""
    with pytest.raises(ConfigError, match="general"):
        get_policy("astrology")


def test_policy_dict_round_trip() -> None:
    """A policy survives to_dict/from_dict unchanged, and frozen fields cannot be reassigned."""
    policy = get_policy("legal")
    assert policy == FilterPolicy.from_dict(policy.to_dict())
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.high_score = 0.1  # type: ignore[misc]
