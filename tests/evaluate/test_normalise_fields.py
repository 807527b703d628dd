"""Every field and alias normalise_verdict reads reaches the verdict (mutation-tested)."""

from __future__ import annotations

import pytest

from corrective_rag.errors import VerdictParseError
from corrective_rag.evaluate.normalise import (
    DEFAULT_CONFIDENCE,
    normalise_verdict,
    to_relevant,
    to_unit,
)
from corrective_rag.types import Relevance


def test_every_field_is_carried_over() -> None:
    """Score, confidence, label, relevant, reasoning and missing all reach the verdict."""
    verdict = normalise_verdict(
        "d",
        {
            "relevant": False,
            "label": "medium",
            "score": 0.55,
            "confidence": 0.65,
            "reasoning": "  says half  ",
            "missing": ["the date", None, " the place "],
        },
    )
    assert ("d", False, Relevance.MEDIUM, 0.55, 0.65) == (
        verdict.document_id,
        verdict.relevant,
        verdict.label,
        verdict.score,
        verdict.confidence,
    )
    assert ("says half", ("the date", "the place")) == (verdict.reasoning, verdict.missing)


def test_the_alias_keys_are_read() -> None:
    """relevance_score, is_relevant, relevance and reason stand in for the usual keys."""
    verdict = normalise_verdict(
        "d", {"relevance_score": 0.3, "is_relevant": True, "relevance": "low", "reason": "why"}
    )
    assert (True, Relevance.LOW, 0.3, "why") == (
        verdict.relevant,
        verdict.label,
        verdict.score,
        verdict.reasoning,
    )


def test_a_relevance_word_is_a_label_and_a_flag() -> None:
    """'relevance': 'yes' is no label but a flag; 'relevance': 'high' is a label."""
    flagged = normalise_verdict("d", {"relevance": "yes"})
    assert (True, 0.8, Relevance.HIGH) == (flagged.relevant, flagged.score, flagged.label)
    unflagged = normalise_verdict("d", {"relevance": "no"})
    assert (False, 0.2, Relevance.LOW) == (unflagged.relevant, unflagged.score, unflagged.label)
    labelled = normalise_verdict("d", {"relevance": "high"})
    assert (True, 0.9) == (labelled.relevant, labelled.score)


def test_a_missing_text_is_split_and_no_reasoning_is_empty() -> None:
    """A missing string is split at commas; no reasoning is ''; no confidence is the default."""
    verdict = normalise_verdict("d", {"relevant": True, "missing": "a date; a place, "})
    assert (("a date", "a place"), "", DEFAULT_CONFIDENCE) == (
        verdict.missing,
        verdict.reasoning,
        verdict.confidence,
    )
    assert () == normalise_verdict("d", {"relevant": True, "missing": None}).missing
    assert "" == normalise_verdict("d", {"relevant": True, "reasoning": "   "}).reasoning


def test_a_declared_scale_applies_to_the_score_only() -> None:
    """scale / out_of / max_score divide the score; the confidence stays on its own scale."""
    for key in ("scale", "out_of", "max_score"):
        verdict = normalise_verdict("d", {"score": 4, key: 5, "confidence": 0.8})
        assert (0.8, 0.8) == (verdict.score, verdict.confidence)
    assert 0.4 == normalise_verdict("d", {"score": 4, "scale": "ten"}).score  # no number: 0-10
    assert 0.85 == normalise_verdict("d", {"score": 0.9, "confidence": 85}).confidence
    assert 0.7 == normalise_verdict("d", {"score": 0.9, "confidence": "7"}).confidence
    assert 1.0 == normalise_verdict("d", {"score": 0.9, "confidence": 100}).confidence


def test_parse_errors_carry_the_reply_and_name_the_document() -> None:
    """A verdict that is no object, or holds nothing gradable, names the id and keeps raw."""
    for item in (["not", "an", "object"], {"reasoning": "fine"}):
        with pytest.raises(VerdictParseError, match="'doc-7'") as caught:
            normalise_verdict("doc-7", item, raw="the reply")  # type: ignore[arg-type]
        assert "the reply" == caught.value.raw


def test_an_unusable_number_keeps_the_reply_and_names_the_value() -> None:
    """The ungraded verdict says which value and keeps the reply as raw."""
    verdict = normalise_verdict("d", {"score": "1/0"}, raw="the reply")
    assert "the reply" == verdict.raw
    assert verdict.error is not None and "'1/0'" in verdict.error


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, True), (1.0, True), (0.0, False), (2, None), (" Yes ", True), ("N", False), (None, None)],
)
def test_numbers_and_padded_words_as_flags(value: object, expected: bool | None) -> None:
    """1 and 0 (int or float) are flags, other numbers are not; words are trimmed and cased."""
    assert expected == to_relevant(value)


@pytest.mark.parametrize(
    ("confidence", "expected"),
    [(10, 1.0), (10.5, 0.105), (100, 1.0), (85, 0.85), ("40", 0.4)],
)
def test_a_confidence_above_ten_is_a_percentage_up_to_a_hundred(
    confidence: object, expected: float
) -> None:
    """10 is read on 0-10 (1.0); from just above 10 up to 100 it is a percentage."""
    assert expected == normalise_verdict("d", {"score": 0.9, "confidence": confidence}).confidence


def test_a_confidence_above_a_hundred_is_unusable() -> None:
    """101 fits no scale: the verdict is ungraded."""
    assert not normalise_verdict("d", {"score": 0.9, "confidence": 101}).graded


def test_a_declared_scale_of_one_is_the_unit_scale_and_zero_is_refused() -> None:
    """scale 1 keeps 0.5 as 0.5; scale 0 makes the verdict ungraded, naming the key and value."""
    assert 0.5 == normalise_verdict("d", {"score": 0.5, "scale": 1}).score
    verdict = normalise_verdict("d", {"score": 0.5, "scale": 0})
    assert verdict.error is not None and "scale 0 is not a scale" in verdict.error


def test_a_long_value_is_shown_cut_in_the_reason() -> None:
    """A 50-digit score is named by its first 37 characters and '...', a 40-character one whole."""
    long = "9" * 50
    error = normalise_verdict("d", {"score": long}).error or ""
    assert f"value '{long[:36]}... is outside" in error
    exact = "1" * 38  # repr adds two quotes: 40 characters, shown whole
    assert f"value '{exact}' is outside" in (normalise_verdict("d", {"score": exact}).error or "")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("1/0", "value '1/0' has no usable scale"),
        ("-0.5", "value '-0.5' is outside its scale"),
        ("NaN", "value 'NaN' is not a finite number"),
    ],
)
def test_to_unit_names_the_value_and_keeps_it_as_raw(value: str, said: str) -> None:
    """to_unit's refusal says which value and why, and carries the value as raw."""
    with pytest.raises(VerdictParseError) as caught:
        to_unit(value)
    assert said in str(caught.value)
    assert value == caught.value.raw


def test_a_value_one_past_the_shown_length_is_cut_and_no_raw_is_empty() -> None:
    """A 41-character value is shown cut; without a reply given, raw is the empty string."""
    over = "1" * 39  # repr adds two quotes: 41 characters
    verdict = normalise_verdict("d", {"score": over})
    assert f"value '{over[:36]}... is outside" in (verdict.error or "")
    assert "" == verdict.raw
