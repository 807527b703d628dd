"""The kinds of judge a user can run: how each is built, what it sends, if it takes a threshold.

A small table (:data:`JUDGE_KINDS`) read by :class:`~corrective_rag.evaluate.profile.JudgeProfile`
(to build the judge a profile declares and to check it against the run), by ``judge-check`` (to
grade, fit and compare every kind) and by the command line (``--judge KIND``). Adding a judge is
adding a row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from corrective_rag.errors import ConfigError
from corrective_rag.protocols import Evaluator


class Declared(Protocol):
    """What a builder reads of the profile it builds for.

    A :class:`~corrective_rag.evaluate.profile.JudgeProfile`; the table does not import it, as
    the profile imports the table.
    """

    @property
    def kind(self) -> str:
        """The kind's name, a key of :data:`JUDGE_KINDS`."""
        ...

    @property
    def call_shape(self) -> str:
        """The call shape measured (:data:`CALL_SHAPES`)."""
        ...

    @property
    def threshold(self) -> float | None:
        """The probability a thresholded judge decides at (None: the written verdict)."""
        ...

    @property
    def judge_file(self) -> str | None:
        """The judge's own weights, trained on a user's pairs (None: the shipped ones)."""
        ...

    @property
    def judge_sha256(self) -> str | None:
        """The SHA-256 of :attr:`judge_file` when it was measured."""
        ...


__all__ = ["CALL_SHAPES", "JUDGE_KINDS", "Declared", "JudgeKind", "judge_kind"]

# The shapes of the call a judge makes: the JSON verdicts in the loop's one call (grading and
# proposing the next query), in a call of their own (two-call), one yes/no call per document,
# no call at all.
CALL_SHAPES = ("one-call", "two-call", "pointwise", "offline")

Build = Callable[[Declared, Any, Any, dict[str, Any]], Evaluator]


def _half() -> float:
    """The threshold of a probability judge nobody measured: even odds."""
    return 0.5


@dataclass(frozen=True, slots=True)
class JudgeKind:
    """How one kind of judge is built and what it sends.

    Attributes:
        name: the kind's name (the key in :data:`JUDGE_KINDS`).
        needs_chat: it calls a chat model.
        thresholded: it decides by a probability at a threshold (``judge-check`` fits one):
            its verdicts carry ``Verdict.probability`` and are decided by
            :func:`~corrective_rag.evaluate.scoring.with_probability`, so that a threshold
            fitted after grading gives the verdicts the run would give.
        prompt: the prompt version it sends (checked against a profile's).
        shape: the call shape it makes in a loop of the given call mode.
        build: ``(profile, chat, store, options) -> Evaluator``.
        family: kinds of one family grade with one and the same call (``judge-check`` grades
            the family once and applies each kind's decision to its verdicts).
        available: part of this version (a kind named ahead of its code is refused).
        default_threshold: the threshold of a thresholded kind's profile that names none
            (0.5 unless the kind ships a fitted one).
        trainable: ``judge-check --train`` fits its weights on a user's pairs (a profile may
            name the file they are in).
    """

    name: str
    needs_chat: bool
    thresholded: bool
    prompt: Callable[[], str]
    shape: Callable[[str], str]
    build: Build
    family: str
    available: bool = True
    default_threshold: Callable[[], float] = _half
    trainable: bool = False


def judge_kind(name: str) -> JudgeKind:
    """The row of :data:`JUDGE_KINDS` named ``name``.

    Raises:
        ConfigError: no such kind.
    """
    spec = JUDGE_KINDS.get(name)
    if spec is None:
        raise ConfigError(f"unknown judge kind {name!r}; choose one of {', '.join(JUDGE_KINDS)}")
    return spec


def _loop_shape(call_mode: str) -> str:
    if call_mode not in ("one-call", "two-call"):
        raise ConfigError(f"call_mode must be 'one-call' or 'two-call', got {call_mode!r}")
    return call_mode


def _json_prompt() -> str:
    from corrective_rag.llm import prompts

    return prompts.PROMPT_VERSION


def _pointwise_prompt() -> str:
    from corrective_rag.evaluate.pointwise import POINTWISE_PROMPT

    return POINTWISE_PROMPT


def _json_judge(profile: Declared, chat: Any, store: Any, options: dict[str, Any]) -> Evaluator:
    """The JSON verdict judge: as written (no threshold), or decided by P(true) at one."""
    from corrective_rag.evaluate.llm import LLMEvaluator

    # the call measured: proposing in the one-call shape, whatever context it runs in
    options.setdefault("propose", profile.call_shape == "one-call")
    if profile.threshold is not None:
        options.update(score_by="probability", threshold=profile.threshold)
    return LLMEvaluator(chat, **options)


def _pointwise_judge(
    profile: Declared, chat: Any, store: Any, options: dict[str, Any]
) -> Evaluator:
    from corrective_rag.evaluate.pointwise import PointwiseEvaluator

    known = ("max_workers", "max_doc_tokens", "token_counter")
    return PointwiseEvaluator(
        chat,
        threshold=cast(float, profile.threshold),  # a thresholded kind's profile has one
        **{k: options[k] for k in known if k in options},
    )


@functools.cache
def _default_embedder() -> Any:
    """The embedder a default store has (ONNX Runtime for the shipped model), loaded once.

    The offline and learned judges built without a store share it (judge-check compares both).
    """
    from corrective_rag.models.onnx_embedder import default_embedder

    return default_embedder()


def _offline_judge(profile: Declared, chat: Any, store: Any, options: dict[str, Any]) -> Evaluator:
    from corrective_rag.evaluate.local import LocalEvaluator

    if store is None:
        return LocalEvaluator(_default_embedder())
    known = ("weights", "max_sentences", "link_titles")
    return LocalEvaluator(
        store.embedder, idf=store.idf, **{k: options[k] for k in known if k in options}
    )


def _learned_judge(profile: Declared, chat: Any, store: Any, options: dict[str, Any]) -> Evaluator:
    from corrective_rag.evaluate.learned import LearnedEvaluator, read_learned_judge

    threshold = cast(float, profile.threshold)  # a thresholded kind's profile has one
    # read now, the file checked against the profile's record: a changed file fails at start
    model = (
        None
        if profile.judge_file is None
        else read_learned_judge(profile.judge_file, sha256=profile.judge_sha256)
    )
    if store is None:
        return LearnedEvaluator(_default_embedder(), threshold=threshold, model=model)
    # the store's vectors of the documents it holds as judged: not embedded again
    return LearnedEvaluator(
        store.embedder, threshold=threshold, idf=store.idf, model=model, stored=store.vectors
    )


def _learned_threshold() -> float:
    from corrective_rag.evaluate.learned import read_learned_judge

    return read_learned_judge().threshold


NOT_HERE = "the {kind} judge is not part of this version of corrective_rag"


# The judges a user can run, in the order judge-check shows them. To add one: a row here
# (its builder, whether it takes a threshold, its prompt and call shape); judge-check, the
# command line and the profile file then know it.
JUDGE_KINDS: Mapping[str, JudgeKind] = {
    "verbal": JudgeKind("verbal", True, False, _json_prompt, _loop_shape, _json_judge, "json"),
    "logprob": JudgeKind("logprob", True, True, _json_prompt, _loop_shape, _json_judge, "json"),
    "pointwise": JudgeKind(
        "pointwise",
        True,
        True,
        _pointwise_prompt,
        lambda mode: "pointwise",
        _pointwise_judge,
        "pointwise",
    ),
    "offline": JudgeKind(
        "offline",
        False,
        False,
        lambda: "offline",
        lambda mode: "offline",
        _offline_judge,
        "offline",
    ),
    # the learned offline judge (corrective_rag.evaluate.learned): a logistic layer decided at
    # a threshold, by default the one fitted with its shipped weights
    "learned": JudgeKind(
        "learned",
        False,
        True,
        lambda: "learned",
        lambda mode: "offline",
        _learned_judge,
        "learned",
        default_threshold=_learned_threshold,
        trainable=True,
    ),
}
