"""Fitting the learned judge's layer: the optimum of the loss it states, fine-tuning pulled
toward the judge it starts from, strict inputs, and the same judge from the same rows."""

from __future__ import annotations

import numpy as np
import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.check.fit import f1_at
from corrective_rag.evaluate.learned import LEARNED_FEATURES, LearnedJudge, read_learned_judge
from corrective_rag.evaluate.learned_fit import fit_judge

WIDTH = len(LEARNED_FEATURES)


def _rows(n: int = 200, seed: int = 3) -> tuple[np.ndarray, list[bool]]:
    """Rows whose first feature predicts the label, noisily; the rest noise."""
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.4
    x = rng.normal(size=(n, WIDTH)) * [0.2, 0.1, 0.3, 0.1, 0.05] + [0.4, -0.1, 0.5, -0.1, 0.6]
    x[:, 0] += np.where(labels, 0.15, -0.05)
    return x, [bool(v) for v in labels]


def _gradient(judge: LearnedJudge, x, labels, l2: float, prior) -> np.ndarray:
    z = np.hstack([(x - judge.mean) / judge.scale, np.ones((len(x), 1))])
    beta = np.r_[judge.weights, judge.bias]
    p = 1 / (1 + np.exp(-z @ beta))
    penalty = np.r_[np.full(WIDTH, l2), 0.0]
    return z.T @ (p - np.asarray(labels, float)) + penalty * (beta - prior)


@pytest.mark.parametrize("l2", [0.0, 1.0, 25.0])
def test_from_scratch_it_is_the_minimum_of_the_penalised_log_loss(l2):
    """The gradient of the loss it states vanishes at the judge it returns (to the six decimals
    a judge file keeps), the features are standardised on the rows, and the threshold is the
    best F1 on the rows."""
    x, labels = _rows()
    judge = fit_judge(x, labels, l2=l2)
    assert judge.mean == pytest.approx(tuple(x.mean(axis=0)), abs=1e-6)
    assert judge.scale == pytest.approx(tuple(x.std(axis=0)), abs=1e-6)
    assert np.abs(_gradient(judge, x, labels, l2, np.zeros(WIDTH + 1))).max() < 1e-3
    assert judge.weights[0] > 0.5  # the feature that predicts, found
    scores = [judge.probability(r) for r in x.tolist()]
    best = max(f1_at(scores, labels, t) for t in scores)
    assert f1_at(scores, labels, judge.threshold) == pytest.approx(best)


def test_fine_tuning_keeps_the_start_standardisation_and_pulls_toward_its_weights():
    """Fine-tuned, the shipped judge's mean and scale stay; the optimum is that of the loss
    pulled toward the shipped weights; a strong pull leaves the weights where they were, a weak
    one lets the rows move them."""
    shipped = read_learned_judge()
    x, labels = _rows()
    tuned = fit_judge(x, labels, l2=1.0, start=shipped)
    assert (tuned.mean, tuned.scale) == (shipped.mean, shipped.scale)
    prior = np.r_[shipped.weights, shipped.bias]
    assert np.abs(_gradient(tuned, x, labels, 1.0, prior)).max() < 1e-3
    held = fit_judge(x, labels, l2=1e7, start=shipped)
    assert held.weights == pytest.approx(shipped.weights, abs=1e-3)
    moved = fit_judge(x, labels, l2=0.01, start=shipped)
    assert np.abs(np.subtract(moved.weights, shipped.weights)).max() > 0.3


def test_sample_weights_count_as_repeated_rows():
    """Unpenalised, a row of weight 2 weighs as the row twice: the same probabilities (the
    standardisation, taken on the rows given, differs; the function does not)."""
    x, labels = _rows(60)
    doubled = fit_judge(np.vstack([x, x[:10]]), labels + labels[:10], l2=0.0)
    weighted = fit_judge(x, labels, l2=0.0, sample_weight=[2.0] * 10 + [1.0] * 50)
    plain = fit_judge(x, labels, l2=0.0)
    rows = x.tolist()
    same = [weighted.probability(r) - doubled.probability(r) for r in rows]
    assert np.abs(same).max() < 1e-4
    assert max(abs(plain.probability(r) - doubled.probability(r)) for r in rows) > 1e-3


def test_weights_are_relative_a_zero_weight_drops_a_row_and_a_constant_feature_is_left_alone():
    """Weights of any size that are alike fit as none (the pull is against the rows' count); a
    row of weight zero is as if absent, weights summing to less than one are accepted; a feature
    that never varies keeps a scale of 1 and no weight."""
    x, labels = _rows(60)
    plain = fit_judge(x, labels, l2=1.0)
    assert fit_judge(x, labels, l2=1.0, sample_weight=[3.0] * 60) == plain
    assert fit_judge(x, labels, l2=1.0, sample_weight=[0.01] * 60) == plain
    dropped = fit_judge(x[1:], labels[1:], l2=0.0)
    zeroed = fit_judge(x, labels, l2=0.0, sample_weight=[0.0] + [1.0] * 59)
    rows = x.tolist()
    assert max(abs(dropped.probability(r) - zeroed.probability(r)) for r in rows) < 1e-4
    x[:, 2] = 0.5
    flat = fit_judge(x, labels)
    assert (flat.mean[2], flat.scale[2], flat.weights[2]) == (0.5, 1.0, 0.0)


def test_the_same_rows_give_the_same_judge_and_it_reads_back_as_written(tmp_path):
    x, labels = _rows()
    first, second = fit_judge(x, labels), fit_judge(x, labels)
    assert first == second
    assert 0 < first.threshold < 1


@pytest.mark.parametrize(
    ("x", "labels", "options", "match"),
    [
        (np.zeros((4, WIDTH - 1)), [True, False] * 2, {}, "features"),
        (np.zeros((0, WIDTH)), [], {}, "features"),
        (np.full((4, WIDTH), np.nan), [True, False] * 2, {}, "^fit_judge: a feature row holds a"),
        (np.zeros((4, WIDTH)), [True, False], {}, "^fit_judge: 2 labels for 4 rows$"),
        (
            np.zeros((4, WIDTH)),
            [True] * 4,
            {},
            "^fit_judge needs relevant and irrelevant pairs, not",
        ),
        (np.zeros((4, WIDTH)), [True, False] * 2, {"l2": -1.0}, "l2"),
        (np.zeros((4, WIDTH)), [True, False] * 2, {"sample_weight": [1.0]}, "^sample_weight needs"),
        (np.zeros((4, WIDTH)), [True, False] * 2, {"sample_weight": [0.0] * 4}, "sample_weight"),
        (np.zeros((4, WIDTH)), [True, False] * 2, {"sample_weight": [-1.0, 1, 1, 1]}, "sample_w"),
    ],
)
def test_bad_rows_are_refused_in_one_line(x, labels, options, match):
    """Equivalent survivors of mutmut (named so a later run tells them from new ones): the
    Newton steps' count (100 or 101: it converges in a few), the dtype of arrays already of
    floats or bools, the strictness of zips whose lengths the evaluator contract makes equal,
    ``reshape(-2, ...)`` (any negative size is inferred), a Hessian mutated to another positive
    definite matrix (damped Newton: the same fixed point, the gradient being exact), the ``1e-9``
    ridge's size and sign, ``<`` or ``<=`` against the step bound, the placeholder threshold of
    the judge used only for its probabilities, and the clamp of the threshold into (0, 1) (a
    guard: the best-F1 threshold is a probability strictly inside it unless a probability
    rounds to 0 or 1 exactly)."""
    with pytest.raises(ConfigError, match=match):
        fit_judge(x, labels, **options)
