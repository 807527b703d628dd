"""Fit the learned judge's logistic layer: from scratch, or fine-tuned from a judge it starts at.

:func:`fit_judge` fits ``p = sigmoid(bias + weights . (x - mean) / scale)`` over feature rows
(:data:`~corrective_rag.evaluate.learned.LEARNED_FEATURES`) by Newton's method on the weighted
log loss with an L2 pull on the weights (never the bias): from scratch (``start=None``) the
features are standardised on the rows and the weights pulled toward zero; fine-tuned, the
starting judge's standardisation is kept and its weights are where the pull goes, so that a few
dozen labelled pairs move the shipped judge only as far as they show it wrong. The threshold is
the one with the best F1 on the rows themselves. There is no random draw: the same rows give
the same judge, to the six decimals a judge file keeps.

:func:`question_features` computes the rows as a run's judge sees them: each question's pairs
in one call (the gaps compare a call's documents), as ``judge-check`` grades them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.check.fit import fit_threshold
from corrective_rag.evaluate.check.pairs import CheckPair
from corrective_rag.evaluate.learned import LEARNED_FEATURES, LearnedEvaluator, LearnedJudge

__all__ = ["L2", "fit_judge", "question_features"]

L2 = 1.0  # on the standardised weights; the bias is free
_DECIMALS = 6  # what a judge file keeps: a judge read back decides as the one fitted
_STEP = 1e-10  # Newton's steps end when no coordinate moves more than this

Floats = npt.NDArray[np.float64]


def fit_judge(
    x: npt.ArrayLike,
    labels: Sequence[bool],
    *,
    sample_weight: npt.ArrayLike | None = None,
    l2: float = L2,
    start: LearnedJudge | None = None,
    iterations: int = 100,
) -> LearnedJudge:
    """A logistic layer over feature rows ``x`` (one row per pair) and its best-F1 threshold.

    Args:
        x: rows in :data:`LEARNED_FEATURES` order.
        labels: each row's known answer.
        sample_weight: each row's weight (default 1); the weights are scaled to sum to the rows.
        l2: the pull on the standardised weights (toward ``start``'s, or zero).
        start: fine-tune this judge (its standardisation kept); ``None``: fit from scratch.
        iterations: at most this many Newton steps (the loss is convex: a few converge).

    Raises:
        ConfigError: rows of the wrong width, non-finite values, a label count that does not
            match, rows of one class only, or a negative ``l2``.
    """
    rows = np.asarray(x, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != len(LEARNED_FEATURES) or not len(rows):
        raise ConfigError(f"fit_judge needs rows of {len(LEARNED_FEATURES)} features")
    if not np.isfinite(rows).all():
        raise ConfigError("fit_judge: a feature row holds a value that is not finite")
    y = np.asarray([bool(v) for v in labels], dtype=np.float64)
    if len(y) != len(rows):
        raise ConfigError(f"fit_judge: {len(y)} labels for {len(rows)} rows")
    if y.min() == y.max():
        raise ConfigError("fit_judge needs relevant and irrelevant pairs, not one kind only")
    if not (isinstance(l2, int | float) and np.isfinite(l2) and l2 >= 0):
        raise ConfigError(f"l2 must be a number >= 0, got {l2!r}")
    w = np.ones(len(rows)) if sample_weight is None else np.asarray(sample_weight, np.float64)
    if w.shape != (len(rows),) or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ConfigError("sample_weight needs one weight >= 0 per row, not all zero")
    w = w * (len(rows) / w.sum())
    if start is None:
        mean, scale = rows.mean(axis=0), rows.std(axis=0)
        scale[scale < 1e-9] = 1.0
        prior = np.zeros(len(LEARNED_FEATURES) + 1)
    else:
        mean, scale = np.asarray(start.mean), np.asarray(start.scale)
        prior = np.r_[np.asarray(start.weights), start.bias]
    z = np.hstack([(rows - mean) / scale, np.ones((len(rows), 1))])
    penalty = np.r_[np.full(len(LEARNED_FEATURES), float(l2)), 0.0]
    beta = prior.copy()
    for _ in range(iterations):
        p = _sigmoid(z @ beta)
        gradient = z.T @ (w * (p - y)) + penalty * (beta - prior)
        hessian = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        # a tiny ridge on the bias too: separable rows with l2=0 keep the system solvable
        step = np.linalg.solve(hessian + np.eye(len(beta)) * 1e-9, gradient)
        beta -= step
        if np.abs(step).max() < _STEP:
            break
    judge = LearnedJudge(
        tuple(round(float(v), _DECIMALS) for v in mean),
        tuple(round(float(v), _DECIMALS) for v in scale),
        tuple(round(float(v), _DECIMALS) for v in beta[:-1]),
        round(float(beta[-1]), _DECIMALS),
        0.5,  # until fitted below: the probabilities do not read it
    )
    scores = [judge.probability(row) for row in rows.tolist()]
    threshold = round(float(fit_threshold(scores, [bool(v) for v in y])), _DECIMALS)
    # a threshold at an end of (0, 1) is no judge file's: keep it strictly inside
    return replace(judge, threshold=min(max(threshold, 10.0**-_DECIMALS), 1 - 10.0**-_DECIMALS))


def question_features(
    evaluator: LearnedEvaluator, pairs: Sequence[CheckPair], indexes: Sequence[int]
) -> tuple[Floats, list[bool]]:
    """The feature rows and labels of ``pairs[i]`` for ``i`` in ``indexes``, in that order.

    Each question's pairs among ``indexes`` are judged in one call, in the pairs' order, as
    :func:`~corrective_rag.evaluate.check.grading.grade_pairs` calls the judge.
    """
    by_question: dict[str, list[int]] = {}
    for i in indexes:
        by_question.setdefault(pairs[i].question, []).append(i)
    row_of: dict[int, tuple[float, ...]] = {}
    for question, group in by_question.items():
        vectors = evaluator.features(question, [pairs[i].document for i in group])
        row_of.update(zip(group, vectors, strict=True))
    rows = np.asarray([row_of[i] for i in indexes], dtype=np.float64)
    return rows.reshape(-1, len(LEARNED_FEATURES)), [pairs[i].relevant for i in indexes]


def _sigmoid(z: Floats) -> Floats:
    out: Floats = 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free for any z
    return out
