"""``judge-check --pairs FILE --train``: the learned judge fine-tuned on the user's own pairs.

:func:`compare_trained` compares the judges on the pairs as
:func:`~corrective_rag.evaluate.check.compare.compare_judges` does (questions split in a fit
half and a held-out half by a stable hash), then fine-tunes the learned judge's logistic layer
on the fit half only (:func:`~corrective_rag.evaluate.learned_fit.fit_judge`, starting from the
shipped judge, each question's pairs judged in one call as the check grades them), and grades
the held-out half again with the trained judge, through the same comparison (its threshold
fitted on the fit half under the run's filter policy). Both sets of figures are of the held-out
half, which the training never saw: *before* (the shipped judge) and *after* (the trained one).

The trained judge takes the learned judge's place in the comparison only when it may be chosen
and its held-out F1 beats the shipped judge's; otherwise the shipped judge stays and the figures
say why. The choice among all judges is then made by the comparison's own rule. One deadline
covers the whole: grading, training and grading again.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from corrective_rag._version import __version__
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.check.compare import (
    Comparison,
    JudgeFigures,
    choose,
    compare_judges,
    split_pairs,
)
from corrective_rag.evaluate.check.grading import Progress
from corrective_rag.evaluate.check.pairs import CheckPair
from corrective_rag.evaluate.learned import LearnedEvaluator, LearnedJudge
from corrective_rag.evaluate.learned_fit import L2, fit_judge, question_features
from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.evaluate.profile import JudgeProfile
from corrective_rag.protocols import ChatModel

__all__ = ["MIN_FIT_QUESTIONS", "Training", "compare_trained"]

TRAINED = "learned"  # the kind --train fine-tunes
# Fewer questions than this in the fit half train nothing: six numbers fitted on a question or
# two follow its quirks, and the held-out half would be as small.
MIN_FIT_QUESTIONS = 5


@dataclass(frozen=True, slots=True)
class Training:
    """What ``--train`` did: the comparison to write, the two learned judges' figures, the judge.

    Attributes:
        comparison: the judges' figures with the trained judge in the learned judge's place
            when it won (``kept``), and the judge chosen among them.
        before: the shipped learned judge's held-out figures.
        after: the trained judge's held-out figures (``None``: it was not trained: the grading
            stopped, or the fit half lacked a relevant or an irrelevant pair).
        judge: the trained judge (its record says what it was trained on, when, by which
            version: what its judge file holds), or ``None``.
        kept: whether the trained judge took the learned judge's place.
        why: one line on what happened to the trained judge.
        fit_pairs: pairs it was trained on (the fit half).
        fit_questions: their questions.
    """

    comparison: Comparison
    before: JudgeFigures
    after: JudgeFigures | None
    judge: LearnedJudge | None
    kept: bool
    why: str
    fit_pairs: int
    fit_questions: int


class _Remembered:
    """An embedder that embeds each text once: the three passes over the pairs share vectors."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._vectors: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self._vectors.update(zip(missing, self.inner.embed(missing), strict=True))
        return np.asarray([self._vectors[t] for t in texts])


def compare_trained(
    kinds: Sequence[str],
    pairs: Sequence[CheckPair],
    *,
    model: str,
    policy: FilterPolicy,
    chat: ChatModel | None = None,
    store: object = None,
    call_mode: str = "one-call",
    max_seconds: float | None = None,
    cancel: threading.Event | None = None,
    max_workers: int = 4,
    source: str = "built-in",
    progress: Progress | None = None,
    l2: float = L2,
    start: LearnedJudge | None = None,
) -> Training:
    """Compare ``kinds`` on ``pairs``, train the learned judge on the fit half, compare again.

    Args:
        kinds: the judges compared; must include ``"learned"``.
        pairs: labelled pairs; questions are split in halves (fit, held out).
        model: the model the judges talk to (``"offline"`` for judges without one).
        policy: the run's filter policy: its keep decisions are what is counted.
        chat: the chat model (kinds that need one).
        store: a store whose embedder and idf the offline judges use (``None``: defaults).
        call_mode: the run's call mode.
        max_seconds: one deadline for the whole: grading, training, grading again.
        cancel: an event that stops it (Ctrl-C).
        max_workers: calls at once.
        source: what the pairs are (recorded in each profile and the judge's record).
        progress: told of each question graded.
        l2: the pull toward the starting judge's weights (larger: the pairs move it less).
        start: the judge to start from and compare with (``None``: the shipped one).

    Raises:
        ConfigError: ``"learned"`` not among ``kinds``; as ``compare_judges``.
    """
    if TRAINED not in kinds:
        raise ConfigError("--train fine-tunes the learned judge: add learned to --judges")
    started = time.monotonic()
    halves = split_pairs(pairs)
    fit, held = halves
    if set(fit) == set(held):
        raise ConfigError("--train needs pairs of at least two questions (it holds half out)")
    shipped = JudgeProfile.of(TRAINED, model=model, call_mode=call_mode).evaluator(store=store)
    assert isinstance(shipped, LearnedEvaluator)  # the kinds table builds it
    memory = _Remembered(shipped.embedder)
    shipped = LearnedEvaluator(
        memory,
        threshold=None if start is None else start.threshold,
        idf=shipped.idf,
        model=start,
        stored=shipped.stored,
    )
    common: dict[str, Any] = {
        "model": model,
        "chat": chat,
        "store": store,
        "policy": policy,
        "call_mode": call_mode,
        "split": halves,
        "cancel": cancel,
        "max_workers": max_workers,
        "source": source,
        "progress": progress,
    }
    comparison = compare_judges(
        kinds, pairs, max_seconds=max_seconds, evaluators={TRAINED: shipped}, **common
    )
    before = next(f for f in comparison.judges if f.name == TRAINED)
    fit_questions = len({pairs[i].question for i in fit})

    def ended(
        why: str,
        *,
        judge: LearnedJudge | None = None,
        after: JudgeFigures | None = None,
        stopped: str | None = None,
    ) -> Training:
        """Nothing kept: the comparison as it stands (stopped: with nothing chosen)."""
        final = comparison if stopped is None else replace(comparison, stopped=stopped, chosen=None)
        return Training(final, before, after, judge, False, why, len(fit), fit_questions)

    if comparison.stopped is not None:
        return ended(f"not trained: the check {comparison.stopped}")
    if fit_questions < MIN_FIT_QUESTIONS:
        return ended(
            f"not trained: the fit half holds {fit_questions} of the questions, fewer than "
            f"{MIN_FIT_QUESTIONS}; give pairs of at least {2 * MIN_FIT_QUESTIONS} questions "
            "(half are held out to measure it)"
        )
    rows, labels = question_features(shipped, pairs, fit)
    if all(labels) or not any(labels):
        return ended("not trained: the fit half needs relevant and irrelevant pairs")
    fitted = fit_judge(rows, labels, l2=l2, start=shipped.judge)
    judge = replace(
        fitted,
        record={
            "format": 1,
            "kind": "logistic",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "version": __version__,
            "base_model": shipped.judge.record.get("base_model"),
            "trained_from": "the shipped learned judge" if start is None else "a given judge",
            "trained_on": {"source": source, "pairs": len(fit), "questions": fit_questions},
            "settings": {"l2": l2},
        },
    )
    trained = LearnedEvaluator(
        memory, threshold=judge.threshold, idf=shipped.idf, model=judge, stored=shipped.stored
    )
    left = None if max_seconds is None else max_seconds - (time.monotonic() - started)
    if left is not None and left <= 0:
        spent = f"the deadline of {max_seconds:g} s passed before it graded"
        return ended(f"not kept: {spent}", judge=judge, stopped=spent)
    told = progress

    def renamed(name: str, asked: int, questions: int, seconds: float) -> None:
        if told is not None:
            told(f"trained {name}", asked, questions, seconds)

    again = compare_judges(
        [TRAINED],
        pairs,
        max_seconds=left,
        evaluators={TRAINED: trained},
        **{**common, "progress": renamed},
    )
    after = again.judges[0]
    if again.stopped is not None:
        # the user's deadline, not what was left of it, is the one to name
        stopped = (
            again.stopped
            if again.stopped == "interrupted"
            else f"the deadline of {max_seconds:g} s passed while it graded"
        )
        return ended(
            f"not kept: grading the trained judge {stopped}",
            judge=judge,
            after=after,
            stopped=stopped,
        )
    if after.refused is not None:
        kept, why = False, f"not kept: {after.refused}"
    elif after.held_out_f1 <= before.held_out_f1 + 1e-9:
        kept, why = False, "not kept: its held-out F1 does not beat the shipped judge's"
    else:
        kept, why = True, "kept: its held-out F1 beats the shipped judge's"
    # the file's threshold is the one measured: fitted on the fit half under the run's policy
    judge = replace(
        judge,
        threshold=after.profile.threshold or judge.threshold,
        record={
            **judge.record,
            "held_out": {
                "pairs": len(held),
                "auc": {"before": before.auc, "after": after.auc},
                "f1": {"before": before.held_out_f1, "after": after.held_out_f1},
                "keep_all_f1": comparison.trivial_f1,
                "policy": comparison.policy,
            },
        },
    )
    figures = tuple(after if kept and f.name == TRAINED else f for f in comparison.judges)
    final = replace(comparison, judges=figures, chosen=choose(figures, None))
    return Training(final, before, after, judge, kept, why, len(fit), fit_questions)
