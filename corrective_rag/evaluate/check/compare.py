"""Every judge a user can run, on the same labelled pairs, side by side: which one to use?

:func:`compare_judges` grades the pairs with each judge (one evaluate call per question),
splits the questions in two (the *fit* half and the *held-out* half, by a stable hash of the
question, so that one question's pairs never straddle the split), fits each judge's threshold on
the fit half (:func:`~corrective_rag.evaluate.check.fit.fit_threshold`) and reports on the
held-out half: AUC of its scores, F1 at the fitted threshold, F1 and agreement of its own
decisions, the share it called relevant, seconds and tokens per pair. Beside them stands the
trivial rule that calls every pair relevant. The judge to use is the one with the best held-out
F1 as it would run (a judge that takes a threshold: at the fitted one; the others: as they
decide); it is *no better than trivial* when that F1 does not beat calling everything relevant.
An ungraded pair ranks below every graded one and is never counted right.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from corrective_rag.errors import ConfigError, CorrectiveRAGError
from corrective_rag.evaluate.check.fit import auc, f1_at, fit_threshold
from corrective_rag.evaluate.check.pairs import CheckPair
from corrective_rag.protocols import Evaluator
from corrective_rag.types import Usage, Verdict

__all__ = [
    "Comparison",
    "JudgeFigures",
    "compare_judges",
    "grade_pairs",
    "judge_figures",
    "split_pairs",
]

_UNGRADED = -1.0  # ranks below every score in 0..1


@dataclass(frozen=True, slots=True)
class JudgeFigures:
    """One judge's figures on the held-out pairs (``fitted_*``: at the threshold fitted apart).

    Attributes:
        name: the judge, as the comparison names it.
        thresholded: whether the judge runs with a fitted threshold (its F1 is ``fitted_f1``).
        auc: how well its scores rank relevant above irrelevant pairs (None: one class only).
        threshold: fitted on the fit half.
        fitted_f1: F1 at ``threshold`` on the held-out half.
        fit_f1: F1 at ``threshold`` on the fit half (in-sample, for comparison).
        f1: F1 of its own decisions (``relevant``) on the held-out half.
        agreement: share of held-out pairs its decisions got right (as it would run).
        relevant_share: share of held-out pairs it called relevant (as it would run).
        ungraded_share: share of all pairs it left ungraded.
        seconds_per_pair: wall time per pair graded.
        tokens_per_pair: prompt plus completion tokens per pair.
        scored_by_probability: share of graded verdicts whose score came from token
            probabilities.
    """

    name: str
    thresholded: bool
    auc: float | None
    threshold: float
    fitted_f1: float
    fit_f1: float
    f1: float
    agreement: float
    relevant_share: float
    ungraded_share: float
    seconds_per_pair: float
    tokens_per_pair: float
    scored_by_probability: float

    @property
    def running_f1(self) -> float:
        """Held-out F1 as the judge would run: at the fitted threshold, or as it decides."""
        return self.fitted_f1 if self.thresholded else self.f1


@dataclass(frozen=True, slots=True)
class Comparison:
    """The judges' figures, the trivial rule's, and which judge to use.

    Attributes:
        judges: each judge's figures, in the order given.
        fit_pairs: pairs the thresholds were fitted on.
        held_out_pairs: pairs the figures are reported on.
        all_relevant_f1: held-out F1 of calling every pair relevant.
        all_relevant_agreement: held-out agreement of calling every pair relevant.
        chosen: the judge with the best held-out F1 as it would run.
        errors: failed evaluate calls, as ``judge: error``.
    """

    judges: tuple[JudgeFigures, ...]
    fit_pairs: int
    held_out_pairs: int
    all_relevant_f1: float
    all_relevant_agreement: float
    chosen: str
    errors: tuple[str, ...] = ()

    @property
    def chosen_figures(self) -> JudgeFigures:
        """The chosen judge's figures."""
        return next(j for j in self.judges if j.name == self.chosen)

    @property
    def better_than_trivial(self) -> bool:
        """Whether the chosen judge beats calling every pair relevant on held-out F1."""
        return self.chosen_figures.running_f1 > self.all_relevant_f1 + 1e-9

    @property
    def advice(self) -> str:
        """One line: which judge to use, or that none beats calling everything relevant."""
        best = self.chosen_figures
        if not self.better_than_trivial:
            return (
                f"no judge beats calling everything relevant (held-out F1 {best.running_f1:.2f}"
                f" vs {self.all_relevant_f1:.2f}): keep every document, or use a larger model"
            )
        how = f" with threshold {best.threshold:.3f}" if best.thresholded else ""
        return f"use the {best.name} judge{how}: held-out F1 {best.running_f1:.2f}"


def split_pairs(pairs: Sequence[CheckPair]) -> tuple[list[int], list[int]]:
    """Indexes of the fit half and the held-out half, split by question (a stable hash).

    With a single question both halves are every pair (no held-out figure can exist).
    """
    questions = sorted(
        {p.question for p in pairs}, key=lambda q: hashlib.sha256(q.encode()).hexdigest()
    )
    if len(questions) < 2:
        every = list(range(len(pairs)))
        return every, every
    fit_questions = set(questions[: len(questions) // 2])
    fit = [i for i, p in enumerate(pairs) if p.question in fit_questions]
    held = [i for i, p in enumerate(pairs) if p.question not in fit_questions]
    return fit, held


def grade_pairs(
    evaluator: Evaluator, pairs: Sequence[CheckPair]
) -> tuple[list[Verdict | None], Usage, float, list[str]]:
    """Each pair's verdict (None where its call failed), the usage, wall seconds and errors.

    One evaluate call per question, its pairs' documents together.
    """
    by_question: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        by_question.setdefault(pair.question, []).append(i)
    verdicts: list[Verdict | None] = [None] * len(pairs)
    usage, errors = Usage(), []
    started = time.perf_counter()
    for question, indexes in by_question.items():
        try:
            evaluation = evaluator.evaluate(question, [pairs[i].document for i in indexes])
        except CorrectiveRAGError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        usage += evaluation.usage
        for i, verdict in zip(indexes, evaluation.verdicts, strict=True):
            verdicts[i] = verdict
    return verdicts, usage, time.perf_counter() - started, errors


def judge_figures(
    name: str,
    *,
    thresholded: bool,
    verdicts: Sequence[Verdict | None],
    labels: Sequence[bool],
    fit: Sequence[int],
    held: Sequence[int],
    cost: tuple[Usage, float],
) -> JudgeFigures:
    """One judge's figures: threshold fitted on ``fit``, figures on ``held`` (indexes)."""
    usage, seconds = cost
    graded = [v for v in verdicts if v is not None and v.graded]
    scores = [
        v.score if v is not None and v.graded and v.score is not None else _UNGRADED
        for v in verdicts
    ]
    decided = [bool(v is not None and v.relevant) for v in verdicts]
    fs = [scores[i] for i in fit]
    fl = [labels[i] for i in fit]
    hs = [scores[i] for i in held]
    hl = [labels[i] for i in held]
    threshold = fit_threshold(fs, fl)
    hd = [decided[i] for i in held]
    f1 = f1_at([float(d) for d in hd], hl, 0.5)
    running = [s >= threshold for s in hs] if thresholded else hd
    n = len(verdicts)
    return JudgeFigures(
        name=name,
        thresholded=thresholded,
        auc=auc(hs, hl),
        threshold=threshold,
        fitted_f1=f1_at(hs, hl, threshold),
        fit_f1=f1_at(fs, fl, threshold),
        f1=f1,
        agreement=sum(1 for r, y in zip(running, hl, strict=True) if r == y) / len(hl),
        relevant_share=sum(running) / len(hl),
        ungraded_share=(n - len(graded)) / n,
        seconds_per_pair=seconds / n,
        tokens_per_pair=usage.total_tokens / n,
        scored_by_probability=(
            sum(1 for v in graded if v.score_source == "logprob") / len(graded) if graded else 0.0
        ),
    )


def compare_judges(
    judges: Mapping[str, tuple[Evaluator, bool]],
    pairs: Sequence[CheckPair],
    *,
    split: tuple[Sequence[int], Sequence[int]] | None = None,
) -> Comparison:
    """Grade ``pairs`` with every judge and compare them (module docstring).

    Args:
        judges: name -> (evaluator, thresholded): ``thresholded`` judges run with the threshold
            fitted here (their score is P(relevant) at threshold 0.5); the others as they
            decide.
        pairs: labelled pairs; questions are split in halves for fitting and reporting.
        split: the indexes to fit on and to report on instead (e.g. one collection and another).

    Raises:
        ConfigError: no judges, or no pairs, or the held-out half lacks a relevant pair.
    """
    if not judges:
        raise ConfigError("no judges to compare")
    if not pairs:
        raise ConfigError("no pairs to compare the judges on")
    labels = [p.relevant for p in pairs]
    fit, held = split if split is not None else split_pairs(pairs)
    if not any(labels[i] for i in held):
        raise ConfigError("the held-out pairs hold no relevant pair: add pairs")
    figures, errors = [], []
    for name, (evaluator, thresholded) in judges.items():
        verdicts, usage, seconds, failed = grade_pairs(evaluator, pairs)
        errors += [f"{name}: {e}" for e in failed]
        figures.append(
            judge_figures(
                name,
                thresholded=thresholded,
                verdicts=verdicts,
                labels=labels,
                fit=fit,
                held=held,
                cost=(usage, seconds),
            )
        )
    held_labels = [labels[i] for i in held]
    chosen = max(figures, key=lambda f: f.running_f1).name
    return Comparison(
        judges=tuple(figures),
        fit_pairs=len(fit),
        held_out_pairs=len(held),
        all_relevant_f1=f1_at([1.0] * len(held), held_labels, 0.5),
        all_relevant_agreement=sum(held_labels) / len(held_labels),
        chosen=chosen,
        errors=tuple(errors),
    )
