"""The Verdict value checks types, not only ranges, and bounds what a verdict carries."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corrective_rag.errors import CUT_STORED, InputError, cut_text
from corrective_rag.evaluate.policy import Decision, decide, get_policy
from corrective_rag.loop.stopping import sureness
from corrective_rag.runs.records.codec import from_dict, to_dict
from corrective_rag.types import (
    MAX_MISSING_CHARS,
    MAX_MISSING_ITEMS,
    MAX_RAW_CHARS,
    MAX_REASONING_CHARS,
    Relevance,
    Verdict,
    missing_items,
)

GOOD: dict[str, Any] = {
    "document_id": "d",
    "relevant": True,
    "label": Relevance.HIGH,
    "score": 0.9,
    "confidence": 0.8,
}


@pytest.mark.parametrize(
    "field, value",
    [
        ("relevant", "false"),
        ("relevant", "true"),
        ("relevant", 1),
        ("relevant", 0),
        ("label", "high"),
        ("score", True),
        ("score", "0.9"),
        ("score", math.nan),
        ("score", math.inf),
        ("confidence", False),
        ("confidence", -math.inf),
        ("confidence", math.nan),
        ("reasoning", None),
        ("reasoning", 3),
        ("error", 1),
        ("raw", b"bytes"),
        ("document_id", 7),
    ],
)
def test_verdict_refuses_a_field_of_the_wrong_type(field: str, value: object) -> None:
    """A field of the wrong type is an InputError naming the field, not a truthy stand-in."""
    with pytest.raises(InputError, match=field):
        Verdict(**{**GOOD, field: value})


def test_string_false_is_never_kept_nor_counted() -> None:
    """relevant="false" cannot become a verdict, so it is never kept nor counted as relevant."""
    with pytest.raises(InputError, match="relevant must be True, False or None"):
        Verdict("d", "false", Relevance.HIGH, 0.9, 0.9)  # type: ignore[arg-type]
    good = Verdict("d", False, Relevance.HIGH, 0.9, 0.9)
    assert Decision.DROP == decide(good, get_policy("general"))
    assert (0, 0.0) == sureness([good])


def test_integer_scores_are_stored_as_floats() -> None:
    """An int score or confidence (a JSON 1) is a real number and is stored as float."""
    verdict = Verdict("d", True, Relevance.HIGH, 1, 0)
    assert (1.0, 0.0) == (verdict.score, verdict.confidence)
    assert (float, float) == (type(verdict.score), type(verdict.confidence))


@given(
    relevant=st.booleans(),
    label=st.sampled_from(list(Relevance)),
    score=st.floats(0.0, 1.0) | st.integers(0, 1),
    confidence=st.floats(0.0, 1.0) | st.integers(0, 1),
    reasoning=st.text(max_size=1200),
    missing=st.lists(st.text(max_size=150), max_size=14),
)
def test_every_verdict_that_builds_reads_back_through_the_codec(
    relevant: bool,
    label: Relevance,
    score: float,
    confidence: float,
    reasoning: str,
    missing: list[str],
) -> None:
    """Whatever a Verdict accepts, the results codec reads back unchanged from its JSON."""
    try:
        verdict = Verdict("d", relevant, label, score, confidence, reasoning, tuple(missing))
    except InputError:
        return  # missing items with a comma inside split differently; not this test's concern
    text = json.dumps(to_dict(verdict), allow_nan=False)
    assert verdict == from_dict(Verdict, json.loads(text))


def test_long_fields_are_cut_with_their_length_shown() -> None:
    """A 100 KB reasoning, 3 x 50 KB missing and a 1 MB raw reply are cut to the caps."""
    big = Verdict(
        "d", True, Relevance.HIGH, 0.9, 0.9, reasoning="r" * 100_000, missing=("m" * 50_000,) * 3
    )
    assert MAX_REASONING_CHARS == len(big.reasoning)
    assert big.reasoning.endswith("[... cut: 100,000 characters]")
    assert [MAX_MISSING_CHARS] * 3 == [len(m) for m in big.missing]
    assert big.missing[0].endswith("[... cut: 50,000 characters]")
    many = Verdict("d", True, Relevance.HIGH, 0.9, 0.9, missing=tuple(f"t{i}" for i in range(50)))
    assert tuple(f"t{i}" for i in range(MAX_MISSING_ITEMS)) == many.missing
    raw = Verdict.ungraded("d", "unparseable reply", raw="{" * 1_000_000)
    assert raw.raw is not None and MAX_RAW_CHARS == len(raw.raw)
    assert raw.raw.endswith("[... cut: 1,000,000 characters]")


@given(st.text(max_size=300), st.integers(0, 200))
def test_cut_never_exceeds_its_limit_and_is_idempotent(text: str, limit: int) -> None:
    """The stored cut gives at most limit characters (short text unchanged); a cut text stays."""
    once = cut_text(text, limit, CUT_STORED)
    assert len(once) <= limit
    assert once == cut_text(once, limit, CUT_STORED)
    if len(text) <= limit:
        assert text == once


def test_each_refusal_names_the_verdict_and_the_rule() -> None:
    """Half-graded, out of range, ungraded without a reason and bad missing: named in the error."""
    with pytest.raises(
        InputError, match=r"'d7': relevant, .*must be all set \(graded\) or all None \(ungraded\)$"
    ):
        Verdict("d7", True, None, 0.5, 0.5)
    with pytest.raises(InputError, match=r"'d7': score 1.5 not in 0..1"):
        Verdict("d7", True, Relevance.HIGH, 1.5, 0.5)
    with pytest.raises(InputError, match=r"'d7': confidence -0.1 not in 0..1"):
        Verdict("d7", True, Relevance.HIGH, 0.5, -0.1)
    with pytest.raises(InputError, match=r"ungraded verdict for 'd7' needs an error message"):
        Verdict("d7", None, None, None, None)
    with pytest.raises(InputError, match=r"'d7': missing must be a tuple of strings"):
        Verdict("d7", True, Relevance.HIGH, 0.5, 0.5, missing=(1, 2))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="missing must be a tuple"):
        Verdict("d7", True, Relevance.HIGH, 0.5, 0.5, missing=7)  # type: ignore[arg-type]
    edges = Verdict("d7", True, Relevance.HIGH, 1.0, 0.0)
    assert (1.0, 0.0) == (edges.score, edges.confidence)


def test_missing_is_split_trimmed_and_spaced_once() -> None:
    """A missing text splits at commas and semicolons; items lose outer and doubled spaces."""
    verdict = Verdict("d", True, Relevance.HIGH, 0.9, 0.9, missing="the  date;  a place ,, x")  # type: ignore[arg-type]
    assert ("the date", "a place", "x") == verdict.missing
    listed = Verdict("d", True, Relevance.HIGH, 0.9, 0.9, missing=["a, b", "  ", "c  d"])  # type: ignore[arg-type]
    assert ("a, b", "c d") == listed.missing


def test_ungraded_keeps_its_id_error_and_raw() -> None:
    """Verdict.ungraded records the id, the reason and what the model said."""
    verdict = Verdict.ungraded("d7", "unparseable reply", raw="{oops")
    assert ("d7", "unparseable reply", "{oops", False) == (
        verdict.document_id,
        verdict.error,
        verdict.raw,
        verdict.graded,
    )
    assert Verdict.ungraded("d7", "x").raw is None


def test_cut_keeps_a_text_of_exactly_the_limit_and_marks_at_the_mark_length() -> None:
    """A text as long as the limit is kept whole; a limit as long as the mark gives the mark."""
    assert "x" * 100 == cut_text("x" * 100, 100, CUT_STORED)
    mark = " [... cut: 101 characters]"
    assert mark == cut_text("x" * 101, len(mark), CUT_STORED)
    assert "x" * (len(mark) - 1) == cut_text("x" * 101, len(mark) - 1, CUT_STORED)


def test_missing_items_alone_names_no_verdict() -> None:
    """missing_items called without an id names the empty id in its refusal."""
    with pytest.raises(InputError, match=r"^verdict for '': missing must be a tuple of strings$"):
        missing_items(7)
