"""Fusion: hand-computed values and hypothesis properties of RRF and the convex combination."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corrective_rag.errors import ConfigError
from corrective_rag.store.fusion import (
    ConvexFusion,
    RRFusion,
    convex_combination,
    min_max,
    reciprocal_rank_fusion,
)

ids = st.sampled_from([f"d{i}" for i in range(12)])
# hundredths keep differences far above float rounding, so ties are real ties
scores = st.integers(min_value=-5000, max_value=5000).map(lambda x: x / 100)
runs = st.lists(st.tuples(ids, scores), max_size=10, unique_by=lambda p: p[0]).map(
    lambda run: sorted(run, key=lambda p: -p[1])
)
alphas = st.floats(min_value=0.0, max_value=1.0)


def test_min_max_hand_values() -> None:
    """Min-max maps the lowest score to 0, the highest to 1 and equal scores to 1."""
    assert [0.0, 0.5, 1.0] == min_max([2.0, 4.0, 6.0])
    assert [1.0, 1.0] == min_max([3.0, 3.0])
    assert [] == min_max([])


def test_convex_hand_values() -> None:
    """The convex combination weighs each leg's normalised score and scores absent ids 0."""
    fused = convex_combination(
        [[("a", 10.0), ("b", 5.0), ("c", 0.0)], [("b", 0.9), ("d", 0.1)]], [0.5, 0.5]
    )
    assert [("b", 0.75), ("a", 0.5), ("c", 0.0), ("d", 0.0)] == fused


def test_rrf_hand_values() -> None:
    """RRF adds 1/(k + rank) per leg, with k = 60 by default."""
    fused = RRFusion().fuse([[("a", 3.0), ("b", 2.0)], [("b", 0.9)]])
    assert ["b", "a"] == [doc_id for doc_id, _ in fused]
    assert pytest.approx(1 / 62 + 1 / 61) == fused[0][1]


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_convex_rejects_alpha_outside_unit_interval(bad: float) -> None:
    """An alpha outside 0..1 is a configuration error."""
    with pytest.raises(ConfigError):
        ConvexFusion(bad)


def test_rrf_rejects_all_zero_weights() -> None:
    """RRF needs at least one positive weight."""
    with pytest.raises(ConfigError):
        RRFusion(weights=(0.0, 0.0))


@given(runs, runs, alphas)
def test_convex_ranking_is_a_permutation_of_the_union(bm25, dense, alpha) -> None:
    """Every candidate of either leg appears exactly once in the fused ranking."""
    fused = ConvexFusion(alpha).fuse([bm25, dense])
    assert sorted({i for i, _ in bm25} | {i for i, _ in dense}) == sorted(i for i, _ in fused)


@given(runs, runs)
def test_rrf_ranking_is_a_permutation_of_the_union(bm25, dense) -> None:
    """Every candidate of either leg appears exactly once in the RRF ranking."""
    fused = RRFusion().fuse([bm25, dense])
    assert sorted({i for i, _ in bm25} | {i for i, _ in dense}) == sorted(i for i, _ in fused)


@given(runs, runs, alphas, st.randoms())
def test_convex_scores_ignore_input_order(bm25, dense, alpha, rnd) -> None:
    """Shuffling the pairs inside a leg changes no fused score (scores, not positions, count)."""
    shuffled = list(bm25)
    rnd.shuffle(shuffled)
    assert dict(ConvexFusion(alpha).fuse([bm25, dense])) == pytest.approx(
        dict(ConvexFusion(alpha).fuse([shuffled, dense]))
    )


@given(runs, runs, alphas)
def test_convex_swapping_legs_and_alpha_gives_the_same_scores(bm25, dense, alpha) -> None:
    """Swapping the legs together with the weights (alpha -> 1 - alpha) changes no score."""
    assert dict(ConvexFusion(alpha).fuse([bm25, dense])) == pytest.approx(
        dict(ConvexFusion(1.0 - alpha).fuse([dense, bm25]))
    )


@given(runs, runs, st.floats(min_value=0.0, max_value=5.0))
def test_rrf_swapping_legs_with_weights_gives_the_same_scores(bm25, dense, weight) -> None:
    """Swapping legs together with their weights changes no RRF score."""
    assert dict(RRFusion(weights=(1.0, weight)).fuse([bm25, dense])) == pytest.approx(
        dict(RRFusion(weights=(weight, 1.0)).fuse([dense, bm25]))
    )


@given(runs.filter(lambda r: len(r) >= 2), runs, alphas, st.floats(min_value=0.0, max_value=100))
def test_convex_raising_a_score_never_lowers_the_fused_score(bm25, dense, alpha, boost) -> None:
    """Raising one document's BM25 score (others fixed) does not lower its fused score."""
    target = bm25[-1][0]
    raised = [(i, s + boost if i == target else s) for i, s in bm25]
    before = dict(ConvexFusion(alpha).fuse([bm25, dense]))[target]
    after = dict(ConvexFusion(alpha).fuse([raised, dense]))[target]
    assert after >= before - 1e-12


@given(runs.filter(lambda r: len(r) >= 2), runs, st.data())
def test_rrf_moving_a_document_up_never_lowers_its_score(bm25, dense, data) -> None:
    """Moving a document to a better rank in one leg does not lower its fused score."""
    position = data.draw(st.integers(min_value=1, max_value=len(bm25) - 1))
    moved = list(bm25)
    item = moved.pop(position)
    moved.insert(position - 1, item)
    before = dict(RRFusion().fuse([bm25, dense]))[item[0]]
    after = dict(RRFusion().fuse([moved, dense]))[item[0]]
    assert after >= before


@given(runs.filter(bool), runs)
def test_weight_one_reduces_to_that_leg(bm25, dense) -> None:
    """With all weight on one leg, the fused ranking orders that leg's documents as the leg does."""
    for alpha, leg in ((0.0, bm25), (1.0, dense)):
        fused = [i for i, _ in ConvexFusion(alpha).fuse([bm25, dense])]
        own = dict(leg)
        in_leg = [own[i] for i in fused if i in own]
        assert sorted(in_leg, reverse=True) == in_leg
    rrf = [i for i, _ in RRFusion(weights=(1.0, 0.0)).fuse([bm25, dense])]
    assert [i for i, _ in bm25] == rrf[: len(bm25)]


@given(st.lists(st.lists(ids, max_size=8), min_size=1, max_size=3))
def test_rrf_function_scores_are_positive_and_sorted(rankings) -> None:
    """reciprocal_rank_fusion returns positive scores in descending order."""
    fused = reciprocal_rank_fusion(rankings)
    values = [s for _, s in fused]
    assert sorted(values, reverse=True) == values
    assert all(v > 0 for v in values)
