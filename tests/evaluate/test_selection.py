"""The expected-F1 cut: how many of a question's judged documents the local judge keeps."""

from __future__ import annotations

import math

import pytest

from corrective_rag.evaluate.selection import expected_f1_cut, keep_from


def test_two_stand_outs_among_weak_documents_keep_two():
    """Two likely documents among eight unlikely ones: the cut keeps exactly those two."""
    probabilities = [0.9, 0.85, 0.1, 0.08, 0.1, 0.05, 0.07, 0.1, 0.02, 0.1]
    cut = expected_f1_cut(probabilities)
    assert 2 == sum(p >= cut for p in probabilities)


def test_many_middling_documents_keep_them_all():
    """Ten documents each about 40% likely: keeping all maximises the expected F1."""
    probabilities = [0.45, 0.4, 0.42, 0.38, 0.41, 0.39, 0.4, 0.37, 0.43, 0.36]
    assert min(probabilities) == expected_f1_cut(probabilities)


def test_cut_does_not_depend_on_order_and_keeps_ties_together():
    """The cut is a probability: documents tied at it are kept or dropped together, in any order."""
    probabilities = [0.2, 0.8, 0.8, 0.1]
    assert expected_f1_cut(probabilities) == expected_f1_cut(list(reversed(probabilities)))
    cut = expected_f1_cut(probabilities)
    assert [0.8, 0.8] == [p for p in probabilities if p >= cut]


def test_empty_keeps_nothing_and_the_floor_bounds_the_cut():
    """No documents give a cut of 1.0; keep_from never cuts below its floor (nor above keep_at)."""
    assert 1.0 == expected_f1_cut([])
    assert 0.3 == pytest.approx(keep_from([0.05, 0.04, 0.03], 0.3))
    assert 0.9 == pytest.approx(keep_from([0.9, 0.1, 0.1, 0.1], 0.3))


def test_a_likely_document_is_kept_whatever_the_cut():
    """Beside a stand-out document, one the judge gives keep_at or more is kept all the same."""
    probabilities = [0.95, 0.32, 0.05, 0.05, 0.05]
    assert 0.95 == expected_f1_cut(probabilities)  # F1 alone keeps the stand-out only
    assert 0.3 == pytest.approx(keep_from(probabilities, 0.2, 0.3))


def _kept(probabilities: list[float], **bounds: object) -> list[float]:
    cut = keep_from(probabilities, 0.1, 0.3, **bounds)  # type: ignore[arg-type]
    return [p for p in probabilities if p >= cut]


def test_without_the_relative_bounds_the_cut_is_unchanged():
    """margin=inf and no cap give the expected-F1 cut within floor and keep_at, as before."""
    probabilities = [0.95, 0.32, 0.05, 0.05, 0.05]
    assert keep_from(probabilities, 0.2, 0.3) == keep_from(
        probabilities, 0.2, 0.3, margin=math.inf, cap=None
    )


def test_the_margin_holds_back_documents_far_below_a_stand_out():
    """Beside a stand-out document, a 0.4 one that keep_at would keep is dropped by a margin."""
    probabilities = [0.95, 0.4, 0.35, 0.3, 0.3]
    assert [0.95, 0.4, 0.35, 0.3, 0.3] == _kept(probabilities)
    assert [0.95] == _kept(probabilities, margin=2.0)


def test_documents_alike_stay_within_the_margin_up_to_the_cap():
    """Ten documents close to one another are all within the margin; the cap keeps the top ones."""
    probabilities = [0.45, 0.43, 0.42, 0.41, 0.4, 0.4, 0.39, 0.38, 0.37, 0.36]
    assert probabilities == _kept(probabilities, margin=2.0)
    assert [0.45, 0.43, 0.42] == _kept(probabilities, margin=2.0, cap=3)


def test_the_relative_bounds_do_not_depend_on_order_and_keep_ties():
    """Documents tied at the cap are kept together, in any order."""
    probabilities = [0.2, 0.8, 0.8, 0.1]
    cut = keep_from(probabilities, 0.05, 0.3, cap=1)
    assert cut == keep_from(probabilities[::-1], 0.05, 0.3, cap=1)
    assert [0.8, 0.8] == [p for p in probabilities if p >= cut]


def test_the_best_is_kept_at_any_margin_and_at_the_edges():
    """The best document above the floor is kept, even at probability 1 or a tiny margin."""
    for probabilities in ([1.0, 0.5], [0.3], [0.999999, 0.0]):
        cut = keep_from(probabilities, 0.0, 0.3, margin=1e-6, cap=1)
        assert probabilities[0] >= cut
