"""The seams of the loop: small protocols with one verb each.

Backends are injected objects that satisfy these structurally; nothing is looked up by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from corrective_rag.types import (
    Answer,
    ChatReply,
    Document,
    Evaluation,
    Hit,
    Judged,
    Rewrite,
    RewriteRequest,
)

__all__ = [
    "ChatModel",
    "ContextualEvaluator",
    "Embedder",
    "Evaluator",
    "FeedbackRewriter",
    "Generator",
    "ManyRetriever",
    "ProposalReader",
    "Retriever",
    "Rewriter",
    "TokenCounter",
]


@runtime_checkable
class Retriever(Protocol):
    """Finds documents for a query, best first."""

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Return at most ``top_k`` hits, ranked 1..n, optionally filtered on metadata."""
        ...


@runtime_checkable
class ManyRetriever(Protocol):
    """A retriever that searches several queries in one go (the hybrid store embeds them once).

    The loop then searches an iteration's queries with one call instead of one each, passing
    only the keywords declared here.
    """

    def retrieve_many(
        self,
        queries: Sequence[str],
        *,
        top_k: int = 10,
        where: Mapping[str, Any] | None = None,
    ) -> list[list[Hit]]:
        """:meth:`Retriever.retrieve` of each query, in order: one list of hits per query."""
        ...


@runtime_checkable
class Evaluator(Protocol):
    """Judges documents against the user's original question.

    Each verdict's ``score`` is on the one scale the filter policies read (0..1: irrelevant
    below ``types.RELEVANT_FROM`` = 0.5, partly relevant up to ``types.HIGH_FROM`` = 0.7,
    relevant from there; a yes/no judge puts its relevant verdicts from 0.7);
    ``confidence`` is how likely the verdict is right;
    ``missing`` lists what of the question the document lacks, as terms or short phrases (see
    :class:`~corrective_rag.types.Verdict`). The same arguments should give the same verdicts:
    an evaluator that compares with documents judged earlier takes them as arguments
    (:class:`ContextualEvaluator`) instead of remembering them.

    Attributes:
        documents_per_call: how many documents one LLM call judges: the fewest documents the
            evaluator puts in a call while it has that many to judge (an LLM evaluator's batch,
            1 for one call per document), or ``None`` for an evaluator that makes no LLM calls
            (a local judge). The loop's call budget is spent in these units: under
            ``Budget(max_llm_calls=n)`` at most ``n * documents_per_call`` documents are sent,
            and none is capped when it is ``None``. Retries of a failed call, and documents an
            evaluator chooses to judge alone, can make more calls than this predicts; the budget
            is checked again before every phase.
    """

    @property
    def documents_per_call(self) -> int | None:
        """Documents judged per LLM call; ``None``: no LLM calls (see the class docstring)."""
        ...

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """Return one verdict per document, in the order given (ungraded where it failed)."""
        ...


@runtime_checkable
class ContextualEvaluator(Protocol):
    """An evaluator that can also compare a batch with the documents judged before it.

    The corrective loop calls :meth:`evaluate_in_context` instead of ``evaluate`` where an
    evaluator has it, passing the run's judged documents: how a document compares with the
    best one found so far is evidence a batch alone does not hold.
    """

    def evaluate_in_context(
        self,
        question: str,
        documents: Sequence[Document],
        judged: Sequence[Judged],
    ) -> Evaluation:
        """Like ``evaluate``, with ``judged`` the documents (and verdicts) judged before."""
        ...


@runtime_checkable
class Rewriter(Protocol):
    """Proposes the next query from the question, the queries tried and the evaluator's feedback.

    In the loop's one-call mode the request carries the grading call's proposal
    (``RewriteRequest.proposal``): a rewriter may check it instead of calling a model
    (``LLMRewriter`` does), so that an iteration costs one call (:mod:`corrective_rag.loop.
    callmode`). A wrapper only needs to pass the request on.
    """

    def rewrite(self, request: RewriteRequest) -> Rewrite:
        """Return a new query, or ``Rewrite(query=None, rejected=...)`` when none is acceptable."""
        ...


@runtime_checkable
class FeedbackRewriter(Protocol):
    """A rewriter that says whether its rewrites are the kept documents' term query already.

    The loop then searches no free feedback lane beside it (:class:`~corrective_rag.loop.lanes.
    Lanes`): ``LocalRewriter`` says ``True``. A rewriter without the property gets the lane; a
    wrapper around a ``LocalRewriter`` that wants the same passes the property through.
    """

    @property
    def writes_feedback_query(self) -> bool:
        """``True``: this rewriter's queries are the feedback lane's already."""
        ...


@runtime_checkable
class ProposalReader(Protocol):
    """A rewriter that says whether it reads the grading call's proposal.

    In one-call mode the loop asks the grading call to propose unless the rewriter says
    ``False`` here (``LocalRewriter``, ``ScriptedRewriter``: a proposal would be tokens for
    nothing). A rewriter without the property, a user's wrapper around ``LLMRewriter`` among
    them, is asked for: at worst a few generated tokens, never an extra call.
    """

    @property
    def reads_proposals(self) -> bool:
        """``False``: this rewriter never reads ``RewriteRequest.proposal``."""
        ...


@runtime_checkable
class Generator(Protocol):
    """Writes an answer from kept documents."""

    def generate(self, question: str, documents: Sequence[Document]) -> Answer:
        """Answer ``question`` from ``documents`` only, citing their ids, or abstain."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model's tokenizer does."""

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return an array of shape ``(len(texts), dimension)``, each row L2-normalised."""
        ...


@runtime_checkable
class ChatModel(Protocol):
    """An OpenAI-compatible chat model."""

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ChatReply:
        """Return the assistant's reply to ``messages``.

        With ``json_schema`` the model is asked for JSON matching it (``response_format``
        ``json_schema``, falling back to ``json_object``, then to the instructions alone); the
        reply text is returned as-is, for the caller to parse. A chat model may also take a
        keyword ``logprobs: bool | int | None``, as OpenAI's chat API reads its ``logprobs``
        and ``top_logprobs``: ``True`` asks for each reply token's log probability with
        :data:`~corrective_rag.llm.options.DEFAULT_TOP_LOGPROBS` alternatives each, an int
        0..20 with that many alternatives (0: the chosen tokens' own only, from which no judge
        reads a probability: it needs an alternative at the value), ``None`` or ``False``
        none. They come back in ``ChatReply.logprobs`` where the model can say them. The
        keyword is optional, so that a chat model written without it keeps its type: the
        evaluators pass it only where ``complete``'s signature takes it
        (:func:`corrective_rag.evaluate.logprobs.takes_logprobs`).
        """
        ...
