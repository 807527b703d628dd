"""``LLMRewriter``: asks a chat model for the next query, using the evaluator's feedback.

When the request carries the evaluator's proposal (judge and propose: the grading call already
proposed a next query) the proposal passes the shared drift guard instead of a call of our own.
A rejected proposal (it repeats a tried query, or is the question itself) costs no call either:
the loop then judges the question's next-best unjudged hits, as a single search would, so a
model that keeps proposing the question does not end the run. Without a proposal the model is
asked: the prompt carries the original question, every query tried, an excerpt of each kept
document and what the judged documents were missing. The candidate then passes the drift
guard. The original question is never replaced: a rewrite is only ever a new query to try next.
Only documents the filter policy kept are quoted or learned from; dropped ones are described by
their verdict's reasoning alone. (The free feedback query from the kept documents is the loop's,
searched beside this rewriter's: :mod:`corrective_rag.loop.feedback`.)
"""

from __future__ import annotations

from typing import Any

from corrective_rag.errors import ConfigError, InputError, LLMError, VerdictParseError
from corrective_rag.llm import prompts
from corrective_rag.llm.jsonparse import parse_json_object
from corrective_rag.llm.spent import attach_spent
from corrective_rag.observe.logs import get_logger
from corrective_rag.protocols import ChatModel
from corrective_rag.rewrite import guard
from corrective_rag.rewrite.guard import check_rewrite
from corrective_rag.types import Judged, Rewrite, RewriteRequest, RewriteSource, Usage

# LLMRewriter: its home is corrective_rag
__all__: list[str] = []

log: Any = get_logger(__name__)

_REPLY_TOKENS = 200  # a query and a sentence of rationale
# why a query that is the question plus a word is not searched: its own hits would take slots from
# the question's next-best ones and find what that one word matches (measured in docs/llm-calls.md)
PADDED = "the question plus one word searches what the question does; its next hits are judged"


class LLMRewriter:
    """A :class:`~corrective_rag.protocols.Rewriter` backed by a chat model.

    Args:
        chat: the chat model.
        strict: strict JSON, and LLM or parse failures raise instead of a rejected rewrite.
        max_feedback: at most this many judged documents are described (kept ones first).
        excerpt_chars: characters of each kept document quoted as "what it contained".
    """

    def __init__(
        self,
        chat: ChatModel,
        *,
        strict: bool = False,
        max_feedback: int = 8,
        excerpt_chars: int = 200,
    ) -> None:
        if not callable(getattr(chat, "complete", None)):
            raise ConfigError("chat must have a complete(messages, ...) method")
        if not isinstance(max_feedback, int) or max_feedback < 0:
            raise ConfigError(f"max_feedback must be an int >= 0, got {max_feedback!r}")
        if not isinstance(excerpt_chars, int) or excerpt_chars < 0:
            raise ConfigError(f"excerpt_chars must be an int >= 0, got {excerpt_chars!r}")
        self.chat = chat
        self.strict: bool = bool(strict)
        self.max_feedback = max_feedback
        self.excerpt_chars = excerpt_chars

    def _feedback(self, request: RewriteRequest) -> list[dict[str, Any]]:
        kept = {j.document.id for j in request.kept()}
        graded = [j for j in request.judged if j.verdict.graded]
        graded.sort(key=lambda j: j.document.id not in kept)  # kept ones first, stable otherwise
        return [
            {
                "id": j.document.id,
                # what the loop did with it: a relevant verdict the policy dropped is not kept
                "relevant": j.document.id in kept,
                "reasoning": j.verdict.reasoning,
                "missing": ", ".join(j.verdict.missing) or None,
                "excerpt": j.document.text[: self.excerpt_chars] if j.document.id in kept else "",
            }
            for j in graded[: self.max_feedback]
        ]

    def rewrite(self, request: RewriteRequest) -> Rewrite:
        """Return the next query, or ``Rewrite(query=None, rejected=...)`` saying why not.

        Raises:
            InputError: the request has an empty question.
            LLMError, VerdictParseError: only in strict mode.
        """
        if not isinstance(request, RewriteRequest):
            raise InputError("rewrite expects a RewriteRequest")
        if not isinstance(request.question, str) or not request.question.strip():
            raise InputError("the request's question must be a non-empty string")
        proposal = request.proposal
        if proposal is not None:
            # the grading call already proposed: no call of our own, accepted or not. A
            # rejected proposal pages the question's next hits instead.
            proposed = " ".join(str(proposal.query).split())
            reason = check_rewrite(proposed, request.question, request.tried_queries)
            reason = reason or _copied(proposed, request.judged) or _padded(proposed, request)
            if reason is None:
                why = f"grader's proposal; lacking: {proposal.lacking or '-'}"
                return Rewrite(proposed, rationale=why, source=RewriteSource.PROPOSAL)
            log.info("proposal_rejected", reason=reason, candidate=proposed[:200])
            return Rewrite(
                None,
                rejected=f"proposal: {reason}",
                candidate=proposed or None,
                source=RewriteSource.PROPOSAL,
            )
        messages = prompts.rewriter_messages(
            request.question, request.tried_queries, self._feedback(request)
        )
        try:
            reply = self.chat.complete(
                messages, json_schema=prompts.rewrite_schema(), max_tokens=_REPLY_TOKENS
            )
        except LLMError as exc:
            if self.strict:
                raise
            log.warning("rewrite_failed", error=str(exc))
            return Rewrite(
                query=None,
                rejected=f"llm error: {exc}",
                usage=Usage(llm_calls=1, failed_calls=1),
            )
        try:
            obj = parse_json_object(reply.text, strict=self.strict)
            candidate = obj.get("query")
            if not isinstance(candidate, str):
                raise VerdictParseError("reply has no string 'query'", raw=reply.text)
        except VerdictParseError as exc:
            if self.strict:
                attach_spent(exc, reply.usage)  # the call was answered: its tokens were spent
                raise
            log.warning("rewrite_unparseable", error=str(exc))
            return Rewrite(
                query=None,
                rejected=f"unparseable reply: {exc}",
                usage=reply.usage + Usage(failed_calls=1),
            )
        candidate = " ".join(candidate.split())
        rationale = str(obj.get("rationale") or "").strip()
        reason = check_rewrite(candidate, request.question, request.tried_queries)
        reason = reason or _padded(candidate, request)
        if reason is not None:
            log.info("rewrite_rejected", reason=reason, candidate=candidate[:200])
            return Rewrite(
                query=None,
                rationale=rationale,
                rejected=reason,
                candidate=candidate,
                usage=reply.usage,
            )
        return Rewrite(query=candidate, rationale=rationale, usage=reply.usage)


def _copied(candidate: str, judged: tuple[Judged, ...]) -> str | None:
    """Why ``candidate`` is no query: a sentence copied from a judged document, else ``None``.

    A statement of the answer searches worse than the feedback lane (``guard.is_copied_sentence``).
    """
    texts = [j.document.text for j in judged]
    if guard.is_copied_sentence(candidate, texts):
        return "proposal is a sentence copied from a document"
    return None


def _padded(candidate: str, request: RewriteRequest) -> str | None:
    """Why ``candidate`` is no new search: the question plus a word, else ``None``."""
    if guard.pads_the_question(candidate, request.question):
        return PADDED
    return None
