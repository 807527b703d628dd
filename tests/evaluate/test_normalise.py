"""Verdict normalisation: every quirk lands on the one 0..1 scale, or fails explicitly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corrective_rag.errors import VerdictParseError
from corrective_rag.evaluate.normalise import (
    DEFAULT_CONFIDENCE,
    normalise_verdict,
    to_label,
    to_relevant,
    to_unit,
)
from corrective_rag.types import Relevance

anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["yes", "no", "High", "LOW", "85%", "8/10", "0.3", "relevant", "true"]),
)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["relevant", "label", "score", "confidence", "scale", "reasoning"]),
        anything,
    )
)
def test_any_object_gives_a_valid_verdict_or_a_parse_error(item):
    """Whatever the model wrote, the result is a graded verdict on 0..1 or VerdictParseError."""
    try:
        verdict = normalise_verdict("d", item)
    except VerdictParseError:
        return
    if not verdict.graded:
        assert verdict.error is not None and "unusable number" in verdict.error
        return
    assert verdict.score is not None and verdict.confidence is not None
    assert 0.0 <= verdict.score <= 1.0
    assert 0.0 <= verdict.confidence <= 1.0


@given(st.floats(0.0, 1.0))
def test_unit_values_are_kept(x):
    """A number already on 0..1 is unchanged."""
    assert x == to_unit(x)


@given(st.integers(2, 100))
def test_declared_percentages(p):
    """A percentage the value declares ('85%') maps to p/100."""
    assert p / 100 == to_unit(f"{p}%")


@given(st.integers(2, 10))
def test_undeclared_number_above_one_is_read_on_ten(n):
    """A bare score in (1, 10] is read on 0-10 (7 -> 0.7), never divided by 100."""
    assert n / 10 == to_unit(n) == to_unit(str(n))


def test_undeclared_ten_point_verdict_is_read_right():
    """A verdict scored 7 with no declared scale is a high, relevant 0.7, not a dropped 0.07."""
    verdict = normalise_verdict("d", {"score": 7})
    assert (0.7, Relevance.HIGH, True) == (verdict.score, verdict.label, verdict.relevant)


def test_undeclared_number_above_ten_is_refused():
    """A bare 85 has no known scale: the verdict is ungraded, not read as a percentage."""
    verdict = normalise_verdict("d", {"relevant": True, "score": 85})
    assert verdict.graded is False
    assert verdict.error is not None and "85 is outside its scale" in verdict.error


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ({"relevant": True, "score": float("nan"), "confidence": float("inf")}, "finite"),
        ({"relevant": True, "score": 0.9, "confidence": float("inf")}, "finite"),
        ({"relevant": True, "score": "NaN"}, "finite"),
        ({"relevant": True, "score": "Infinity"}, "finite"),
        ({"relevant": True, "score": 10**400}, "finite"),
        ({"relevant": True, "score": "1/0"}, "no usable scale"),
        ({"relevant": True, "score": "0/0", "confidence": 0.9}, "no usable scale"),
        ({"relevant": True, "score": 0.9, "confidence": "1/0"}, "no usable scale"),
        ({"relevant": True, "score": "7/1"}, "outside its scale"),
        ({"relevant": True, "score": "12/10"}, "outside its scale"),
        ({"relevant": True, "score": "150%"}, "outside its scale"),
        ({"relevant": True, "score": -0.2}, "outside its scale"),
        ({"relevant": True, "score": 0.9, "confidence": 150}, "outside its scale"),
        ({"relevant": True, "score": 7, "scale": 0}, "not a scale"),
        ({"relevant": True, "score": 7, "scale": float("inf")}, "not a scale"),
        ({"relevant": True, "score": 7, "out_of": "nan"}, "not a scale"),
    ],
)
def test_unusable_numbers_make_an_ungraded_verdict_with_the_reason(item, why):
    """NaN, infinity, a zero denominator or a value above its own scale is ungraded, never kept."""
    verdict = normalise_verdict("d", item, raw="the reply")
    assert (False, None, None, "the reply") == (
        verdict.graded,
        verdict.score,
        verdict.confidence,
        verdict.raw,
    )
    assert verdict.error is not None and why in verdict.error


def test_a_declared_fraction_is_read_on_its_own_scale():
    """'7/10' is 0.7 and '1/1' is 1.0: a declared scale is never re-read as 0-10."""
    assert 0.7 == to_unit("7/10")
    assert 1.0 == to_unit("1/1")
    assert 0.5 == to_unit("2.5/5")


def test_label_bands_follow_the_contract_boundaries():
    """The label derived from a score uses types.RELEVANT_FROM: 0.45 is low and not relevant."""
    low = normalise_verdict("d", {"score": 0.45})
    medium = normalise_verdict("d", {"score": 0.5})
    assert (Relevance.LOW, False) == (low.label, low.relevant)
    assert (Relevance.MEDIUM, True) == (medium.label, medium.relevant)


@given(st.integers(0, 10))
def test_declared_ten_point_scale(n):
    """On a declared 1-10 scale, n maps to n/10, as does the string 'n/10'."""
    assert n / 10 == to_unit(n, scale=10) == to_unit(f"{n}/10")


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_to_unit_is_monotonic(a, b):
    """Ordering is preserved on the unit scale."""
    if a <= b:
        assert to_unit(a) <= to_unit(b)


def test_out_of_scale_raises():
    """A negative score or one beyond its declared scale is an error, not a clamp."""
    with pytest.raises(VerdictParseError):
        to_unit(-0.2)
    with pytest.raises(VerdictParseError):
        to_unit(7, scale=5)
    with pytest.raises(VerdictParseError):
        to_unit(250)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), ("yes", True), ("NO", False), ("true", True), (0, False), ("maybe", None)],
)
def test_relevance_flags(value, expected):
    """Flags in the usual spellings are read; unknown ones are None."""
    assert expected == to_relevant(value)


def test_labels_and_synonyms():
    """Labels in any case and common synonyms map onto high/medium/low."""
    assert Relevance.HIGH == to_label("High")
    assert Relevance.MEDIUM == to_label("partially-relevant")
    assert Relevance.LOW == to_label("Not relevant")
    assert to_label("sort of") is None


def test_missing_fields_are_derived():
    """A lone label gives its score and relevance; missing confidence is the documented default."""
    verdict = normalise_verdict("d", {"label": "medium"})
    assert (True, 0.6, DEFAULT_CONFIDENCE) == (verdict.relevant, verdict.score, verdict.confidence)
    verdict = normalise_verdict("d", {"relevant": "no", "score": "8", "scale": 10})
    assert (False, 0.8, Relevance.HIGH) == (verdict.relevant, verdict.score, verdict.label)


def test_nothing_usable_raises():
    """An object with only reasoning cannot be graded."""
    with pytest.raises(VerdictParseError):
        normalise_verdict("d", {"reasoning": "looks fine"})
