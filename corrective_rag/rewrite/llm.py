"""``LLMRewriter``: asks a chat model for the next query, using the evaluator's feedback.

When the request carries the evaluator's proposal (judge and propose: the grading call already
proposed a next query) the proposal passes the shared drift guard instead of a call of our own;
only a rejected proposal costs a call. The prompt carries the original question, every query
tried, an excerpt of each kept document and what the judged documents were missing. The
candidate then passes the drift guard. The original question is never replaced: a rewrite is
only ever a new query to try next.
"""

from __future__ import annotations

from typing import Any

from corrective_rag.errors import ConfigError, InputError, LLMError, VerdictParseError
from corrective_rag.llm import prompts
from corrective_rag.llm.jsonparse import parse_json_object
from corrective_rag.llm.spent import attach_spent
from corrective_rag.logs import get_logger
from corrective_rag.protocols import ChatModel
from corrective_rag.rewrite.guard import check_rewrite
from corrective_rag.types import Rewrite, RewriteRequest, RewriteSource, Usage

__all__ = ["LLMRewriter"]

log = get_logger(__name__)

_REPLY_TOKENS = 200  # a query and a sentence of rationale


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
        self.strict = bool(strict)
        self.max_feedback = max_feedback
        self.excerpt_chars = excerpt_chars

    def _feedback(self, request: RewriteRequest) -> list[dict[str, Any]]:
        graded = [j for j in request.judged if j.verdict.graded]
        graded.sort(key=lambda j: not j.verdict.relevant)  # kept ones first, stable otherwise
        return [
            {
                "id": j.document.id,
                "relevant": j.verdict.relevant,
                "reasoning": j.verdict.reasoning,
                "missing": ", ".join(j.verdict.missing) or None,
                "excerpt": j.document.text[: self.excerpt_chars] if j.verdict.relevant else "",
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
            proposed = " ".join(str(proposal.query).split())
            reason = check_rewrite(proposed, request.question, request.tried_queries)
            if reason is None:
                why = f"grader's proposal; lacking: {proposal.lacking or '-'}"
                return Rewrite(proposed, rationale=why, source=RewriteSource.PROPOSAL)
            log.info("proposal_rejected", reason=reason, candidate=proposed[:200])
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
