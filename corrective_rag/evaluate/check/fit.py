"""A judge's scores against known answers: AUC, F1, and the F1-best threshold, each O(n log n).

Pure functions over lists. :func:`fit_threshold` finds the threshold at which calling relevant
every pair scoring at least it has the best F1; with ``cut`` it fits the threshold of a judge
whose keep decision starts above its threshold (a probability verdict under a filter policy:
:func:`~corrective_rag.evaluate.scoring.kept_from`), and pairs without a score keep a decision
of their own (``fixed``), as a run keeps a verdict whose probability could not be read. Sorting
once and counting from both ends makes a fit over 100,000 pairs a fraction of a second (the
quadratic search it replaces took minutes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError

__all__ = ["auc", "f1", "f1_at", "fit_threshold"]

Floats = npt.NDArray[np.float64]

# A fitted threshold stays this far inside (0, 1): a judge's threshold is checked to lie there.
EDGE = 1e-4


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Probability that a relevant pair scores above an irrelevant one (ties count half).

    ``None`` when either class is absent (no ranking to measure). Mann-Whitney from the ranks
    of the sorted scores (tied scores share their mean rank).
    """
    if len(scores) != len(labels):
        raise ConfigError("scores and labels differ in length")
    positives = sum(1 for y in labels if y)
    negatives = len(labels) - positives
    if not positives or not negatives:
        return None
    values = np.asarray(scores, dtype=np.float64)
    # each distinct score's mean rank (ranks 1..n in sorted order; ties share their mean)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mean_rank = ends - (counts - 1) / 2
    rank_sum = float(mean_rank[inverse][np.asarray(labels, dtype=bool)].sum())
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def f1(kept: Sequence[bool], labels: Sequence[bool]) -> float:
    """F1 of keeping the pairs ``kept`` says (0 when none kept is relevant)."""
    if len(kept) != len(labels):
        raise ConfigError("decisions and labels differ in length")
    tp = sum(1 for k, y in zip(kept, labels, strict=True) if k and y)
    return 2 * tp / (sum(kept) + sum(labels)) if tp else 0.0


def f1_at(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> float:
    """F1 of calling relevant every pair scoring ``threshold`` or more."""
    return f1([s >= threshold for s in scores], labels)


def fit_threshold(
    scores: Sequence[float | None],
    labels: Sequence[bool],
    *,
    cut: Callable[[Floats], Floats] | None = None,
    fixed: Sequence[bool] | None = None,
) -> float:
    """The threshold with the best F1 on these pairs; ties go to the higher (fewer kept).

    A pair with a score is kept when its score reaches ``cut(threshold)`` (``None``: the
    threshold itself; ``cut`` maps an array of thresholds to theirs, never decreasing and never
    below its argument); a pair
    whose score is ``None`` is kept as ``fixed`` says (not at all without ``fixed``), whatever
    the threshold. Candidates are the midpoints between neighbouring distinct scores, the two
    ends, and each candidate's cut (so that a cut the threshold cannot go below, such as a
    policy's confidence floor, is itself a candidate); the result is kept within
    (``EDGE``, 1 - ``EDGE``).

    Raises:
        ConfigError: no pair has a score, or the lengths differ.
    """
    if len(scores) != len(labels) or (fixed is not None and len(fixed) != len(labels)):
        raise ConfigError("scores, labels and decisions differ in length")
    given = np.array([np.nan if s is None else s for s in scores], dtype=np.float64)
    truth = np.array(labels, dtype=bool)
    has = ~np.isnan(given)
    if not has.any():
        raise ConfigError("no scores to fit a threshold on")
    order = np.argsort(given[has], kind="stable")
    values = given[has][order]
    flags = truth[has][order].astype(np.int64)
    # positives among the sorted values[k:], for every k (one more entry: none at the end)
    above = np.concatenate([np.cumsum(flags[::-1])[::-1], [0]])
    kept_fixed = tp_fixed = 0
    if fixed is not None:
        alone = ~has & np.array(fixed, dtype=bool)
        kept_fixed = int(alone.sum())
        tp_fixed = int((alone & truth).sum())
    relevant = int(truth.sum())
    distinct = np.unique(values)
    ends = np.array([distinct[0] / 2, (distinct[-1] + 1) / 2])
    candidates = np.unique(np.concatenate([ends, (distinct[:-1] + distinct[1:]) / 2]))
    rises = candidates if cut is None else np.asarray(cut(candidates), dtype=np.float64)
    # each candidate's cut is a candidate too (a floor the threshold cannot go below)
    floors = np.setdiff1d(rises[rises <= 1.0], candidates)
    if floors.size:
        candidates = np.concatenate([candidates, floors])
        rises = np.concatenate(
            [rises, floors if cut is None else np.asarray(cut(floors), dtype=np.float64)]
        )
    at = np.searchsorted(values, rises, "left")
    tp = above[at] + tp_fixed
    kept = len(values) - at + kept_fixed
    f1s = np.where(tp > 0, 2 * tp / np.maximum(kept + relevant, 1), 0.0)
    # the best F1 (to 12 places, as ties are judged), the higher threshold among equals
    best = float(candidates[np.lexsort((candidates, np.round(f1s, 12)))[-1]])
    return min(max(best, EDGE), 1 - EDGE)
