"""Every judge a user can run, on the same labelled pairs, measured as a run applies it.

:func:`compare_judges` grades the pairs once per family of judges (the verbal and the
probability judge share one call: the run's own grading call, one-call with proposals, its
prompt and schema; the pointwise judge asks its yes/no question; the offline judge makes no
call), splits the questions in two (the *fit* half and the *held-out* half, by a stable hash of
the question, so that one question's pairs never straddle the split), fits each thresholded
judge's threshold on the fit half under the run's filter policy, and reports on the held-out
half what a run with that judge would keep: each verdict is decided as the run's evaluator
decides it (:func:`~corrective_rag.evaluate.scoring.with_probability` at the threshold, the
written verdict where no probability was read) and kept or not by
:func:`~corrective_rag.evaluate.policy.decide`. So the held-out F1 printed is the F1 of the
documents a run with that judge keeps on those pairs; every column is at that one operating
point. Beside the judges stands keeping every pair (the trivial rule).

The judge chosen is the one with the best held-out F1 among those that may be chosen: graded
completely, ranking no worse than chance (AUC >= 0.5), with a threshold that did not collapse
to an end of (0, 1), and better than keeping everything. None may be: then nothing is chosen.

One concept, left whole though a little past 450 lines: grading, fitting, figures and the choice
are the steps of one comparison, and each step's rule is the run's, imported from where it lives.
"""

from __future__ import annotations

import datetime
import hashlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from corrective_rag._version import __version__
from corrective_rag.calls.scope import call_scope
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.check.fit import auc, f1, fit_threshold
from corrective_rag.evaluate.check.grading import Grading, Progress, grade_pairs
from corrective_rag.evaluate.check.pairs import CHECK_PAIRS, CheckPair
from corrective_rag.evaluate.check.plain import (
    CHECK_SECONDS,
    MIN_AGREEMENT,
    JudgeCheck,
    check_judge,
)
from corrective_rag.evaluate.kinds import JUDGE_KINDS, judge_kind
from corrective_rag.evaluate.policy import Decision, FilterPolicy, decide
from corrective_rag.evaluate.profile import JudgeProfile, Measured
from corrective_rag.evaluate.scoring import kept_from_each, with_probability
from corrective_rag.protocols import ChatModel, Evaluator
from corrective_rag.types import Verdict

__all__ = [
    "DEGENERATE",
    "Comparison",
    "JudgeFigures",
    "applied",
    "check_profile",
    "choose",
    "compare_judges",
    "split_pairs",
]

_UNGRADED = -1.0  # ranks below every score in 0..1
# A threshold this close to an end of (0, 1) keeps (nearly) everything or nothing: never chosen.
DEGENERATE = 0.01


@dataclass(frozen=True, slots=True)
class JudgeFigures:
    """One judge's figures on the held-out pairs, as a run with its profile would keep them.

    Attributes:
        profile: the judge, declared (kind, model, prompt, call shape, threshold, what it was
            measured on).
        auc: how well its scores rank relevant above irrelevant pairs (None: one class only);
            a probability where one was read, the score otherwise.
        held_out_f1: F1 of the documents a run keeps, on the held-out pairs.
        fit_f1: the same on the fit half (in-sample, for comparison).
        agreement: share of held-out pairs kept exactly when relevant.
        kept_share: share of held-out pairs kept.
        ungraded_share: share of all pairs left ungraded.
        scored_by_probability: share of graded verdicts whose probability was read.
        seconds_per_pair: wall time per pair (a family's grading, shared by its judges).
        tokens_per_pair: prompt plus completion tokens per pair.
        refused: why it may not be chosen (``None``: it may).
    """

    profile: JudgeProfile
    auc: float | None
    held_out_f1: float
    fit_f1: float
    agreement: float
    kept_share: float
    ungraded_share: float
    scored_by_probability: float
    seconds_per_pair: float
    tokens_per_pair: float
    refused: str | None = None

    @property
    def name(self) -> str:
        """The judge's kind."""
        return self.profile.kind


@dataclass(frozen=True, slots=True)
class Comparison:
    """The judges' figures, the trivial rule's, and which judge to use (if any).

    Attributes:
        judges: each judge's figures, in the order asked.
        fit_pairs: pairs the thresholds were fitted on.
        held_out_pairs: pairs the figures are reported on.
        trivial_f1: held-out F1 of keeping every pair.
        trivial_agreement: held-out agreement of keeping every pair.
        chosen: the judge to use, or None (none may be chosen).
        policy: the filter policy whose keep decisions were counted.
        stopped: why the grading stopped early (deadline, interrupted); None when complete.
        errors: failed evaluate calls, as ``judge: error``.
    """

    judges: tuple[JudgeFigures, ...]
    fit_pairs: int
    held_out_pairs: int
    trivial_f1: float
    trivial_agreement: float
    chosen: str | None
    policy: str
    stopped: str | None = None
    errors: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        """Whether a judge was chosen."""
        return self.chosen is not None

    @property
    def profiles(self) -> dict[str, JudgeProfile]:
        """Each judge's profile (what the profile file keeps), by kind."""
        return {f.name: f.profile for f in self.judges}

    @property
    def advice(self) -> str:
        """One line: which judge to use, or why none is chosen."""
        if self.stopped is not None:
            return f"stopped early ({self.stopped}): figures are partial and no judge is chosen"
        if self.chosen is None:
            best = max(self.judges, key=lambda f: f.held_out_f1)
            return (
                f"no judge may be chosen (best: {best.name}, held-out F1 "
                f"{best.held_out_f1:.2f} against {self.trivial_f1:.2f} for keeping every "
                f"document; {best.refused}): keep every document, or try another judge"
            )
        figures = next(f for f in self.judges if f.name == self.chosen)
        return (
            f"use the {figures.profile.description} judge: held-out F1 "
            f"{figures.held_out_f1:.2f} against {self.trivial_f1:.2f} for keeping every document"
        )


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


def applied(verdict: Verdict | None, profile: JudgeProfile) -> Verdict | None:
    """``verdict`` as the run's evaluator with ``profile`` would give it.

    A judge that takes a threshold decides a verdict whose probability was read at the
    profile's threshold; every other verdict is as graded.
    """
    if verdict is None or profile.threshold is None or verdict.probability is None:
        return verdict
    return with_probability(verdict, verdict.probability, profile.threshold)


def _kept(verdicts: Sequence[Verdict | None], policy: FilterPolicy) -> list[bool]:
    return [v is not None and decide(v, policy) is Decision.KEEP for v in verdicts]


def _fitted(
    base: JudgeProfile,
    grading: Grading,
    labels: Sequence[bool],
    fit: Sequence[int],
    policy: FilterPolicy,
) -> float:
    """The threshold with the best F1 of kept documents on the fit half (0.5: nothing to fit)."""
    scores: list[float | None] = []
    fixed: list[bool] = []
    for i in fit:
        v = grading.verdicts[i]
        read = v is not None and v.graded and v.probability is not None
        scores.append(v.probability if read and v is not None else None)
        fixed.append(not read and v is not None and decide(v, policy) is Decision.KEEP)
    if all(s is None for s in scores):
        return base.threshold or 0.5
    return fit_threshold(
        scores, [labels[i] for i in fit], cut=lambda t: kept_from_each(t, policy), fixed=fixed
    )


def _figures(
    profile: JudgeProfile,
    grading: Grading,
    labels: Sequence[bool],
    halves: tuple[Sequence[int], Sequence[int]],
    *,
    policy: FilterPolicy,
    measured: Measured,
) -> JudgeFigures:
    fit, held = halves
    verdicts = [applied(v, profile) for v in grading.verdicts]
    kept = _kept(verdicts, policy)
    held_labels = [labels[i] for i in held]
    ranks = [
        (v.probability if profile.threshold is not None and v.probability is not None else v.score)
        if v is not None and v.graded and v.score is not None
        else _UNGRADED
        for v in verdicts
    ]
    graded = [v for v in grading.verdicts if v is not None and v.graded]
    n = len(verdicts)
    held_f1 = f1([kept[i] for i in held], held_labels)
    figures = JudgeFigures(
        profile=profile,
        auc=auc([ranks[i] for i in held], held_labels),
        held_out_f1=held_f1,
        fit_f1=f1([kept[i] for i in fit], [labels[i] for i in fit]),
        agreement=sum(1 for i in held if kept[i] == labels[i]) / len(held),
        kept_share=sum(1 for i in held if kept[i]) / len(held),
        ungraded_share=(n - len(graded)) / n,
        scored_by_probability=(
            sum(1 for v in graded if v.probability is not None) / len(graded) if graded else 0.0
        ),
        seconds_per_pair=grading.seconds / n,
        tokens_per_pair=grading.usage.total_tokens / n,
    )
    measured = Measured(
        pairs=n,
        source=measured.source,
        held_out_pairs=len(held),
        held_out_f1=held_f1,
        auc=figures.auc,
        trivial_f1=measured.trivial_f1,
        date=measured.date,
        version=measured.version,
        partial=not grading.complete,
    )
    figures = replace(figures, profile=replace(profile, measured=measured))
    return _with_refusal(figures, grading)


def _with_refusal(figures: JudgeFigures, grading: Grading) -> JudgeFigures:
    """``figures`` with the reason, if any, why its judge may not be chosen."""
    measured = figures.profile.measured
    t = figures.profile.threshold
    why = None
    if not grading.complete:
        why = "its grading was stopped early"
    elif figures.ungraded_share == 1.0:
        said = _said(grading)
        why = "it graded nothing" + (f" ({said[0]})" if said else "")
    elif figures.auc is not None and figures.auc < 0.5:
        why = f"it ranks worse than chance (AUC {figures.auc:.2f})"
    elif t is not None and not DEGENERATE <= t <= 1 - DEGENERATE:
        why = f"its threshold collapsed to {t:.4f}"
    elif measured is not None and figures.held_out_f1 <= measured.trivial_f1 + 1e-9:
        why = "it is no better than keeping every document"
    return replace(figures, refused=why)


def _said(grading: Grading) -> list[str]:
    """Why the grading failed where it did: the calls that raised, else a verdict's error.

    A lenient evaluator records a failed call as ungraded verdicts, not as an exception.
    """
    if grading.errors:
        return list(grading.errors)
    said = next((v.error for v in grading.verdicts if v is not None and v.error), None)
    return [said] if said else []


def _evaluator(
    kind: str, *, chat: ChatModel | None, store: object, model: str, call_mode: str, workers: int
) -> Evaluator:
    """The evaluator that grades ``kind``'s family: the family's first kind, unmeasured."""
    profile = JudgeProfile.of(kind, model=model, call_mode=call_mode)
    options: dict[str, Any] = {"max_workers": workers}
    if judge_kind(kind).family == "json":
        options["cache"] = VerdictCache(0)  # graded afresh: a check measures the model
    return profile.evaluator(chat=chat, store=store, call_mode=call_mode, model=model, **options)


def _load_model(grader: Evaluator) -> None:
    """Load the model of a judge that calls none (its embedder) before the deadline counts.

    Seconds of local start-up on first use, which the check's deadline (a bound on the calls)
    does not count: it would otherwise cut the offline judge short after a server's quick 404s.
    """
    embedder = getattr(grader, "embedder", None)
    if embedder is not None:
        embedder.embed(["a question"])


def compare_judges(
    kinds: Sequence[str],
    pairs: Sequence[CheckPair],
    *,
    model: str,
    chat: ChatModel | None = None,
    store: object = None,
    policy: FilterPolicy,
    call_mode: str = "one-call",
    split: tuple[Sequence[int], Sequence[int]] | None = None,
    max_seconds: float | None = None,
    cancel: threading.Event | None = None,
    max_workers: int = 4,
    source: str = "built-in",
    progress: Progress | None = None,
    evaluators: Mapping[str, Evaluator] | None = None,
) -> Comparison:
    """Grade ``pairs`` with every judge of ``kinds`` and compare them (module docstring).

    Args:
        kinds: keys of :data:`~corrective_rag.evaluate.kinds.JUDGE_KINDS`.
        pairs: labelled pairs; questions are split in halves for fitting and reporting.
        model: the model the judges talk to (``"offline"`` for judges without one).
        chat: the chat model (kinds that need one).
        store: a store whose embedder and idf the offline judge uses (``None``: defaults).
        policy: the run's filter policy: its keep decisions are what is counted.
        call_mode: the run's call mode (the JSON judges grade in its call).
        split: the indexes to fit on and to report on instead (e.g. one collection and another).
        max_seconds: the whole comparison's deadline (``None``: the calls' own only).
        cancel: an event that stops it (Ctrl-C): what was graded is reported, marked partial.
        max_workers: calls at once (the server's slots).
        source: what the pairs are (recorded in each profile).
        progress: told of each question graded, per family.
        evaluators: family -> evaluator to grade with instead of the one built from the kinds
            (a test's, or a benchmark's replaying chat model).

    Raises:
        ConfigError: no kinds, an unknown or unavailable kind, no pairs, or a held-out half
            without a relevant pair.
    """
    if not kinds:
        raise ConfigError("no judges to compare")
    if not pairs:
        raise ConfigError("no pairs to compare the judges on")
    for kind in kinds:
        JudgeProfile.of(kind, model=model, call_mode=call_mode).check()  # known, available
    labels = [p.relevant for p in pairs]
    fit, held = split if split is not None else split_pairs(pairs)
    if not any(labels[i] for i in held):
        raise ConfigError("the held-out pairs hold no relevant pair: add pairs")
    graders: dict[str, Evaluator] = dict(evaluators or {})
    for kind in kinds:  # built before any call: an unavailable judge fails at once
        family = JUDGE_KINDS[kind].family
        if family not in graders:
            graders[family] = _evaluator(
                kind, chat=chat, store=store, model=model, call_mode=call_mode, workers=max_workers
            )
    for kind in kinds:  # a judge's own model loads before the deadline counts the calls
        if not JUDGE_KINDS[kind].needs_chat:
            _load_model(graders[JUDGE_KINDS[kind].family])
    trivial = f1([True] * len(held), [labels[i] for i in held])
    base = Measured(
        pairs=len(pairs),
        source=source,
        held_out_pairs=len(held),
        held_out_f1=0.0,
        auc=None,
        trivial_f1=trivial,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        version=__version__,
    )
    gradings: dict[str, Grading] = {}
    started = time.monotonic()
    with call_scope(seconds=max_seconds, cancel=cancel) as own:
        for kind in kinds:
            family = JUDGE_KINDS[kind].family
            if family not in gradings:
                gradings[family] = grade_pairs(
                    graders[family], pairs, name=family, progress=progress
                )
        interrupted = own.is_set() or (cancel is not None and cancel.is_set())
    figures = []
    for kind in kinds:
        grading = gradings[JUDGE_KINDS[kind].family]
        profile = JudgeProfile.of(kind, model=model, call_mode=call_mode, policy=policy.name)
        if profile.threshold is not None:
            profile = replace(profile, threshold=_fitted(profile, grading, labels, fit, policy))
        figures.append(
            _figures(profile, grading, labels, (fit, held), policy=policy, measured=base)
        )
    stopped = None
    if not all(g.complete for g in gradings.values()):
        wall = time.monotonic() - started
        stopped = (
            "interrupted"
            if interrupted
            else f"the deadline of {max_seconds:g} s passed after {wall:.1f} s"
        )
    chosen = choose(figures, stopped)
    held_labels = [labels[i] for i in held]
    return Comparison(
        judges=tuple(figures),
        fit_pairs=len(fit),
        held_out_pairs=len(held),
        trivial_f1=trivial,
        trivial_agreement=sum(held_labels) / len(held_labels),
        chosen=chosen,
        policy=policy.name,
        stopped=stopped,
        errors=tuple(f"{family}: {e}" for family, g in gradings.items() for e in _said(g)),
    )


def choose(figures: Sequence[JudgeFigures], stopped: str | None) -> str | None:
    """The judge to use: the best held-out F1 among those that may be chosen.

    None when none may be, or when the grading stopped early.
    """
    choosable = [f for f in figures if f.refused is None]
    return max(choosable, key=lambda f: f.held_out_f1).name if choosable and not stopped else None


def check_profile(
    profile: JudgeProfile,
    *,
    chat: ChatModel | None = None,
    store: object = None,
    pairs: Sequence[CheckPair] = CHECK_PAIRS,
    policy: FilterPolicy | None = None,
    min_agreement: float = MIN_AGREEMENT,
    max_seconds: float | None = CHECK_SECONDS,
    cancel: threading.Event | None = None,
    max_workers: int = 4,
) -> JudgeCheck:
    """:func:`check_judge` of the judge ``profile`` declares, built as a run builds it.

    The JSON judges grade in the run's call (one-call with proposals, its prompt and schema),
    afresh (no verdict cache); the figures say which judge, call shape and threshold.
    """
    options: dict[str, Any] = {"max_workers": max_workers}
    if judge_kind(profile.kind).family == "json":
        options["cache"] = VerdictCache(0)
    evaluator = profile.evaluator(chat=chat, store=store, model=profile.model, **options)
    result = check_judge(
        evaluator,
        pairs,
        policy=policy,
        min_agreement=min_agreement,
        max_seconds=max_seconds,
        cancel=cancel,
    )
    return replace(result, judge=profile.description)
