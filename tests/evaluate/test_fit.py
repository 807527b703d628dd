"""AUC, F1 and the fitted threshold against brute-force references (issue 46 items 5 and 8).

The fit sorts once and counts from both ends; the references here try every candidate and
every pair, so any shortcut that changes a result fails. Thresholds other than 0.5 are fitted
throughout (a fit that returned 0.5 whatever the data passed the last round's tests).

Mutation testing (mutmut on corrective_rag/evaluate/check/fit.py with this file): equivalent
survivors, named so a later run can tell them from new ones:

- ``EDGE`` 1e-4 changed to another tiny value: only a fit at an end of 0..1 meets the clamp.
- the error messages' texts (asserted by their start only).
- ``dtype=`` of the arrays built (float64 and bool are what numpy infers from these lists),
  ``kind="stable"`` of the sort (ties have equal scores), ``searchsorted``'s side given as its
  default, ``strict=`` of ``zip`` over lists of one length, and the rounding of F1 to 12 or 13
  places.
- in the F1 of each candidate: ``tp >= 0`` for ``tp > 0``, a factor 3 for 2, or a denominator
  floored at 2: a sum of kept and relevant pairs of 1 has no true positive, and a common factor
  does not move the best candidate.
- the floors' bound ``<= 1.0`` as ``< 1.0`` or ``<= 2.0``: a policy's cut never passes 1.
- Last run after the merges (this file with test_profile.py, test_compare.py and
  tests/cli/test_judge_check.py against fit.py, grading.py and profile_file.py): 452 mutants,
  387 killed; the survivors are these, those named in test_profile.py, and grading's progress
  arguments and contract check, now killed in test_compare.py.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate import get_policy
from corrective_rag.evaluate.check.fit import EDGE, auc, f1, f1_at, fit_threshold
from corrective_rag.evaluate.scoring import kept_from, kept_from_each


def _reference_auc(scores, labels):
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def _reference_fit(scores, labels, cut=lambda t: t, fixed=None):
    """Every candidate tried, F1 computed from scratch for each: the definition itself."""
    values = sorted({s for s in scores if s is not None})
    candidates = [values[0] / 2, (values[-1] + 1) / 2]
    candidates += [(a + b) / 2 for a, b in itertools.pairwise(values)]
    candidates += [cut(c) for c in candidates if cut(c) <= 1.0]

    def score(t):
        kept = [
            (s >= cut(t)) if s is not None else bool(fixed and fixed[i])
            for i, s in enumerate(scores)
        ]
        return f1(kept, labels)

    best = max(candidates, key=lambda t: (round(score(t), 12), t))
    return min(max(best, EDGE), 1 - EDGE)


def test_hand_computed_values():
    """AUC, F1 and the F1-best threshold on a small example worked by hand."""
    scores, labels = [0.9, 0.8, 0.4, 0.3, 0.1], [True, False, True, False, False]
    assert 5 / 6 == pytest.approx(auc(scores, labels))
    assert 4 / 5 == pytest.approx(f1_at(scores, labels, 0.35))  # tp 2, fp 1, fn 0
    assert 0.35 == pytest.approx(fit_threshold(scores, labels))
    assert auc([0.5], [True]) is None
    assert auc([0.5, 0.5], [True, False]) == 0.5  # a tie counts half
    assert 0.0 == f1([False, False], [True, False])
    assert 2 / 3 == pytest.approx(f1([True, True], [True, False]))
    assert 1.0 == f1_at([0.5, 0.2], [True, False], 0.5)  # a score at the threshold is kept


def test_the_fit_moves_with_the_data():
    """Relevant pairs from 0.7 up, irrelevant ones below 0.6: the threshold lies between, not
    at 0.5; shifted down, it follows."""
    scores = [0.9, 0.8, 0.7, 0.6, 0.3, 0.2]
    labels = [True, True, True, False, False, False]
    assert 0.65 == pytest.approx(fit_threshold(scores, labels))
    assert 0.25 == pytest.approx(fit_threshold([s - 0.4 for s in scores], labels))


def test_pairs_without_a_score_keep_their_own_decision():
    """A pair whose probability could not be read is kept (or not) as its written verdict says,
    whatever the threshold: it counts in F1 but does not move the fit."""
    scores = [0.9, 0.8, None, 0.3, None]
    labels = [True, True, True, False, False]
    fixed = [False, False, True, False, True]
    t = fit_threshold(scores, labels, fixed=fixed)
    assert 0.3 < t < 0.8
    assert _reference_fit(scores, labels, fixed=fixed) == pytest.approx(t)


def test_a_policy_floor_is_a_candidate_and_wins_its_ties():
    """Under the general policy a probability verdict is kept from max(t, 0.3): a threshold
    under 0.3 keeps what 0.3 keeps, and the tie goes to 0.3, so the threshold written is the
    one the run keeps from."""
    general = get_policy("general")
    scores = [0.5, 0.31, 0.28, 0.1]
    labels = [True, True, False, False]
    assert 0.295 == pytest.approx(fit_threshold(scores, labels))  # no floor: the midpoint
    assert 0.3 == pytest.approx(
        fit_threshold(scores, labels, cut=lambda x: kept_from_each(x, general))
    )


def test_no_score_to_fit_on_is_refused():
    """Nothing scored (every probability unreadable): no threshold can be fitted."""
    with pytest.raises(ConfigError, match=r"^no scores to fit a threshold on$"):
        fit_threshold([None, None], [True, False])
    with pytest.raises(ConfigError, match=r"^scores, labels and decisions differ in length$"):
        fit_threshold([0.5], [True, False])
    with pytest.raises(ConfigError, match=r"^scores, labels and decisions differ in length$"):
        fit_threshold([0.5, 0.4], [True, False], fixed=[True])
    with pytest.raises(ConfigError, match=r"^scores and labels differ in length$"):
        auc([0.5], [True, False])
    with pytest.raises(ConfigError, match=r"^decisions and labels differ in length$"):
        f1([True], [True, False])


def test_the_fit_stays_inside_zero_and_one():
    """All scores 1.0 (or 0.0): the fit is kept just inside (0, 1)."""
    assert 1 - EDGE == fit_threshold([1.0, 1.0], [False, False])
    assert EDGE == fit_threshold([0.0, 0.0], [True, True])


probabilities = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from([i / 20 for i in range(21)])),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=30,
).filter(lambda rows: any(s is not None for s, _, _ in rows))


@settings(max_examples=300, deadline=None)
@given(probabilities, st.sampled_from(["none", "general", "medical", "ecommerce"]))
def test_the_fast_fit_is_the_brute_force_fit(rows, name):
    """On any data, with any policy's cut and pairs without a score, the sorted fit finds the
    threshold trying every candidate finds."""
    scores = [s for s, _, _ in rows]
    labels = [y for _, y, _ in rows]
    fixed = [k for _, _, k in rows]
    policy = None if name == "none" else get_policy(name)
    scalar = (lambda t: t) if policy is None else (lambda t: kept_from(t, policy))
    each = None if policy is None else (lambda ts: kept_from_each(ts, policy))
    assert _reference_fit(scores, labels, scalar, fixed) == pytest.approx(
        fit_threshold(scores, labels, cut=each, fixed=fixed)
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([-1.0, 0.0, 0.3, 0.5, 0.7, 1.0]), st.booleans())))
def test_the_rank_auc_is_the_pairwise_auc(rows):
    """Mann-Whitney from ranks equals counting every relevant-irrelevant pair, ties included."""
    scores = [s for s, _ in rows]
    labels = [y for _, y in rows]
    expected = _reference_auc(scores, labels)
    got = auc(scores, labels)
    assert (expected is None) == (got is None)
    if expected is not None:
        assert expected == pytest.approx(got)


def test_a_hundred_thousand_pairs_fit_as_the_small_ones_do():
    """100,000 pairs (the most a pairs file holds): the fit is the one found on a tenth of the
    candidates by the reference, and the AUC is the pairwise one on a sample. (Its speed is
    measured in benchmarks/judge_fit.py.)"""
    rng = random.Random(7)
    labels = [rng.random() < 0.3 for _ in range(100_000)]
    scores = [round(min(1.0, max(0.0, rng.gauss(0.7 if y else 0.4, 0.15))), 3) for y in labels]
    t = fit_threshold(scores, labels)
    assert 0.45 < t < 0.65
    best = f1_at(scores, labels, t)
    for other in (t - 0.02, t + 0.02, 0.5):
        assert f1_at(scores, labels, other) <= best + 1e-12
    sample = slice(0, 2000)
    assert _reference_auc(scores[sample], labels[sample]) == pytest.approx(
        auc(scores[sample], labels[sample])
    )
